package worker

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/tributary-db/tributary/loader"
	pb "github.com/tributary-db/tributary/proto"
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/syncer"
)

// load runs the load unit of a task-mode all or full subtask.
func (t *subtask) load(ctx context.Context, sp spec, router *router.Router, down *sql.DB) error {
	return syncer.RunLoad(ctx, syncer.LoadParams{
		Task: sp.task.Name, Source: sp.inst.SourceID, MetaSchema: sp.task.MetaSchema, Upstream: sp.source.From, Down: down,
		Router: router, Epoch: sp.epoch, Agent: t.agent(sp),
		EnableGTID: sp.source.EnableGTID, Dump: sp.task.DumpOf(sp.inst), Load: sp.task.LoadOf(sp.inst), Log: t.log,
		OnUnit: func(u *loader.Unit) {
			t.mu.Lock()
			t.loader = u
			t.mu.Unlock()
		},
	})
}

// loadStatus is query-status's view of a load in progress.
func loadStatus(p loader.Progress) *pb.LoadStatus {
	st := &pb.LoadStatus{FinishedBytes: p.FinishedBytes, TotalBytes: p.TotalBytes, FinishedRows: p.FinishedRows, TotalRows: p.TotalRows,
		MetaBinlog: p.MetaBinlog, State: p.State}
	if p.TotalRows > 0 || p.State == "loaded" || p.State == "switched" {
		st.Progress = fmt.Sprintf("%.2f %%", 100*p.Done())
	}
	if secs := p.Elapsed.Seconds(); secs > 0 {
		bps, rps := float64(p.FinishedBytes)/secs, float64(p.FinishedRows)/secs
		st.Bps, st.Rps = fmt.Sprintf("%.0f", bps), fmt.Sprintf("%.0f", rps)
		if rps > 0 && p.TotalRows > p.FinishedRows {
			st.Eta = (time.Duration(float64(p.TotalRows-p.FinishedRows)/rps) * time.Second).Round(time.Second).String()
		}
	}
	return st
}
