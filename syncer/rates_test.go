package syncer

import (
	"testing"
	"time"
)

// query-status's rates: rows since the start, and rows and events a second since the start and over
// the last 30 seconds, from samples kept a second apart at most.
func TestRateWindow(t *testing.T) {
	var w rateWindow
	t0 := time.Unix(1_000_000, 0)
	if r, a, b, c, d := w.rates(t0, 5, 5); r+a+b+c+d != 0 {
		t.Fatalf("no sample yet: %d %d %d %d %d", r, a, b, c, d)
	}
	w.note(t0, 1000, 10) // the process had committed 1000 rows before this syncer started
	// 100 rows and 10 events a second for 60 s, then 1000 rows and 20 events a second for 30 s.
	rows, events := int64(1000), int64(10)
	at := t0
	for i := 0; i < 90; i++ {
		at = at.Add(time.Second)
		if i < 60 {
			rows, events = rows+100, events+10
		} else {
			rows, events = rows+1000, events+20
		}
		w.note(at, rows, events)
		w.note(at.Add(100*time.Millisecond), rows, events) // within the second: not kept
	}
	if len(w.samples) > 33 {
		t.Errorf("%d samples kept, want the start and about 30 s of them", len(w.samples))
	}
	totalRows, totalRps, recentRps, totalTps, recentTps := w.rates(at, rows, events)
	if totalRows != 60*100+30*1000 {
		t.Errorf("totalRows %d", totalRows)
	}
	if want := int64((60*100 + 30*1000) / 90); totalRps != want {
		t.Errorf("totalRps %d, want %d", totalRps, want)
	}
	if want := int64((60*10 + 30*20) / 90); totalTps != want {
		t.Errorf("totalTps %d, want %d", totalTps, want)
	}
	// The recent window starts at the newest sample at least 30 s old: 1 s of the old rate in 31.
	if recentRps < 960 || recentRps > 1000 || recentTps < 19 || recentTps > 20 {
		t.Errorf("recent: %d rows/s, %d events/s; want about 1000 and 20", recentRps, recentTps)
	}
}
