// Command run is `make chaos`: one soak of the real binaries under overlapping faults (package chaos),
// its report printed; it exits 1 when the checkers found a failure.
//
//	go run ./chaos/run [-duration 3m] [-seed 1] [-bin DIR] [-rate 40] [-fault-gap 6s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"time"

	"github.com/tributary-db/tributary/tests/chaos"
	"github.com/tributary-db/tributary/tests/framework/mariadbtest"
)

func main() {
	duration := flag.Duration("duration", 3*time.Minute, "how long the workload, the shard DDL and the faults run (DURATION)")
	seed := flag.Uint64("seed", 1, "the schedule's seed: the same seed replays the same faults, DDL order and workload (SEED)")
	bin := flag.String("bin", "", "prebuilt dm-master, dm-worker and dmctl (default: built from this module)")
	rate := flag.Float64("rate", 40, "workload operations a second per source")
	gap := flag.Duration("fault-gap", 6*time.Second, "mean time between two faults")
	noFaults := flag.Bool("no-faults", false, "run without faults (the checker's baseline)")
	settle := flag.Duration("settle", 3*time.Minute, "once the faults stop, the run fails when no lock, stage or position moves for this long")
	flag.Parse()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := chaos.Run(ctx, chaos.Config{Duration: *duration, Seed: *seed, Root: root, Bin: *bin, Rate: *rate, FaultGap: *gap, NoFaults: *noFaults, Settle: *settle, Log: os.Stderr})
	// The servers' template datadir (about 100 MB in TMPDIR) goes; a failing run's own directory stays.
	mariadbtest.RemoveTemplate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	fmt.Print(rep)
	if len(rep.Failures) > 0 {
		os.Exit(1)
	}
}
