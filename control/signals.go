package control

import (
	"slices"
	"sync"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/sched"
)

// The signals fold: once a second the workers' counters feed passive
// health (passive.go), the schedulers' loads and the convergence count
// (converge.go).

// foldSignals updates every backend's window from the workers' counters,
// judges each VIP's backends against each other, and returns whether an
// ejection began or ended (the tables must change).
func (p *Plane) foldSignals(counters []dataplane.Counters, now time.Time) bool {
	svc := p.shared.Services.Load()
	changed := false
	loads := &dataplane.Loads{Active: make([]int64, len(svc.Backends)), Latency: make([]sched.EWMA, len(svc.Backends)), Gen: make([]uint32, len(svc.Backends))}
	for id, b := range svc.Backends {
		if b != nil {
			loads.Gen[id] = b.Gen
		}
	}
	defer p.shared.Loads.Store(loads) // the schedulers' view, about once a second
	checks := make(map[string]*config.Health, len(p.cfg.VIPs))
	penalty := make(map[string]time.Duration, len(p.cfg.VIPs))
	for i := range p.cfg.VIPs {
		checks[p.cfg.VIPs[i].Name] = &p.cfg.VIPs[i].Health
		if p.cfg.VIPs[i].Proto() == 6 {
			// Only TCP has handshakes for a check's round trip to be
			// ranked against; a UDP VIP's backends have their checks'
			// alone, which compare fairly (no floor: 0).
			penalty[p.cfg.VIPs[i].Name] = p.cfg.VIPs[i].Penalty
		}
	}
	for _, v := range svc.VIPs {
		if v == nil || checks[v.Name] == nil {
			continue
		}
		h := checks[v.Name]
		members := make([]*backendState, 0, len(v.Members))
		for _, id := range v.Members {
			st := p.backends[dataplane.BackendRef{VIP: v.Name, Backend: svc.Backends[id].Name}]
			if st == nil {
				continue
			}
			members = append(members, st)
			var syns, est, retrans, hsMs, active int64
			for i := range counters {
				bc := counters[i].Backend(id)
				if bc.Gen == svc.Backends[id].Gen {
					syns += int64(bc.SYNs)
					est += int64(bc.Established)
					retrans += int64(bc.SYNRetrans)
					hsMs += int64(bc.HandshakeMs)
					active += bc.Active
				}
			}
			loads.Active[id] = active
			p.foldLatency(st, uint64(hsMs), uint64(est), penalty[v.Name], now)
			loads.Latency[id] = st.passive.latency
			if p.foldWindow(st, h, uint64(syns), uint64(est), uint64(retrans), now) {
				changed = true
			}
		}
		if p.judgePassive(v, members, h, now) {
			changed = true
		}
	}
	p.foldConverging(counters)
	return changed
}

// foldLatency feeds the period's mean handshake time and the health
// check's round-trip average into the backend's peak EWMA (microseconds).
//
// The two are round trips of different lengths: a handshake's goes to the
// client (tens of ms on the Internet), a check's only to the backend (a
// fraction of a ms). A backend that has served no flow since it last
// became usable, or takes no new flows now, has only check samples: fed
// as they are, it would rank far below its serving peers and take every
// new flow until its first handshakes were folded, the EWMA exercise's
// cold-start trap that ewma_penalty is there to prevent. Its check round
// trip is fed as at least penalty, so it starts at the penalty, as a
// backend without a sample is charged. Once its handshakes are folded, an
// idle period lets its estimate fall toward the check's round trip as
// before: an idle backend is tried again.
func (p *Plane) foldLatency(st *backendState, hsMs, hsN uint64, penalty time.Duration, now time.Time) {
	ps := &st.passive
	dMs, dN := sat(hsMs, ps.lastHsMs), sat(hsN, ps.lastHsN)
	ps.lastHsMs, ps.lastHsN = hsMs, hsN
	if dN > 0 {
		ps.latency.ObservePeak(int64(dMs * 1000 / dN))
		ps.handshakeAt = now
	}
	if p.checks != nil {
		if hs, ok := p.checks.Status(checkKey(dataplane.BackendRef{VIP: st.vip, Backend: st.name})); ok && hs.RTTEWMA > 0 {
			rtt := hs.RTTEWMA.Microseconds()
			if p.latencyCold(st) {
				rtt = max(rtt, penalty.Microseconds())
			}
			ps.latency.ObservePeak(rtt)
		}
	}
}

// latencyCold reports whether st's peak EWMA has no handshake of its
// current service behind it: none folded since it last became usable
// (added, back up, undrained, its weight given back), or it takes no new
// flows now (drained, at weight 0, down).
func (p *Plane) latencyCold(st *backendState) bool {
	at := st.passive.handshakeAt
	return at.IsZero() || at.Before(st.upSince) || st.drained || p.baseWeight(st) == 0 || st.health != HealthUp
}

// workerFold is what one fold learnt of one worker.
type workerFold struct {
	answered bool   // it answered this fold's snapshot
	seen     uint64 // its Answers count at the end of the fold
	polling  bool   // answered, or answered another reader since the last fold (the stall watch's test)
}

// note records the worker's answer count at the end of a fold.
func (f *workerFold) note(answers uint64) {
	f.polling = f.answered || answers != f.seen
	f.seen = answers
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
		p.signalStep(counters)
	}
}

// signalStep is one fold of RunSignals. When a worker does not answer the
// counters snapshot within the period (stuck, or asleep for longer with
// idle_max_sleep near its 1 s maximum), the period's counts are not whole,
// so nothing is judged and the loads stay; but the ejections whose time
// is up end all the same: skipping the whole fold kept a passively
// ejected backend out for as long as one worker did not answer.
//
// The same answers tell the stall watch (stall.go) which workers poll.
func (p *Plane) signalStep(counters []dataplane.Counters) {
	if len(p.folds) != len(p.workers) {
		p.folds = make([]workerFold, len(p.workers))
	}
	// Every worker is asked at once: one after the other, each silent
	// worker added foldWait to the fold, and the stall watch judges only
	// at its end (k stuck lcores: a withdrawal k x 2 s late).
	waited := make([]time.Duration, len(p.workers))
	var wg sync.WaitGroup
	for i, w := range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.folds[i].answered, waited[i] = w.SnapshotTimed(&counters[i], p.foldWait, p.now)
		}()
	}
	wg.Wait()
	// A fold that took longer than its wait and a period was not running
	// for a while: the process was stopped (SIGSTOP, a VM paused for
	// migration, a debugger) or starved. Its snapshot deadlines passed
	// during the pause, and the workers, resumed with it, may not have
	// polled again before the fold gave up on them: their silence in this
	// fold is the process's, not theirs (stall.go).
	// Only the fold's own wait counts: its turn behind another reader
	// of the same worker (a status read waits 2 s for a silent one) is
	// no pause, and with readers always ahead no stuck worker was judged.
	overran := slices.Max(append(waited, 0)) > p.foldWait+signalPeriod
	ok := true
	for i, w := range p.workers {
		ok = ok && p.folds[i].answered
		p.folds[i].note(w.Answers())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.noteAnswersLocked(p.folds, now, overran) {
		p.announceLocked()
	}
	changed := false
	if ok {
		changed = p.foldSignals(counters, now)
	} else {
		for _, st := range p.backends {
			if p.endEjection(st, now) {
				changed = true
			}
		}
	}
	if changed {
		if err := p.rebuildLocked(); err != nil {
			p.log.Error("table rebuild failed", "err", err)
		}
	}
}
