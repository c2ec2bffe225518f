package control

import (
	"fmt"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Passive health at L4. The dataplane counts, per backend, the flows that
// began with a SYN and the handshakes that completed (the client's first
// ACK came back through the LB, so the backend's SYN-ACK reached it). Once
// a second the control plane folds the counters of every worker into a
// sliding window per backend; when enough handshakes were tried in the
// window and too large a share never completed, the backend is ejected as
// an outlier for a backoff that doubles with each ejection (Envoy's outlier
// detection, at L4). An ejected backend counts as down, so panic mode still
// bounds how many can be ejected at once. The active checks cannot see
// this: a server whose listen queue is full, or whose service port drops
// SYNs, may still answer its health port (the chapter's section 5.2).

// signalPeriod is how often the signals are folded and the loads published.
const signalPeriod = time.Second

// passiveState is one backend's window of handshake counts.
type passiveState struct {
	lastSYNs, lastEst uint64 // totals at the previous fold
	syns, est         []uint64
	pos               int
	ejections         int
	backoff           time.Duration
	until             time.Time
	reason            string
	stableSince       time.Time
	retrans           uint64

	// Latency for peak-ewma: handshake times (SYN to the client's first
	// ACK, a client round trip through the backend) and health-check round
	// trips, folded into one peak EWMA.
	lastHsMs, lastHsN uint64
	latency           sched.EWMA
}

// foldSignals updates every backend's window from the workers' counters
// and returns whether an ejection began or ended (the tables must change).
func (p *Plane) foldSignals(counters []dataplane.Counters, now time.Time) bool {
	svc := p.shared.Services.Load()
	changed := false
	loads := &dataplane.Loads{Active: make([]int64, len(svc.Backends)), Latency: make([]sched.EWMA, len(svc.Backends))}
	defer p.shared.Loads.Store(loads) // the schedulers' view, about once a second
	checks := make(map[string]*config.Health, len(p.cfg.VIPs))
	for i := range p.cfg.VIPs {
		checks[p.cfg.VIPs[i].Name] = &p.cfg.VIPs[i].Health
	}
	for _, v := range svc.VIPs {
		if v == nil || checks[v.Name] == nil {
			continue
		}
		h := checks[v.Name]
		for _, id := range v.Members {
			st := p.backends[dataplane.BackendKey(v.Name, svc.Backends[id].Name)]
			if st == nil {
				continue
			}
			var syns, est, retrans, hsMs, active int64
			for i := range counters {
				bc := counters[i].Backends[id]
				if bc.Gen == svc.Backends[id].Gen {
					syns += int64(bc.SYNs)
					est += int64(bc.Established)
					retrans += int64(bc.SYNRetrans)
					hsMs += int64(bc.HandshakeMs)
					active += bc.Active
				}
			}
			loads.Active[id] = active
			p.foldLatency(st, uint64(hsMs), uint64(est))
			loads.Latency[id] = st.passive.latency
			if p.foldBackend(st, h, uint64(syns), uint64(est), uint64(retrans), now) {
				changed = true
			}
		}
	}
	return changed
}

// foldBackend adds one period's deltas to st's window and decides.
func (p *Plane) foldBackend(st *backendState, h *config.Health, syns, est, retrans uint64, now time.Time) bool {
	ps := &st.passive
	n := int(h.PassiveWindow.Duration / signalPeriod)
	if len(ps.syns) != n {
		ps.syns, ps.est, ps.pos = make([]uint64, n), make([]uint64, n), 0
	}
	dSYN, dEst := sat(syns, ps.lastSYNs), sat(est, ps.lastEst)
	ps.lastSYNs, ps.lastEst = syns, est
	ps.retrans = retrans
	ps.syns[ps.pos], ps.est[ps.pos] = dSYN, dEst
	ps.pos = (ps.pos + 1) % n
	changed := false
	if !ps.until.IsZero() && !now.Before(ps.until) {
		ps.until, ps.reason = time.Time{}, ""
		ps.stableSince = now
		st.upSince = now // slow-start back in
		changed = true
		p.log.Info("passive ejection over", "vip", st.vip, "backend", st.name)
		for i := range ps.syns { // judge it afresh
			ps.syns[i], ps.est[i] = 0, 0
		}
	}
	if h.Passive != "on" || !ps.until.IsZero() {
		return changed
	}
	// Attempts of the newest period are left out: their handshakes may
	// still be under way.
	newest := (ps.pos + n - 1) % n
	var attempts, done uint64
	for i := range ps.syns {
		done += ps.est[i]
		if i != newest {
			attempts += ps.syns[i]
		}
	}
	if attempts < uint64(h.PassiveMin) {
		if !ps.stableSince.IsZero() && now.Sub(ps.stableSince) > 10*h.BackoffMax.Duration {
			ps.backoff = 0 // well behaved for long: forget past ejections
		}
		return changed
	}
	failed := sat(attempts, done)
	if float64(failed) < h.PassiveThreshold*float64(attempts) {
		return changed
	}
	if ps.backoff == 0 {
		ps.backoff = h.Backoff.Duration
	} else {
		ps.backoff = min(2*ps.backoff, h.BackoffMax.Duration)
	}
	ps.ejections++
	ps.until = now.Add(ps.backoff)
	ps.reason = fmt.Sprintf("passive: %d of %d handshakes failed in %v (%d SYN retransmissions); ejected for %v", failed, attempts, h.PassiveWindow.Duration, ps.retrans, ps.backoff)
	p.log.Warn("backend ejected as an outlier", "vip", st.vip, "backend", st.name, "reason", ps.reason)
	return true
}

// foldLatency feeds the period's mean handshake time and the health
// check's round-trip average into the backend's peak EWMA (microseconds).
func (p *Plane) foldLatency(st *backendState, hsMs, hsN uint64) {
	ps := &st.passive
	dMs, dN := sat(hsMs, ps.lastHsMs), sat(hsN, ps.lastHsN)
	ps.lastHsMs, ps.lastHsN = hsMs, hsN
	if dN > 0 {
		ps.latency.ObservePeak(int64(dMs * 1000 / dN))
	}
	if p.checks != nil {
		if hs, ok := p.checks.Status(dataplane.BackendKey(st.vip, st.name)); ok && hs.RTTEWMA > 0 {
			ps.latency.ObservePeak(hs.RTTEWMA.Microseconds())
		}
	}
}

func sat(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// RunSignals folds the dataplane's signals once a second (passive health)
// until done is closed.
func (p *Plane) RunSignals(done <-chan struct{}) {
	t := time.NewTicker(signalPeriod)
	defer t.Stop()
	counters := make([]dataplane.Counters, len(p.workers))
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		ok := true
		for i, w := range p.workers {
			if !w.Snapshot(&counters[i], signalPeriod) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		p.mu.Lock()
		if p.foldSignals(counters, p.now()) {
			if err := p.rebuildLocked(); err != nil {
				p.log.Error("table rebuild failed", "err", err)
			}
		}
		p.mu.Unlock()
	}
}
