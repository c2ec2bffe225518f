package control

// The rebuild: turning the backends' effective state into a new snapshot
// and publishing it with one atomic swap.

import (
	"errors"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// rebuildLocked builds and publishes a new snapshot from the current state:
// the tables, the encapsulator and the next hop of p.cfg, in one store.
func (p *Plane) rebuildLocked() error {
	start := p.now()
	over, panicked, ramping := p.effective(start)
	svc, err := BuildServices(p.cfg, p.shared.Services.Load(), over, p.nextHopLocked(p.cfg))
	if err != nil {
		p.lastErr = err
		for _, st := range p.backends {
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

// clearRemovedVIPs asks every worker to drop the conntrack entries of VIPs
// that are gone from the new snapshot.
//
// An id that the new snapshot already gives to another VIP (the snapshot
// reuses a removed VIP's id only when every other id is taken:
// dataplane.NewServices) is left alone: dropping by VIP id would also drop
// the flows the new VIP took since the swap, and a load-based scheduler
// would place them again elsewhere mid-connection. The removed VIP's
// entries there name backends of the removed VIP, whose ids are gone or
// belong to another incarnation, so they never forward a packet; they
// expire as idle.
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
		for _, id := range gone {
			for i, w := range p.workers {
				err := w.RunUntil(dataplane.DropOp(conntrack.ByVIP(id)), 10*time.Second, stop)
				if errors.Is(err, dataplane.ErrStopped) {
					return
				}
				if err != nil {
					p.log.Warn("clearing conntrack of a removed VIP", "vip_id", id, "worker", i, "err", err)
				}
			}
		}
	}()
}
