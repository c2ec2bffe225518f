package control

// The rebuild: turning the backends' effective state into a new snapshot
// and publishing it with one atomic swap.

import (
	"errors"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// rebuildLocked builds and publishes a new snapshot from the current state:
// the tables, the encapsulator and the next hop of p.cfg, in one store.
func (p *Plane) rebuildLocked() error {
	start := p.now()
	// effective marks panic mode's use of the backends: a build that
	// fails publishes none of it, and the marks go back.
	saved := make(map[*backendState]panicMarks, len(p.backends))
	for _, st := range p.backends {
		saved[st] = panicMarks{st.panicUsed, st.panicLeft, st.panicLate}
	}
	over, panicked, ramping := p.effective(start)
	svc, err := p.build(p.cfg, p.shared.Services.Load(), over, p.nextHopLocked(p.cfg))
	if err != nil {
		p.lastErr = err
		for _, st := range p.backends {
			m := saved[st]
			st.panicUsed, st.panicLeft, st.panicLate = m.used, m.left, m.late
			st.timedOut = false // not published: drainTimeoutPending tries again
		}
		return err
	}
	prev := p.shared.Services.Load()
	p.shared.Services.Store(svc)
	p.rebuilds++
	p.lastDur = p.now().Sub(start)
	p.ops.rebuilt(p.lastDur)
	p.lastErr = nil
	p.ramping = ramping
	for vip, on := range panicked {
		if on != p.panicked[vip] {
			if on {
				p.log.Error("PANIC MODE: too few healthy backends, sending new flows to all of them", "vip", vip, "threshold", p.cfg.Control.PanicThreshold)
			} else {
				p.log.Warn("panic mode over", "vip", vip)
				p.panicOver(vip, start)
			}
		}
	}
	p.panicked = panicked
	if prev != nil {
		p.clearRemovedVIPs(prev, svc)
	}
	p.announceLocked()
	return nil
}

// panicMarks are the fields of a backendState that effective writes for
// panic mode (rebuildLocked restores them when a build fails).
type panicMarks struct {
	used bool
	left time.Time
	late time.Duration
}

// clearRemovedVIPs asks every worker to drop the conntrack entries of VIPs
// that are gone from the new snapshot.
//
// The drops run in the background, worker after worker, and a later
// snapshot may meanwhile give a removed VIP's id to another VIP (the next
// reload may: dataplane.NewServices keeps out of reach only the ids of the
// snapshot just before it), the removed VIP itself put back included. So
// a drop spares the entries pinned to a live backend of the VIP that
// holds the id when it runs (dataplane.DropRemovedVIPOp): those are that
// VIP's flows; the removed VIP's own entries name backends whose ids are
// gone or belong to another incarnation, and go.
func (p *Plane) clearRemovedVIPs(prev, cur *dataplane.Services) {
	var gone []uint16
	for id, v := range prev.VIPs {
		if v == nil {
			continue
		}
		if id >= len(cur.VIPs) || cur.VIPs[id] == nil {
			gone = append(gone, uint16(id))
		}
	}
	if len(gone) == 0 {
		return
	}
	stop := p.runDone // the plane's lifetime: a stopped plane's workers stopped too
	go func() {
		// One pass over each worker's table for all of them.
		for i, w := range p.workers {
			err := w.RunUntil(dataplane.DropRemovedVIPOp(gone...), 10*time.Second, stop)
			if errors.Is(err, dataplane.ErrStopped) {
				return
			}
			if err != nil {
				p.log.Warn("clearing conntrack of removed VIPs", "vip_ids", gone, "worker", i, "err", err)
			}
		}
	}()
}

// panicOver records, on each backend of vip that panic mode was using while
// down or ejected, that it stopped at the snapshot built at now: from
// then on it is out of the table, and comeBack ramps it from where that
// leaves it.
func (p *Plane) panicOver(vip string, now time.Time) {
	for _, st := range p.backends {
		if st.vip == vip && st.panicUsed {
			st.panicLeft = now
		}
	}
}
