// The dashboard reads the master's HTTP API (/api/v1/...) every 2 seconds and redraws its tables.
"use strict";
const API = "../api/v1/";

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function list(items, cls) {
  if (!items || items.length === 0) return el("span", { class: "muted" }, "—");
  const ul = el("div", {});
  for (const it of items) ul.append(el("div", cls ? { class: cls } : {}, it));
  return ul;
}

function fill(id, rows) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows);
}

async function get(path) {
  const r = await fetch(API + path, { cache: "no-store" });
  const j = await r.json();
  if (!r.ok) throw new Error(path + ": " + (j.error_msg || r.status));
  return j.data;
}

function age(s) {
  s = Math.floor(s);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60) + "s";
  return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
}

async function refresh() {
  try {
    const [masters, workers, tasks, locks] = await Promise.all([
      get("cluster/masters"), get("cluster/workers"), get("tasks?with_status=true"), get("shard-ddl-locks")]);
    fill("masters", masters.map(m => el("tr", { "data-master": m.name },
      el("td", {}, m.name), el("td", {}, m.addr),
      el("td", { class: m.alive ? "ok" : "bad" }, m.alive ? "alive" : "down"),
      el("td", {}, m.leader ? "leader" : ""))));
    fill("workers", workers.map(w => el("tr", { "data-worker": w.name },
      el("td", {}, w.name), el("td", {}, w.addr),
      el("td", { class: w.bound_stage === "offline" ? "bad" : "ok" }, w.bound_stage),
      el("td", {}, w.bound_source_name || "—"))));
    const trows = [];
    for (const t of tasks) {
      for (const s of (t.status_list || [])) {
        const sy = s.sync_status;
        trows.push(el("tr", { "data-task": t.name, "data-source": s.source_name },
          el("td", {}, t.name), el("td", {}, s.source_name), el("td", {}, s.worker_name),
          el("td", { class: s.stage === "Running" ? "ok" : "warn" }, s.stage || "—"), el("td", {}, s.unit || "—"),
          el("td", {}, sy ? sy.syncer_binlog + " / " + sy.master_binlog : "—"),
          el("td", {}, s.unresolved_ddl_lock_id || "—"),
          el("td", { class: "bad" }, s.error_msg || "")));
      }
    }
    fill("tasks", trows);
    document.getElementById("nolocks").textContent = locks.length === 0 ? "no DDL lock exists" : "";
    fill("locks", locks.map(l => {
      const tables = el("div", {});
      for (const t of l.tables) {
        tables.append(el("div", { class: "tables", "data-source": t.source },
          el("b", {}, t.source + ": "),
          el("span", { class: "ok" }, "synced " + (t.synced.join(", ") || "none")), "; ",
          el("span", { class: t.unsynced.length ? "bad" : "ok" }, "unsynced " + (t.unsynced.join(", ") || "none"))));
      }
      const conflict = l.conflict.length === 0 ? el("span", { class: "muted" }, "none")
        : list(l.conflict.map(c => c.source + ": " + c.ddls.join("; ")), "bad");
      return el("tr", { "data-lock": l.id, "data-stage": l.stage },
        el("td", {}, el("code", {}, l.id)),
        el("td", { class: l.stage === "conflict" ? "bad" : "warn" }, l.stage),
        el("td", {}, l.owner || "—"),
        el("td", {}, list(l.ddls.map(d => el("code", {}, d)))),
        el("td", { class: "synced" }, list(l.synced, "ok")),
        el("td", { class: "unsynced" }, list(l.unsynced, "bad")),
        el("td", {}, tables),
        el("td", {}, age(l.age_seconds)),
        el("td", {}, conflict));
    }));
    document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.setAttribute("data-loaded", "true");
  } catch (e) {
    document.getElementById("status").textContent = "error: " + e.message;
  }
}

refresh();
setInterval(refresh, 2000);
