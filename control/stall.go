package control

import (
	"slices"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
)

// A worker (forwarding lcore) that stops polling its queue black-holes
// the flows the NIC's RSS gives that queue, while the process, its BGP
// sessions and its other workers look alive: the routers keep sending the
// instance its share. The signals fold (RunSignals) asks every worker for
// a counter snapshot once a second, and a worker answers at the end of
// each burst or idle poll (a sleeping one within idle_max_sleep, at most
// 1 s); one that has answered no reader (the fold, the stats log, the
// admin API: Worker.Answers) for control.stall_timeout is stalled.
// While any worker is stalled the instance withdraws every VIP (a fleet's
// other instances build the same tables, so the flows moved to them keep
// their backends), logs it, and reports it (Status.Stalled, the admin
// API's stalled_workers, fulcrum_workers_stalled); it announces them
// again at the first fold after every worker has answered. With
// stall_timeout = 0 a stall is only reported.

// stallWatch is what the control plane knows of its workers' liveness,
// guarded by Plane.mu.
type stallWatch struct {
	watching bool        // WorkersStarted has been called
	answered []time.Time // per worker: the last snapshot it answered, or when watching began
	stalled  []int       // workers without an answer for stall_timeout, in order
	since    time.Time   // when the instance withdrew for a stall (zero: it has not)
}

// WorkersStarted tells the control plane that the forwarding loops run:
// from now on a worker that answers no counter snapshot for
// control.stall_timeout is stalled. Silence before (the loops not yet
// launched) does not count.
func (p *Plane) WorkersStarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.stall.watching = true
	p.stall.answered = make([]time.Time, len(p.workers))
	for i := range p.stall.answered {
		p.stall.answered[i] = now
	}
}

// noteAnswersLocked folds one round of snapshots: folds[i].polling tells
// whether worker i answered any reader since the last round. A fold that
// overran (the process paused or starved while it waited) judges no
// silent worker: one stalled stays stalled, any other is judged at the
// next fold, which asks it again. It returns whether the set of stalled
// workers changed.
func (p *Plane) noteAnswersLocked(folds []workerFold, now time.Time, overran bool) bool {
	w := &p.stall
	if !w.watching || len(w.answered) != len(folds) {
		return false
	}
	timeout := p.cfg.Control.StallTimeout
	var stalled []int
	for i, f := range folds {
		if f.polling {
			w.answered[i] = now
			continue
		}
		if overran {
			if slices.Contains(w.stalled, i) {
				stalled = append(stalled, i)
			}
			continue
		}
		if now.Sub(w.answered[i]) >= stallLimit(timeout) {
			stalled = append(stalled, i)
		}
	}
	if slices.Equal(stalled, w.stalled) {
		return false
	}
	was := len(w.stalled) > 0
	w.stalled = stalled
	switch {
	case len(stalled) > 0 && !was:
		w.since = now
		attrs := []any{"workers", stalled, "silent_for", now.Sub(w.answered[stalled[0]]).Round(time.Second), "stall_timeout", timeout}
		if timeout > 0 {
			p.log.Error("withdrawing every VIP: a worker has answered no counter snapshot for control.stall_timeout (stuck: its queue's flows are dropped); they are announced again when every worker answers", attrs...)
		} else {
			p.log.Error("a worker has answered no counter snapshot for "+config.DefaultStallTimeout.String()+" (stuck: its queue's flows are dropped); VIPs stay announced (control.stall_timeout = 0)", attrs...)
		}
	case len(stalled) > 0:
		p.log.Error("stalled workers changed", "workers", stalled)
	default:
		p.log.Warn("every worker answers again; VIPs announced as before the stall", "stalled_for", now.Sub(w.since).Round(time.Second))
		w.since = time.Time{}
	}
	return true
}

// stallLimit is how long a worker's silence makes it stalled: the
// configured timeout, or with 0 (report only) the default's.
func stallLimit(timeout time.Duration) time.Duration {
	if timeout == 0 {
		return config.DefaultStallTimeout
	}
	return timeout
}

// stallWithdrawsLocked reports whether a stall withdraws every VIP now.
func (p *Plane) stallWithdrawsLocked() bool {
	return len(p.stall.stalled) > 0 && p.cfg.Control.StallTimeout > 0
}

// Responsive reports whether the control plane's lock could be taken
// within d: the systemd watchdog's test that the control plane still
// works (a deadlock or a lock held for ever would leave the instance
// announcing tables that health and reloads no longer change). At most
// one probe waits for the lock at a time; a call after a timeout waits
// on the same probe.
func (p *Plane) Responsive(d time.Duration) bool {
	p.probeMu.Lock()
	if p.probe != nil {
		select {
		case <-p.probe:
			// An earlier probe that timed out has taken the lock since:
			// that says nothing of now (the lock may be held again).
			p.probe = nil
		default:
		}
	}
	if p.probe == nil {
		ch := make(chan struct{})
		p.probe = ch
		go func() {
			p.mu.Lock()
			p.mu.Unlock() // empty: that the lock can be taken is the answer
			close(ch)
		}()
	}
	ch := p.probe
	p.probeMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		p.probeMu.Lock()
		if p.probe == ch {
			p.probe = nil
		}
		p.probeMu.Unlock()
		return true
	case <-t.C:
		return false
	}
}
