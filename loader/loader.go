// Package loader is the full-load unit of a subtask (task-mode all and full): it copies what one
// source's tables hold at a consistent snapshot into the downstream, exactly once, then hands over to
// the sync unit at the snapshot's binlog position.
//
// The copy streams: reader connections on one snapshot (taken under a global read lock of a few
// milliseconds, or MariaDB's lock-free snapshot status with one reader) select a table's rows in
// primary-key order, chunk by chunk, and each chunk is written with multi-row INSERTs in one downstream
// transaction together with the chunk's row of the load state in the task's checkpoint table, so a
// kill at any moment resumes after the last committed chunk, without a gap and without a duplicate.
// A merged target is loaded under a hidden name and renamed into place in one RENAME TABLE only when
// every source has loaded (a barrier through the shard DDL lock machinery: Barrier), so readers never
// see it half loaded.
package loader

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/ddl"
	"github.com/tributary-db/tributary/internal/failpoint"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/vocab"
)

// Barrier is the cut-over across the sources of a task: Arrive returns once every source has loaded
// (exec: this source renames the hidden tables into place), and done reports that this source has
// taken the cut-over into account (its sync checkpoint is written).
type Barrier interface {
	Arrive(ctx context.Context) (exec bool, done func(context.Context) error, err error)
}

// Config configures the load of one source of one task.
type Config struct {
	Task, Source string
	Upstream     *sql.DB // the source (its session: time_zone UTC, character_set_results binary)
	Downstream   *sql.DB
	Store        *meta.Store
	Router       *router.Router
	Threads      int   // reader connections on the snapshot (mydumpers threads)
	Rows         int   // rows per chunk (mydumpers rows; 0: from ChunkBytes)
	ChunkBytes   int64 // bytes per chunk when Rows is 0 (mydumpers chunk-filesize)
	PoolSize     int   // downstream transactions at once (loaders pool-size)
	OnDuplicate  string
	Barrier      Barrier
	Log          *zap.Logger
	// AfterChunk, if set, runs after each committed chunk; an error stops the load as a crash would
	// (tests).
	AfterChunk func(vocab.TableName) error
}

// Unit is the load of one source.
type Unit struct {
	cfg Config
	log *zap.Logger

	state      atomic.Value // string
	started    time.Time
	totalRows  atomic.Int64
	totalBytes atomic.Int64
	doneRows   atomic.Int64
	doneBytes  atomic.Int64
	// sentRows, sentBytes: of the chunks in flight, the rows sent downstream and not yet committed
	// (query-status counts them, so a table copied in one transaction shows its progress too).
	sentRows  atomic.Int64
	sentBytes atomic.Int64
	snapPos   atomic.Value // string
	// noBackslash: the downstream session's sql_mode has NO_BACKSLASH_ESCAPES (strings are then
	// escaped by doubling quotes only).
	noBackslash bool
	// noLocalInfile: the downstream refused LOAD DATA LOCAL INFILE once; INSERTs from then on.
	noLocalInfile atomic.Bool
}

// New returns a load unit; Run runs it.
func New(cfg Config) *Unit {
	if cfg.Threads <= 0 {
		cfg.Threads = 4
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = cfg.Threads
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = 64 << 20
	}
	if cfg.OnDuplicate == "" {
		cfg.OnDuplicate = "error"
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	u := &Unit{cfg: cfg, log: cfg.Log.With(zap.String("unit", "load"))}
	u.state.Store("")
	u.snapPos.Store("")
	return u
}

// Result is what the sync unit starts from after the load.
type Result struct {
	Pos  vocab.Position // the first snapshot's position: the sync unit reads from here
	GTID string
	// From is, per loaded upstream table, the position after which its events apply (its copy holds
	// every event up to there).
	From map[vocab.TableName]vocab.Position
	// Columns are the loaded tables' columns at the first snapshot, for the sync unit's schema tracker.
	Columns map[vocab.TableName][]vocab.Column
	// Switched: the cut-over and the hand-over were already recorded by an earlier run.
	Switched bool

	done func(context.Context) error
}

// Progress is the load's state for query-status. The finished rows and bytes are those committed
// downstream and those of the chunks in flight sent so far.
type Progress struct {
	State                     string // snapshot, loading, loaded (waiting for the cut-over), switched
	FinishedRows, TotalRows   int64
	FinishedBytes, TotalBytes int64
	Elapsed                   time.Duration
	MetaBinlog                string
}

// Progress returns the load's progress (totals are the source's estimates).
func (u *Unit) Progress() Progress {
	p := Progress{State: u.state.Load().(string), FinishedRows: u.doneRows.Load() + u.sentRows.Load(), TotalRows: u.totalRows.Load(),
		FinishedBytes: u.doneBytes.Load() + u.sentBytes.Load(), TotalBytes: u.totalBytes.Load(), MetaBinlog: u.snapPos.Load().(string)}
	if !u.started.IsZero() {
		p.Elapsed = time.Since(u.started)
	}
	switch {
	case p.State == stateLoaded || p.State == stateSwitched:
		// done: the totals are what was copied
		p.TotalRows, p.TotalBytes = p.FinishedRows, p.FinishedBytes
	case p.FinishedRows > 0:
		// The source's byte estimate is InnoDB's on-disk size, not the values' bytes counted here:
		// the total is the row estimate at the bytes per row copied so far.
		p.TotalRows = max(p.TotalRows, p.FinishedRows)
		p.TotalBytes = int64(float64(p.FinishedBytes) / float64(p.FinishedRows) * float64(p.TotalRows))
	default:
		p.TotalBytes = 0 // nothing copied yet: no estimate in the same unit
	}
	return p
}

// Done is how much of the load is copied, from 0 to 1: rows copied over the estimated rows, and never 1
// before the copy has ended.
func (p Progress) Done() float64 {
	switch {
	case p.State == stateLoaded || p.State == stateSwitched:
		return 1
	case p.TotalRows <= 0:
		return 0
	}
	return min(float64(p.FinishedRows)/float64(p.TotalRows), 0.9999)
}

// Run loads the source (or resumes its load) and passes the cut-over barrier. The caller then writes
// the sync unit's checkpoint with Finish.
func (u *Unit) Run(ctx context.Context) (Result, error) {
	u.started = time.Now()
	if err := u.cfg.Store.Init(ctx); err != nil {
		return Result{}, err
	}
	var mode string
	if err := u.cfg.Downstream.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		return Result{}, fmt.Errorf("read the downstream's sql_mode: %w", err)
	}
	u.noBackslash = strings.Contains(strings.ToUpper(mode), "NO_BACKSLASH_ESCAPES")
	rows, err := u.cfg.Store.LoadRows(ctx)
	if err != nil {
		return Result{}, err
	}
	h, lanes, err := decodeState(rows)
	if err != nil {
		return Result{}, err
	}
	if h != nil {
		u.snapPos.Store(h.Pos.String())
	}
	if h != nil && h.State == stateSwitched {
		u.state.Store(stateSwitched)
		res, err := u.result(rows, h)
		res.Switched = true
		return res, err
	}
	if h == nil || h.State == stateLoading {
		if h, lanes, err = u.load(ctx, h, lanes); err != nil {
			return Result{}, err
		}
		h.State = stateLoaded
		if err := u.writeHeader(ctx, u.cfg.Downstream, h); err != nil {
			return Result{}, err
		}
	}
	u.noteTotals(lanes)
	u.state.Store(stateLoaded)
	failpoint.Inject("load-loaded") // every lane copied and the header says loaded; no info put yet
	u.log.Info("source loaded; waiting for every source of the task to load before the cut-over",
		zap.Int64("rows", u.doneRows.Load()), zap.Int64("bytes", u.doneBytes.Load()), zap.Duration("elapsed", time.Since(u.started)))
	exec, done, err := u.cfg.Barrier.Arrive(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("load cut-over: %w", err)
	}
	if exec {
		if err := u.cutOver(ctx); err != nil {
			return Result{}, err
		}
		failpoint.Inject("load-renamed") // the owner renamed the hidden tables; no sync checkpoint yet
	}
	if rows, err = u.cfg.Store.LoadRows(ctx); err != nil {
		return Result{}, err
	}
	res, err := u.result(rows, h)
	res.done = done
	return res, err
}

// Finish writes the sync unit's checkpoint up and marks the load switched in one transaction, then
// tells the barrier this source is through.
func (u *Unit) Finish(ctx context.Context, res Result, up meta.CheckpointUpdate) error {
	if !res.Switched {
		rows, err := u.cfg.Store.LoadRows(ctx)
		if err != nil {
			return err
		}
		h, _, err := decodeState(rows)
		if err != nil || h == nil {
			return errors.Join(err, errors.New("load state vanished before the hand-over"))
		}
		h.State = stateSwitched
		err = u.inTx(ctx, func(tx *sql.Tx) error {
			if err := u.cfg.Store.Write(ctx, tx, up); err != nil {
				return err
			}
			return u.writeHeader(ctx, tx, h)
		})
		if err != nil {
			return err
		}
		failpoint.Inject("load-switched") // the sync checkpoint is written; the cut-over's done is not
	}
	u.state.Store(stateSwitched)
	if res.done != nil {
		return res.done(ctx)
	}
	return nil
}

func (u *Unit) result(rows map[string]meta.LoadRow, h *header) (Result, error) {
	_, from, err := Segments(rows)
	if err != nil {
		return Result{}, err
	}
	res := Result{Pos: h.Pos, GTID: h.GTID, From: from, Columns: map[vocab.TableName][]vocab.Column{}}
	for _, t := range h.Tables {
		res.Columns[t.Src] = t.Cols
	}
	return res, nil
}

func (u *Unit) noteTotals(lanes []*lane) {
	var rows, bytes int64
	for _, l := range lanes {
		rows += l.Rows
		bytes += l.Bytes
	}
	u.doneRows.Store(rows)
	u.doneBytes.Store(bytes)
}

// found is an upstream table as a snapshot shows it.
type found struct {
	info              tableInfo
	create            string
	comment           string // its table comment
	estRows, estBytes int64
}

// load takes a snapshot and copies every lane not done yet: a first start plans the lanes, a resumed
// one (h not nil) checks that the tables it still has to copy did not change since the first snapshot.
func (u *Unit) load(ctx context.Context, h *header, lanes []*lane) (*header, []*lane, error) {
	u.state.Store("snapshot")
	var tables map[vocab.TableName]*found
	snap, err := takeSnapshot(ctx, u.cfg.Upstream, u.cfg.Threads, u.log, func(c *sql.Conn) ([]vocab.TableName, error) {
		var err error
		if tables, err = u.inspect(ctx, c); err != nil {
			return nil, err
		}
		return slices.Collect(maps.Keys(tables)), nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot of source %s: %w", u.cfg.Source, err)
	}
	defer snap.close()
	u.snapPos.Store(snap.pos.String())
	u.log.Info("snapshot taken", zap.Stringer("pos", snap.pos), zap.String("gtid", snap.gtid), zap.Bool("read-lock", snap.locked),
		zap.Int("readers", len(snap.conns)), zap.Int("tables", len(tables)))
	if err := sameShardDefinitions(u.cfg.Source, tables); err != nil {
		return nil, nil, err
	}
	var totalRows, totalBytes int64
	for _, f := range tables {
		totalRows += f.estRows
		totalBytes += f.estBytes
	}
	if h == nil {
		h = &header{State: stateLoading, Pos: snap.pos, GTID: snap.gtid}
		if lanes, err = u.plan(ctx, snap, h, tables); err != nil {
			return nil, nil, err
		}
	} else if err := u.resume(h, lanes, tables, snap.pos); err != nil {
		return nil, nil, err
	}
	u.noteTotals(lanes)
	u.totalRows.Store(totalRows)
	u.totalBytes.Store(totalBytes)
	if err := u.createHidden(ctx, h, tables); err != nil {
		return nil, nil, err
	}
	u.state.Store(stateLoading)
	if err := u.copyAll(ctx, snap, h, lanes); err != nil {
		return nil, nil, err
	}
	return h, lanes, nil
}

// sameShardDefinitions checks that the shard tables of one target have the same columns in the
// snapshot. They differ when a shard DDL ran on some of them as the snapshot was taken: the binlog after
// the snapshot then holds that DDL for some shards only, and their shard group would wait for the others
// forever. DM allows no shard DDL during the full load; here the load stops before copying anything, and
// the subtask's retry takes a new snapshot, which succeeds once every shard of the source has the DDL.
func sameShardDefinitions(source string, tables map[vocab.TableName]*found) error {
	first := map[vocab.TableName]vocab.TableName{}
	for _, t := range slices.SortedFunc(maps.Keys(tables), func(a, b vocab.TableName) int { return strings.Compare(a.String(), b.String()) }) {
		f := tables[t]
		other, seen := first[f.info.Target]
		if !seen {
			first[f.info.Target] = t
			continue
		}
		if !slices.Equal(f.info.Sig, tables[other].info.Sig) {
			return fmt.Errorf("source %s: shard tables %s and %s of target %s have different columns in the load's snapshot "+
				"(a DDL ran on some shards as the task started; DM allows no shard DDL during the full load): nothing was copied, "+
				"and the load takes a new snapshot when the subtask retries, which succeeds once every shard of the source has the DDL",
				source, other, t, f.info.Target)
		}
	}
	return nil
}

// inspect lists the source's replicated tables with their columns, key and definition, on the
// snapshot's first connection (under the read lock when there is one). Each table is read once with
// LIMIT 0 so that the snapshot holds its metadata lock: its definition cannot change until the load
// ends.
func (u *Unit) inspect(ctx context.Context, c *sql.Conn) (map[vocab.TableName]*found, error) {
	tables, err := dbutil.TableEstimates(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("list tables of source %s: %w", u.cfg.Source, err)
	}
	out := map[vocab.TableName]*found{}
	var order []vocab.TableName
	for _, e := range tables {
		t := e.Table
		if u.cfg.Router.Skip(t) {
			continue
		}
		f := &found{estRows: e.Rows, estBytes: e.Bytes}
		f.info.Src, f.info.Target = t, u.cfg.Router.Route(t)
		out[t] = f
		order = append(order, t)
	}
	for _, t := range order {
		f := out[t]
		if _, err := c.ExecContext(ctx, "SELECT 1 FROM "+t.String()+" LIMIT 0"); err != nil {
			return nil, fmt.Errorf("open %s on source %s: %w", t, u.cfg.Source, err)
		}
		if f.info.Cols, err = dbutil.Columns(ctx, c, t); err != nil {
			return nil, err
		}
		if f.info.Sig, err = signature(ctx, c, t); err != nil {
			return nil, err
		}
		var name string
		if err := c.QueryRowContext(ctx, "SHOW CREATE TABLE "+t.String()).Scan(&name, &f.create); err != nil {
			return nil, fmt.Errorf("read definition of %s on source %s: %w", t, u.cfg.Source, err)
		}
		var comment sql.NullString
		if err := c.QueryRowContext(ctx, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Name).Scan(&comment); err != nil {
			return nil, fmt.Errorf("read the comment of %s on source %s: %w", t, u.cfg.Source, err)
		}
		f.comment = comment.String
		if err := intKey(ctx, c, &f.info); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func signature(ctx context.Context, c *sql.Conn, t vocab.TableName) ([]string, error) {
	rows, err := c.QueryContext(ctx, "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", t, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, typ, data string
		if err := rows.Scan(&name, &typ, &data); err != nil {
			return nil, err
		}
		out = append(out, strings.ToLower(name)+" "+dbutil.ComparableType(typ)+" "+strings.ToLower(data))
	}
	return out, rows.Err()
}

var intTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true}

// intKey finds a single-column integer primary key that is not generated.
func intKey(ctx context.Context, c *sql.Conn, ti *tableInfo) error {
	rows, err := c.QueryContext(ctx, "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX", ti.Src.Schema, ti.Src.Name)
	if err != nil {
		return fmt.Errorf("primary key of %s: %w", ti.Src, err)
	}
	var key []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return err
		}
		key = append(key, k)
	}
	rows.Close()
	if len(key) != 1 {
		return rows.Err()
	}
	for i, col := range ti.Cols {
		if !strings.EqualFold(col.Name, key[0]) || col.Generated {
			continue
		}
		fields := strings.Fields(ti.Sig[i])
		if len(fields) >= 3 && intTypes[fields[len(fields)-1]] {
			ti.Key, ti.KeyOrdinal, ti.KeyUnsigned = col.Name, i, col.Unsigned
		}
	}
	return nil
}

// plan records the first snapshot, the tables and their lanes, in one transaction.
func (u *Unit) plan(ctx context.Context, snap *snapshot, h *header, tables map[vocab.TableName]*found) ([]*lane, error) {
	var lanes []*lane
	targets := map[vocab.TableName]bool{}
	for _, t := range sortedKeys(tables) {
		f := tables[t]
		f.info.ChunkRows = u.chunkRows(f)
		h.Tables = append(h.Tables, f.info)
		targets[f.info.Target] = true
		if f.info.Key == "" {
			lanes = append(lanes, &lane{Table: t, Whole: true})
			continue
		}
		lo, hi, err := keyBounds(ctx, snap.conns[0], t, f.info.Key)
		if err != nil {
			return nil, err
		}
		n := 1
		if per := f.info.ChunkRows; f.estRows > 2*int64(per) {
			n = int(min(int64(len(snap.conns)), f.estRows/int64(per)))
		}
		lanes = append(lanes, splitLanes(t, lo, hi, n)...)
	}
	var err error
	if h.LoadID, err = newLoadID(); err != nil {
		return nil, err
	}
	for _, target := range sortedKeys(targets) {
		m, err := u.placement(ctx, target)
		if err != nil {
			return nil, err
		}
		if m.Hidden != "" {
			m.Comment = tables[definedFrom(tables, target)].comment
		}
		h.Targets = append(h.Targets, m)
	}
	err = u.inTx(ctx, func(tx *sql.Tx) error {
		if err := u.writeHeader(ctx, tx, h); err != nil {
			return err
		}
		for _, l := range lanes {
			if err := u.writeLane(ctx, tx, l); err != nil {
				return err
			}
		}
		return nil
	})
	return lanes, err
}

// resume checks a resumed load's tables against the first snapshot: a table with lanes left to copy
// must have the same columns (a DDL between the snapshots would mix two shapes in one target); one
// that is gone now has nothing more to copy.
func (u *Unit) resume(h *header, lanes []*lane, tables map[vocab.TableName]*found, pos vocab.Position) error {
	info := map[vocab.TableName]tableInfo{}
	for _, t := range h.Tables {
		info[t.Src] = t
	}
	for _, l := range lanes {
		if l.Done {
			continue
		}
		f, ok := tables[l.Table]
		if !ok {
			u.log.Warn("table dropped while its load was interrupted: the rest of it is empty", zap.Stringer("table", l.Table))
			l.commit("", pos, true, 0, 0)
			continue
		}
		if !slices.Equal(f.info.Sig, info[l.Table].Sig) {
			return fmt.Errorf("source %s: table %s changed (a DDL ran) while its load was interrupted: its copy cannot continue in the new shape. Load again: stop-task, then start-task --remove-meta (the hidden tables of the load are dropped with the meta)", u.cfg.Source, l.Table)
		}
	}
	u.log.Info("resuming the load", zap.Stringer("first-snapshot", h.Pos), zap.Stringer("snapshot", pos))
	return nil
}

func (u *Unit) chunkRows(f *found) int {
	if u.cfg.Rows > 0 {
		return u.cfg.Rows
	}
	avg := int64(100)
	if f.estRows > 0 && f.estBytes > 0 {
		avg = max(f.estBytes/f.estRows, 1)
	}
	return int(min(max(u.cfg.ChunkBytes/avg, 1000), 200000))
}

// placement decides where a target is loaded: in place when it exists already (refused when it holds
// rows that no source of the task loaded and on-duplicate is error), else under its hidden name, which
// must not be taken by a table the task's loads did not create.
//
// The load headers are read after the downstream is looked at: another source writes its header before
// it creates a hidden table or loads rows in place, so whatever is seen downstream is named by a header
// read afterwards.
func (u *Unit) placement(ctx context.Context, target vocab.TableName) (hiddenMap, error) {
	exists, err := tableExists(ctx, u.cfg.Downstream, target)
	if err != nil {
		return hiddenMap{}, err
	}
	if exists {
		var one int
		err := u.cfg.Downstream.QueryRowContext(ctx, "SELECT 1 FROM "+target.String()+" LIMIT 1").Scan(&one)
		if err == nil && u.cfg.OnDuplicate == "error" {
			heads, herr := u.headers(ctx)
			if herr != nil {
				return hiddenMap{}, herr
			}
			for _, h := range heads {
				for _, m := range h.Targets {
					if m.Hidden == "" && m.Target == target {
						return hiddenMap{Target: target}, nil // another source of the task loads it in place
					}
				}
			}
			return hiddenMap{}, fmt.Errorf("downstream table %s exists and holds rows: a full load does not write into it (loaders on-duplicate: error). Empty it, or set on-duplicate to ignore or replace to merge into it", target)
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return hiddenMap{}, fmt.Errorf("look into downstream table %s: %w", target, err)
		}
		u.log.Warn("the target exists before the load: it is loaded in place and visible while loading", zap.Stringer("target", target))
		return hiddenMap{Target: target}, nil
	}
	heads, err := u.headers(ctx)
	if err != nil {
		return hiddenMap{}, err
	}
	hidden := hiddenFor(u.cfg.Task, target, heads)
	ht, err := inspectHidden(ctx, u.cfg.Downstream, u.cfg.Task, hidden, heads)
	if err != nil {
		return hiddenMap{}, err
	}
	if ht.owner == hiddenAbsent || ht.owner == hiddenOurs {
		return hiddenMap{Target: target, Hidden: hidden.Name}, nil
	}
	return hiddenMap{}, refusal(u.cfg.Task, target, hidden, ht, "resume-task")
}

// headers reads the load headers of every source of the task.
func (u *Unit) headers(ctx context.Context) (map[string]*header, error) {
	rows, err := u.cfg.Store.LoadHeaders(ctx)
	if err != nil {
		return nil, err
	}
	return decodeHeaders(u.cfg.Task, rows)
}

func tableExists(ctx context.Context, db *sql.DB, t vocab.TableName) (bool, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Schema, t.Name).Scan(&n); err != nil {
		return false, fmt.Errorf("look for downstream table %s: %w", t, err)
	}
	return n > 0, nil
}

// definedFrom is the upstream table a target is created from: the first of its tables ("" when its
// tables are gone).
func definedFrom(tables map[vocab.TableName]*found, target vocab.TableName) vocab.TableName {
	for _, t := range sortedKeys(tables) {
		if tables[t].info.Target == target {
			return t
		}
	}
	return vocab.TableName{}
}

// createHidden creates the tables the load writes into (hidden ones, or targets that do not exist),
// from the upstream definition of their first table. A hidden table is created with the mark of this
// source's load, and written into only if it is the task's loads' (another source may have created it).
func (u *Unit) createHidden(ctx context.Context, h *header, tables map[vocab.TableName]*found) error {
	for _, m := range h.Targets {
		dest := m.dest()
		src := definedFrom(tables, m.Target)
		if src.Name == "" {
			continue // its tables are gone: nothing more to copy there
		}
		route := func(t vocab.TableName) vocab.TableName {
			if t == src {
				return dest
			}
			return u.cfg.Router.Route(t)
		}
		stmt, err := ddl.TargetDefinition(tables[src].create, src, dest, route)
		if err == nil && m.Hidden != "" && h.LoadID != "" {
			stmt, err = ddl.WithTableComment(stmt, hiddenMark(u.cfg.Task, h.LoadID))
		}
		if err != nil {
			return fmt.Errorf("definition of %s on source %s: %w", src, u.cfg.Source, err)
		}
		for _, q := range []string{"CREATE DATABASE IF NOT EXISTS " + vocab.TableName{Schema: dest.Schema}.String(), stmt} {
			if _, err := u.cfg.Downstream.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("create %s downstream: %w", dest, err)
			}
		}
		if m.Hidden == "" {
			continue
		}
		heads, err := u.headers(ctx)
		if err != nil {
			return err
		}
		ht, err := inspectHidden(ctx, u.cfg.Downstream, u.cfg.Task, dest, heads)
		if err != nil {
			return err
		}
		if ht.owner != hiddenOurs {
			return refusal(u.cfg.Task, m.Target, dest, ht, "resume-task")
		}
	}
	return nil
}

func (m hiddenMap) dest() vocab.TableName {
	if m.Hidden == "" {
		return m.Target
	}
	return vocab.TableName{Schema: m.Target.Schema, Name: m.Hidden}
}

func (u *Unit) writeHeader(ctx context.Context, e meta.Execer, h *header) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return u.cfg.Store.WriteLoad(ctx, e, meta.LoadRow{ID: meta.LoadPrefix, Pos: h.Pos, GTID: h.GTID, Data: string(data)})
}

func (u *Unit) writeLane(ctx context.Context, e meta.Execer, l *lane) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	var pos vocab.Position
	if n := len(l.Segs); n > 0 {
		pos = l.Segs[n-1].Pos
	}
	return u.cfg.Store.WriteLoad(ctx, e, meta.LoadRow{ID: l.id(), Pos: pos, Data: string(data)})
}

// inTx runs f in a downstream transaction that holds the checkpoint's owner row in share mode (a newer
// binding of the source fences it), retrying deadlocks and lock wait timeouts.
func (u *Unit) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	return u.retry(ctx, "load transaction retried", func() error { return u.txOnce(ctx, f) })
}

// retry runs f again after a deadlock or lock wait timeout, up to 5 times with a growing pause.
func (u *Unit) retry(ctx context.Context, what string, f func() error, fields ...zap.Field) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !dbutil.Retryable(err) || attempt >= 5 || ctx.Err() != nil {
			return err
		}
		u.log.Warn(what, append(fields, zap.Error(err), zap.Int("attempt", attempt))...)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt*attempt) * 100 * time.Millisecond):
		}
	}
}

func (u *Unit) txOnce(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := u.cfg.Downstream.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := u.cfg.Store.CheckEpoch(ctx, tx, true); err != nil {
		tx.Rollback()
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// cutOver renames every hidden table of the task's sources into place in one RENAME TABLE, then gives
// each target its upstream table's comment back (the hidden table's was the load's mark). It is run by
// the barrier's owner, and again by a new owner after a crash: a rename that happened is seen (the
// hidden table is gone, the target is there, still marked if its comment was not given back yet) and
// not repeated. A hidden table that is not the task's loads' is never renamed.
func (u *Unit) cutOver(ctx context.Context) error {
	heads, err := u.headers(ctx)
	if err != nil {
		return err
	}
	pairs := map[vocab.TableName]vocab.TableName{}
	for _, h := range heads {
		for _, m := range h.Targets {
			if m.Hidden != "" {
				pairs[m.Target] = m.dest()
			}
		}
	}
	var renames []string
	comments := map[vocab.TableName]string{} // targets whose comment is to be given back
	for _, target := range sortedKeys(pairs) {
		hidden := pairs[target]
		he, err := inspectHidden(ctx, u.cfg.Downstream, u.cfg.Task, hidden, heads)
		if err != nil {
			return err
		}
		te, err := inspectHidden(ctx, u.cfg.Downstream, u.cfg.Task, target, heads)
		if err != nil {
			return err
		}
		switch {
		case he.owner != hiddenAbsent && te.owner == hiddenAbsent:
			if he.owner != hiddenOurs {
				return fmt.Errorf("load cut-over: nothing renamed: %w", refusal(u.cfg.Task, target, hidden, he, "load again (stop-task, start-task --remove-meta)"))
			}
			renames = append(renames, hidden.String()+" TO "+target.String())
			if _, _, marked := parseMark(he.comment); marked {
				comments[target] = he.by.restoreComment(target)
			}
		case he.owner == hiddenAbsent && te.owner != hiddenAbsent: // renamed before a crash
			if mtask, id, marked := parseMark(te.comment); marked && mtask == u.cfg.Task {
				for _, h := range heads {
					if h.LoadID == id {
						comments[target] = h.restoreComment(target)
					}
				}
			}
		case he.owner != hiddenAbsent:
			return fmt.Errorf("load cut-over: downstream table %s was created while the task loaded it; its loaded rows are in %s. Rename or drop yours, then resume-task", target, hidden)
		default:
			return fmt.Errorf("load cut-over: neither %s nor its loaded table %s exists downstream", target, hidden)
		}
	}
	if len(renames) > 0 {
		q := "RENAME TABLE " + strings.Join(renames, ", ")
		if _, err := u.cfg.Downstream.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("load cut-over %s: %w", q, err)
		}
		u.log.Info("load cut-over: loaded tables renamed into place", zap.Strings("renames", renames))
	}
	for _, target := range sortedKeys(comments) {
		q := "ALTER TABLE " + target.String() + " COMMENT = '" + escapeString(comments[target], u.noBackslash) + "' " + CommentBack
		if _, err := u.cfg.Downstream.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("load cut-over: give %s its comment back: %w", target, err)
		}
	}
	return nil
}

// copyAll copies the lanes not done yet, one reader connection each at a time, at most PoolSize
// downstream transactions at once.
func (u *Unit) copyAll(ctx context.Context, snap *snapshot, h *header, lanes []*lane) error {
	info := map[vocab.TableName]tableInfo{}
	for _, t := range h.Tables {
		info[t.Src] = t
	}
	dest := map[vocab.TableName]vocab.TableName{}
	for _, m := range h.Targets {
		dest[m.Target] = m.dest()
	}
	queue := make(chan *lane, len(lanes))
	for _, l := range lanes {
		if !l.Done {
			queue <- l
		}
	}
	close(queue)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	sem := make(chan struct{}, u.cfg.PoolSize)
	stopLog := u.logProgress(ctx)
	defer stopLog()
	for _, conn := range snap.conns {
		wg.Add(1)
		go func(conn *sql.Conn) {
			defer wg.Done()
			for l := range queue {
				ti := info[l.Table]
				c := &copier{u: u, conn: conn, lane: l, info: ti, dest: dest[ti.Target], pos: snap.pos, sem: sem}
				if err := c.run(ctx); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}(conn)
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func (u *Unit) logProgress(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p := u.Progress()
				u.log.Info("load progress", zap.Int64("rows", p.FinishedRows), zap.Int64("total-rows", p.TotalRows),
					zap.Int64("bytes", p.FinishedBytes), zap.Int64("total-bytes", p.TotalBytes), zap.Duration("elapsed", p.Elapsed))
			}
		}
	}()
	return cancel
}

func sortedKeys[V any](m map[vocab.TableName]V) []vocab.TableName {
	out := make([]vocab.TableName, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b vocab.TableName) int { return strings.Compare(a.String(), b.String()) })
	return out
}
