// The Keeper's counts of a lock's keys against its task's sources (which decide whether a lock is idle).

package pessimist

// lockCounts summarizes a lock's keys against its task's sources.
type lockCounts struct {
	waiting  int             // sources of the task with an info and no operation, not participants of the exec
	implicit int             // participants of the exec that have not finished the round (see implicitSkip)
	foreign  int             // info and operation keys of sources not in the task
	notDone  int             // operations not done
	done     int             // operations done
	execs    map[string]bool // sources holding an exec operation
}

// srcCount is what one source contributes to a lock's counts.
type srcCount struct {
	waiting, implicit, foreign, notDone, done int
	exec                                      bool
}

// count is what one source contributes to a lock's counts.
func (k *Keeper) count(l *lockState, src string) (c srcCount) {
	in := k.taskSets[l.task].in[src]
	i, hasInfo := l.infos[src]
	o, hasOp := l.ops[src]
	if hasInfo && !hasOp && in {
		switch {
		case !l.participant(src):
			c.waiting = 1
		case l.implicitSkip(i):
			c.implicit = 1
		}
		// else a participant's info of its next round: it waits for this round's cleanup
	}
	if !in {
		if hasInfo {
			c.foreign++
		}
		if hasOp {
			c.foreign++
		}
	}
	if hasOp {
		if o.Done {
			c.done = 1
		} else {
			c.notDone = 1
		}
		c.exec = o.Exec
	}
	return
}

// change runs f, which changes src's keys of l, and updates l's counts. A change of an exec operation
// changes what every participant counts as: the lock is recounted (a few times per round).
func (k *Keeper) change(l *lockState, src string, f func()) {
	before, hadOp := l.ops[src]
	c0 := k.count(l, src)
	f()
	after, hasOp := l.ops[src]
	if hadOp && before.Exec || hasOp && after.Exec {
		l.setExec()
		l.cnt = k.recount(l)
		return
	}
	c1 := k.count(l, src)
	l.cnt.waiting += c1.waiting - c0.waiting
	l.cnt.implicit += c1.implicit - c0.implicit
	l.cnt.foreign += c1.foreign - c0.foreign
	l.cnt.notDone += c1.notDone - c0.notDone
	l.cnt.done += c1.done - c0.done
}

// recount computes l's counts from scratch (after its task's sources or its exec changed; tests
// compare it with the kept counts).
func (k *Keeper) recount(l *lockState) lockCounts {
	var c lockCounts
	srcs := map[string]bool{}
	for s := range l.infos {
		srcs[s] = true
	}
	for s := range l.ops {
		srcs[s] = true
	}
	for s := range srcs {
		sc := k.count(l, s)
		c.waiting += sc.waiting
		c.implicit += sc.implicit
		c.foreign += sc.foreign
		c.notDone += sc.notDone
		c.done += sc.done
		if sc.exec {
			if c.execs == nil {
				c.execs = map[string]bool{}
			}
			c.execs[s] = true
		}
	}
	return c
}

func sameCounts(a, b lockCounts) bool {
	if a.waiting != b.waiting || a.implicit != b.implicit || a.foreign != b.foreign || a.notDone != b.notDone || a.done != b.done || len(a.execs) != len(b.execs) {
		return false
	}
	for s := range a.execs {
		if !b.execs[s] {
			return false
		}
	}
	return true
}
