package control

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Passive health at L4: outlier detection a blind spoofer cannot drive.
//
// The signal. The dataplane counts, per backend, the flows that began with
// a SYN and the handshakes that completed (the client's first ACK came back
// through the LB, so the backend's SYN-ACK reached it). Once a second the
// control plane folds every worker's counters into a sliding window per
// backend (passive_window). The active checks cannot see what this sees: a
// server whose listen queue is full, or whose service port drops SYNs, may
// still answer its health port (the seed chapter's section 5.2).
//
// The threat. In DSR the LB sees only the client's side, so a failed
// handshake is the absence of an ACK, which anyone can manufacture with
// SYNs from forged sources (the lab: 20 spoofed SYNs a second made every
// backend an outlier, "11 of 22 handshakes failed", and the ejections
// reset 200 of 200 connections). What a blind spoofer cannot manufacture:
// an uneven failure pattern (forged SYNs are spread over every backend by
// the same keyed hash as real ones) and a completed handshake from a forged
// source (it never sees the SYN-ACK). See BRIEF "Design notes for the
// hardening round".
//
// The model. A backend is ejected only when all of these hold over the
// window (judgePassive):
//
//  1. enough evidence: at least passive_min handshakes tried, for it and
//     for at least one peer of the same VIP;
//  2. bad in absolute terms: at least passive_threshold of its handshakes
//     failed (the old rule, now only a floor);
//  3. bad compared with its peers (Envoy's success-rate outlier detection,
//     adapted to few hosts: Envoy's mean − 1.9×stddev over all hosts can
//     never eject one of four, so each backend is compared with its peers
//     pooled, leaving it out): its success rate is at most
//     passiveRelative of the peers', and the gap exceeds passiveZ standard
//     errors of the difference of two binomial proportions (passiveZ), so the noise of
//     small counts is not taken for a fault;
//  4. persistent: 1 to 3 held at every judgement (once a second) for a
//     whole window, so the evidence is two windows that share no period.
//     A refusing backend fails all the time; a run of bad luck in the hash
//     does not last (a random-hash simulation at the lab's rates, 5
//     handshakes a backend a second, half forged, made one chance ejection
//     every 1.5 hours without this rule, none in 10 hours with it);
//  5. few enough already out: at most passiveMaxEjectShare of the VIP's
//     backends (at least one) are ejected at once (Envoy's
//     max_ejection_percent), and never one whose ejection would leave fewer
//     healthy backends than panic mode needs (the last healthy ones stay).
//
// An ejection lasts flap_backoff, doubling with each ejection up to
// flap_backoff_max (Envoy's base_ejection_time); it stops new flows only,
// tracked flows follow the VIP's on_down (keep by default). A reload that
// lowers flap_backoff_max cuts a running ejection to end the new maximum
// after it began (as the active checks do), and a backend that has been
// neither ejected nor an outlier for 10 × flap_backoff_max, busy or idle,
// forgets its past ejections. While passive checks are off nothing is
// judged, so no backend is still "an outlier since" when they are back.
//
// What each defence stops, and what it does not:
//
//   - The peer comparison (3, 4) stops a blind flood of forged SYNs at any rate:
//     the keyed hash spreads it evenly, every backend's success rate drops
//     alike, and nobody stands out. It does not stop an attacker who can
//     aim forged SYNs at one backend: one who knows dataplane.hash_key, or
//     one who can make a backend's real clients fail (an on-path attacker
//     dropping its ACKs). It also lets a real failure of every backend at
//     once (a shared dependency) go unejected: that is the active checks'
//     and panic mode's job (section 5.4).
//   - The ejection cap (5) bounds the damage of any attack that gets past
//     (3), and of a true multi-backend failure: at most one backend in ten
//     (at least one) leaves on passive evidence, and never the last healthy
//     ones. It does not stop a slow rotation: an attacker able to aim at
//     backends can eject them one at a time.
//   - Not done here, for want of counters: weighting evidence by source.
//     The workers count per backend, not per source, so neither "count only
//     failures from sources that recently completed a handshake" (the
//     verified-source set, the idea behind SYN cookies) nor "cap the weight
//     of one /24 (/48)" can be computed in the control plane. It would need,
//     per worker: a verified-source set (prefixes /24 and /48 whose handshake
//     completed within the window, e.g. two rotating 64 Ki-bit Bloom
//     filters, one generation per passive_window) and two more counters per
//     backend, SYNsVerified and EstablishedVerified, counting only flows
//     from verified prefixes; passive health would then judge on those.
const (
	// passiveMaxEjectShare is the largest share of a VIP's backends ejected
	// on passive evidence at once; at least one may always be. Envoy's
	// max_ejection_percent defaults to 10 (outlier_detection.proto). No
	// config key yet (passive_max_ejection would be its name).
	passiveMaxEjectShare = 0.10
	// passiveRelative: a backend is an outlier only if its handshake
	// success rate is at most this share of its peers' ("clearly worse").
	passiveRelative = 0.5
	// passiveZ: the gap to the peers must exceed this many standard errors
	// (Envoy uses a 1.9 stddev factor across hosts). 4, because the
	// judgement runs every second for every backend: at the lab's rates
	// (about 30 handshakes a backend per window, half of them forged) a
	// chance ejection needs 2 or fewer of 30 to complete, p < 1e-6, where
	// 3 would allow 5 of 30, p ≈ 2e-4, several a day. A backend that
	// refuses everything while its peers are fine clears 4 at 20 attempts.
	passiveZ = 4.0
)

// signalPeriod is how often the signals are folded and the loads published.
const signalPeriod = time.Second

// foldWait is how long a fold waits for each worker's counters: a
// period, and the longest idle sleep (idle_max_sleep, at most 1 s) on
// top. An idle worker at that sleep answers once a second plus its poll's
// work, and a fold whose request lands just after a poll that answered
// another reader (the stats log, the admin API) waited only a period
// before: it missed every time, and passive health was never judged.
const foldWait = signalPeriod + config.MaxIdleMaxSleep

// passiveState is one backend's window of handshake counts.
type passiveState struct {
	lastSYNs, lastEst uint64 // totals at the previous fold
	syns, est         []uint64
	pos               int
	ejections         int
	backoff           time.Duration
	until             time.Time
	reason            string
	why               string // the evidence of the running ejection (reason without its length)
	stableSince       time.Time
	retrans           uint64
	suspectSince      time.Time // judged an outlier at every fold since; zero: not
	// suspectN counts those judgements: a whole window of them is needed
	// too, not only a window of time. A late fold (the ticker drops ticks
	// while the fold waits for the lock, or a worker did not answer) puts
	// the counts of several seconds in one period, and the window in
	// periods then spans more than passive_window: timed by the clock
	// alone, one bad second was judged twice and ejected.
	suspectN int

	// Latency for peak-ewma: handshake times (SYN to the client's first
	// ACK, a client round trip through the backend) and health-check round
	// trips, folded into one peak EWMA.
	lastHsMs, lastHsN uint64
	latency           sched.EWMA
	handshakeAt       time.Time // the last fold that had handshakes; zero: none yet
}

// foldWindow adds one period's totals to st's window, ends an ejection
// whose time is up, and reports whether that changed the tables.
func (p *Plane) foldWindow(st *backendState, h *config.Health, syns, est, retrans uint64, now time.Time) bool {
	ps := &st.passive
	n := int(h.PassiveWindow / signalPeriod)
	if len(ps.syns) != n {
		ps.syns, ps.est, ps.pos = make([]uint64, n), make([]uint64, n), 0
	}
	dSYN, dEst := sat(syns, ps.lastSYNs), sat(est, ps.lastEst)
	ps.lastSYNs, ps.lastEst = syns, est
	ps.retrans = retrans
	ps.syns[ps.pos], ps.est[ps.pos] = dSYN, dEst
	ps.pos = (ps.pos + 1) % n
	if !ps.until.IsZero() && ps.backoff > h.BackoffMax {
		// flap_backoff_max was lowered (a reload) during the ejection:
		// cut it to end the new maximum after it began, as the active
		// checks cut theirs, so that "up to flap_backoff_max" holds.
		start := ps.until.Add(-ps.backoff)
		ps.backoff = h.BackoffMax
		ps.until = start.Add(ps.backoff)
		ps.reason = fmt.Sprintf("%s; ejected for %v", ps.why, ps.backoff)
	}
	return p.endEjection(st, now)
}

// endEjection ends st's passive ejection if its time is up, and reports
// whether it did (the tables must change).
func (p *Plane) endEjection(st *backendState, now time.Time) bool {
	ps := &st.passive
	if ps.until.IsZero() || now.Before(ps.until) {
		return false
	}
	ps.until, ps.reason, ps.why = time.Time{}, "", ""
	ps.stableSince = now
	p.comeBack(st, now) // slow-start back in (comeBack: unless panic mode uses it)
	p.log.Info("passive ejection over", "vip", st.vip, "backend", st.name)
	for i := range ps.syns { // judge it afresh
		ps.syns[i], ps.est[i] = 0, 0
	}
	return true
}

// windowTotals are the handshakes tried and completed in the window. The
// newest period is left out of both: its handshakes may still be under
// way. Leaving it out of the attempts only (as before) counted a whole
// period more completions than attempts, which skews every rate and
// doubles the noise a peer comparison must tell from a fault; leaving it
// out of both only misses the completions of SYNs sent in the last round
// trip before a period boundary. Completions never exceed attempts.
func (ps *passiveState) windowTotals() (attempts, done uint64) {
	n := len(ps.syns)
	if n == 0 {
		return 0, 0
	}
	newest := (ps.pos + n - 1) % n
	for i := range ps.syns {
		if i != newest {
			attempts += ps.syns[i]
			done += ps.est[i]
		}
	}
	return attempts, min(done, attempts)
}

// passiveJudges reports whether passive checks can judge the backends of a
// VIP with hash fields f: only under the 5-tuple, where the keyed hash
// spreads forged SYNs from any sources over every backend alike. Under
// any other mode one source's SYNs (every port) all reach one backend, so
// a single forged source address, no key needed, would single it out,
// and each ejection would move it and every client's affinity on to the
// next backend.
func passiveJudges(f flow.Fields) bool { return f.Mode == flow.FiveTuple }

// notePassive tells the operator which VIPs of cfg have passive checks
// on that judge nothing (passiveJudges).
func (p *Plane) notePassive(cfg *config.Config) {
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if v.Health.Passive == "on" && !passiveJudges(v.HashFields()) {
			p.log.Warn("passive health checks judge nothing on this VIP: its hash sends all of one source's SYNs to one backend, so a single forged source could have it ejected; the active checks still run",
				"vip", v.Name, "hash", v.HashFields().String())
		}
	}
}

// judgePassive decides the ejections of one VIP's backends from their
// windows (the model above) and reports whether one began.
func (p *Plane) judgePassive(v *dataplane.VIP, members []*backendState, h *config.Health, now time.Time) bool {
	if h.Passive != "on" || !passiveJudges(v.Hash) {
		// Nothing is judged: no backend stays "an outlier at every
		// judgement" across the pause, or turning the checks back on
		// would eject on one bad judgement (rule 4 skipped). And an
		// ejection running when a reload turned them off (or gave the VIP
		// a hash they cannot judge) ends now: nothing would judge it
		// again, and it held the backend out for its whole backoff.
		ended := false
		for _, st := range members {
			st.passive.suspectSince, st.passive.suspectN = time.Time{}, 0
			if !st.passive.until.IsZero() {
				st.passive.until = now
				if p.endEjection(st, now) {
					ended = true
				}
			}
		}
		return ended
	}
	type judged struct {
		st          *backendState
		att, done   uint64
		rate, share float64 // success rate, failed share
	}
	var js []judged
	out := 0
	for _, st := range members {
		if !st.passive.until.IsZero() {
			out++
			continue
		}
		if st.health == HealthDown {
			// The active checks have it out already. Panic mode may use
			// it, and uses it ejected or not: an ejection would change
			// nothing but take the VIP's one-in-ten slot (and hold the
			// backend out after its checks pass), and its failures are
			// no norm for its peers.
			st.passive.suspectSince, st.passive.suspectN = time.Time{}, 0
			continue
		}
		att, done := st.passive.windowTotals()
		if att < uint64(h.PassiveMin) {
			st.passive.suspectSince, st.passive.suspectN = time.Time{}, 0 // no evidence: not an outlier now
			st.passive.forgetIfStable(h, now)
			continue
		}
		r := float64(done) / float64(att)
		js = append(js, judged{st, att, done, r, 1 - r})
	}
	if len(js) < 2 { // nobody to compare with
		for _, j := range js {
			j.st.passive.suspectSince, j.st.passive.suspectN = time.Time{}, 0
			j.st.passive.forgetIfStable(h, now)
		}
		return false
	}
	limit := max(1, int(passiveMaxEjectShare*float64(len(members))))
	sort.SliceStable(js, func(i, j int) bool { return js[i].rate < js[j].rate }) // worst first
	var allAtt, allDone uint64
	for _, j := range js {
		allAtt += j.att
		allDone += j.done
	}
	changed := false
	for _, j := range js {
		ps := &j.st.passive
		pAtt, pDone := allAtt-j.att, allDone-j.done
		peer := float64(pDone) / float64(pAtt)
		pooled := float64(allDone) / float64(allAtt)
		se := math.Sqrt(pooled * (1 - pooled) * (1/float64(j.att) + 1/float64(pAtt)))
		if j.share < h.PassiveThreshold || j.rate > passiveRelative*peer || peer-j.rate <= passiveZ*se {
			ps.suspectSince, ps.suspectN = time.Time{}, 0
			ps.forgetIfStable(h, now)
			continue
		}
		if ps.suspectSince.IsZero() {
			ps.suspectSince = now
		}
		ps.suspectN++
		ps.stableSince = now // an outlier now (ejected or not): not well behaved
		if now.Sub(ps.suspectSince) < h.PassiveWindow || ps.suspectN <= len(ps.syns) || out >= limit || p.lastHealthyLocked(v, j.st) {
			continue
		}
		ps.suspectSince, ps.suspectN = time.Time{}, 0
		p.eject(j.st, h, now, fmt.Sprintf("passive: %d of %d handshakes failed in %v, its peers' %d of %d (%d SYN retransmissions)",
			j.att-j.done, j.att, h.PassiveWindow, pAtt-pDone, pAtt, j.st.passive.retrans))
		out++
		changed = true
	}
	return changed
}

// lastHealthyLocked reports whether ejecting st would leave its VIP with
// fewer healthy backends than panic mode needs (or none): the last healthy
// ones are never ejected on passive evidence.
func (p *Plane) lastHealthyLocked(v *dataplane.VIP, st *backendState) bool {
	total, healthy := 0, 0
	for _, b := range p.backends {
		if b.vip != v.Name || !p.panicCounts(b) {
			continue
		}
		total++
		if b.health != HealthDown && b.passive.until.IsZero() {
			healthy++
		}
	}
	if st.health == HealthDown || st.drained || p.baseWeight(st) == 0 {
		return false // not counted as healthy: ejecting it changes nothing
	}
	after := healthy - 1
	return after < 1 || belowThreshold(after, total, p.cfg.Control.PanicThreshold)
}

// forgetIfStable forgets the past ejections of a backend that has been
// well behaved for long: neither ejected nor judged an outlier for 10 ×
// flap_backoff_max since its last ejection ended. It runs at every
// judgement that finds the backend fine, with or without enough traffic
// to judge: a busy backend that behaves must forget as an idle one does,
// or its next ejection would be doubled for ever.
func (ps *passiveState) forgetIfStable(h *config.Health, now time.Time) {
	if ps.backoff != 0 && !ps.stableSince.IsZero() && now.Sub(ps.stableSince) > 10*h.BackoffMax {
		ps.backoff = 0
	}
}

// eject takes st out of new flows for its backoff.
func (p *Plane) eject(st *backendState, h *config.Health, now time.Time, why string) {
	ps := &st.passive
	if ps.backoff == 0 {
		ps.backoff = h.BackoffBase
	} else {
		ps.backoff = min(2*ps.backoff, h.BackoffMax)
	}
	ps.ejections++
	if ps.until.IsZero() && st.health != HealthDown {
		st.outSince = now
	}
	ps.until = now.Add(ps.backoff)
	ps.why = why
	ps.reason = fmt.Sprintf("%s; ejected for %v", why, ps.backoff)
	p.log.Warn("backend ejected as an outlier", "vip", st.vip, "backend", st.name, "reason", ps.reason)
}
