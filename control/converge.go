package control

import "github.com/fulcrumlb/fulcrum/dataplane"

// Convergence of a fresh instance (finding 4 of the hardening round: both
// LBs restarted at once reset 9 of 200 connections). After a restart the
// router may keep sending this instance traffic over the old route before
// any announcement, so the instance forwards before its health checks have
// settled. Two rules keep it in step with its fleet peers meanwhile:
//
//   - every backend configured at start whose checks have given no verdict
//     is HealthUnknown, routed like up: the peers, which have been running,
//     believe it up unless it is not, and a table with every configured
//     backend is the fleet's table in the common case. A verdict of down
//     removes it from new flows (and on_down decides about tracked ones).
//   - nothing is announced until every such check has given its first
//     verdict (announceLocked), so the router does not pull new traffic
//     onto a table that may still change.
//
// Status reports Converging and the new flows forwarded meanwhile, from
// the workers' per-VIP new-flow counters (folded in signals.go).

// unsettledVIPsLocked lists the VIPs with a checked backend that has had
// no verdict yet.
func (p *Plane) unsettledVIPsLocked() map[string]bool {
	out := map[string]bool{}
	for _, st := range p.backends {
		if st.health != HealthUnchecked && !st.settled {
			out[st.vip] = true
		}
	}
	return out
}

// convergingLocked reports whether a backend configured at start still
// waits for its first verdict. Backends added by a reload do not count:
// the instance had converged before them.
func (p *Plane) convergingLocked() bool {
	for _, st := range p.backends {
		if st.initial && st.health != HealthUnchecked && !st.settled {
			return true
		}
	}
	return false
}

// vipNewFlows sums the new flows of every VIP over the workers. The
// counters start at zero with the process, so while converging the sum is
// the count of flows forwarded while converging.
func vipNewFlows(counters []dataplane.Counters) uint64 {
	var n uint64
	for i := range counters {
		for _, v := range counters[i].VIPs {
			n += v.NewFlows
		}
	}
	return n
}

// foldConverging counts the flows forwarded while converging: the running
// total until the first fold after convergence, which freezes it.
func (p *Plane) foldConverging(counters []dataplane.Counters) {
	if p.convergedFold {
		return
	}
	// Readings come from the fold and from Status, each with its own
	// counter snapshot taken before the lock: keep the largest.
	p.convergingFlows = max(p.convergingFlows, vipNewFlows(counters))
	if !p.convergingLocked() {
		p.convergedFold = true
	}
}
