package control

// Edge cases of convergence, the latency signals and the status, from a
// mutation audit of control/converge.go and control/signals.go: each test
// fails on the change to the code its comment names.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// A VIP added by a reload on an address never announced is a new address:
// it is held to the fresh instance's rule and withheld until every active
// check of its backends has given its first verdict (announce.go: "one
// withdrawn ... is held to these rules again, as a new one"). api's a1
// comes up, a2 has no verdict yet: api serves on a1 alone, but its address
// stays withheld; a2's first verdict (down) releases it. Counting only the
// backends configured at start as unsettled announced api's address as
// soon as a1 was up, with a table that may still change.
func TestEdgeReloadAddedVIPWithheldUntilEveryVerdict(t *testing.T) {
	f := newFixture(t, baseConfig)
	calls := f.recordAnnounced()
	f.rebuild()
	if got := lastAnnounced(*calls); len(got) != 1 {
		t.Fatalf("unchecked web not announced at start: %v", *calls)
	}
	f.apply(baseConfig + configtest.New().VIP("api", "203.0.113.9", 80).
		Sub("[vip.health]", `kind = "tcp"`).
		Backend("a1", "10.0.3.1").
		Backend("a2", "10.0.3.2").String())
	api := netip.MustParsePrefix("203.0.113.9/32")
	has := func() bool {
		for _, p := range lastAnnounced(*calls) {
			if p == api {
				return true
			}
		}
		return false
	}
	if err := f.plane.SetHealth("api", "a1", true, "test"); err != nil {
		t.Fatal(err)
	}
	f.rebuild()
	if w, _ := f.published("a1"); w == 0 {
		t.Fatalf("a1 up but not in api's table")
	}
	if has() {
		t.Fatalf("api's address announced while a2 has had no verdict: %v", lastAnnounced(*calls))
	}
	if err := f.plane.SetHealth("api", "a2", false, "test"); err != nil {
		t.Fatal(err)
	}
	f.rebuild()
	if !has() || len(lastAnnounced(*calls)) != 2 {
		t.Fatalf("api's address not announced once every check gave a verdict: %v", lastAnnounced(*calls))
	}
}

// ConvergingNewFlows counts new flows, not packets: 30 connections that
// each sent a SYN and two ACKs while converging are 30.
func TestEdgeConvergingCountsFlowsNotPackets(t *testing.T) {
	f := newFixture(t, checkedConfig(""))
	for i := range 30 {
		f.lc.send(syn(t, uint16(4000+i), "S"))
		f.lc.send(syn(t, uint16(4000+i), "A"))
		f.lc.send(syn(t, uint16(4000+i), "A"))
	}
	if st := f.plane.Status(false); !st.Converging || st.ConvergingNewFlows != 30 {
		t.Fatalf("converging %v, converging_new_flows %d; want true, 30", st.Converging, st.ConvergingNewFlows)
	}
}

// The signals fold reads its counter snapshot before taking the lock, so a
// Status read may have counted newer flows before the fold that ends the
// count runs with its older snapshot. The count (a Prometheus counter) is
// the largest reading and never falls: 10 flows in the fold's snapshot, 25
// read by Status, convergence, then the fold: 25 stays.
func TestEdgeConvergingCountNeverFallsAtTheFreeze(t *testing.T) {
	f := newFixture(t, checkedConfig(""))
	for i := range 10 {
		f.lc.send(syn(t, uint16(5000+i), "S"))
	}
	older := f.plane.Status(false).Workers // the fold's snapshot, taken first
	for i := range 15 {
		f.lc.send(syn(t, uint16(5100+i), "S"))
	}
	if st := f.plane.Status(false); st.ConvergingNewFlows != 25 {
		t.Fatalf("converging_new_flows %d, want 25", st.ConvergingNewFlows)
	}
	f.allUp()
	f.plane.mu.Lock()
	f.plane.foldSignals(older, f.plane.now())
	f.plane.mu.Unlock()
	if st := f.plane.Status(false); st.Converging || st.ConvergingNewFlows != 25 {
		t.Fatalf("after convergence and a fold of an older snapshot: converging %v, converging_new_flows %d; want false, 25", st.Converging, st.ConvergingNewFlows)
	}
}

// The reading that ends the count still counts: 12 flows forwarded while
// converging, with no fold or Status read between them and the last
// verdict, are in ConvergingNewFlows once converged (the count stops at
// the first reading after convergence, which includes them).
func TestEdgeConvergingCountKeepsFlowsBeforeTheLastVerdict(t *testing.T) {
	f := newFixture(t, checkedConfig(""))
	for i := range 12 {
		f.lc.send(syn(t, uint16(5200+i), "S"))
	}
	f.allUp()
	if st := f.plane.Status(false); st.Converging || st.ConvergingNewFlows != 12 {
		t.Fatalf("converging %v, converging_new_flows %d; want false, 12", st.Converging, st.ConvergingNewFlows)
	}
	st := f.plane.Status(false)
	f.plane.mu.Lock()
	f.plane.foldSignals(st.Workers, f.plane.now())
	f.plane.mu.Unlock()
	for i := range 5 { // after convergence: not counted
		f.lc.send(syn(t, uint16(5300+i), "S"))
	}
	if st := f.plane.Status(false); st.ConvergingNewFlows != 12 {
		t.Fatalf("converging_new_flows %d after convergence, want 12", st.ConvergingNewFlows)
	}
}

// A backend whose id an earlier incarnation held is measured on its own
// counters only. A worker starts an id's counters again at the new
// incarnation's first packet; until then they are the old one's. be2
// served fast handshakes (1 ms), then moved twice (its id back to its
// first incarnation's) and has had no packet since: it has no handshake
// of its own, so the schedulers must see no latency sample for it (they
// charge it ewma_penalty). Folding the predecessor's handshakes ranked the
// new be2 at 1 ms, the cold-start trap: it would take every new flow.
func TestEdgeReusedIDNotMeasuredOnPredecessorCounters(t *testing.T) {
	toml := func(addr string) string {
		return configtest.New().
			Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
			Section("conntrack", "capacity = 65536").
			Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
			VIP("web", configtest.Web, 80, `scheduler = "peak-ewma"`).
			Backend("be1", "10.0.1.1").
			Backend("be2", addr).
			Backend("be3", "10.0.1.3").
			String()
	}
	f := newFixture(t, toml("10.0.1.2"))
	sim := newSim(f)
	fold := func(skip string) {
		svc := f.shared.Services.Load()
		for _, id := range svc.VIPs[0].Members {
			b := svc.Backends[id]
			if b.Name == skip {
				continue
			}
			c := &sim.c[0].Backends[id]
			c.Gen = b.Gen
			c.SYNs += 50
			c.Established += 50
			c.HandshakeMs += 50 * map[string]uint64{"be1": 40, "be2": 1, "be3": 40}[b.Name]
		}
		f.advance(time.Second)
		f.plane.mu.Lock()
		if f.plane.foldSignals(sim.c, f.plane.now()) {
			f.plane.rebuildLocked()
		}
		f.plane.mu.Unlock()
	}
	for range 3 {
		fold("")
	}
	old := idOf(t, f.shared.Services.Load(), "be2")
	f.apply(toml("10.0.9.1"))
	f.apply(toml("10.0.9.2"))
	cur := idOf(t, f.shared.Services.Load(), "be2")
	if cur.ID != old.ID || cur.Gen == old.Gen {
		t.Fatalf("be2's id not reused by its new incarnation: %d/%d then %d/%d", old.ID, old.Gen, cur.ID, cur.Gen)
	}
	fold("be2") // the new be2 has had no packet: its id's counters are still the old one's
	if us, ok := f.shared.Loads.Load().Latency[cur.ID].Micros(); ok {
		t.Fatalf("new be2, which has had no handshake, published at %d µs (its predecessor's handshakes)", us)
	}
}

// A backend that has served keeps a warm estimate: while it takes no new
// handshake (idle, still up at its weight) its estimate falls toward its
// check's round trip (200 µs), so an idle backend is tried again. Charging
// it the penalty (30 ms) as if it were cold left it there for good.
func TestEdgeIdleWarmBackendFallsTowardCheckRTT(t *testing.T) {
	f := newFixture(t, ewmaPair)
	ids, fold := checkedEWMA(t, f, "web", fixedRTT{200 * time.Microsecond})
	fold(3, func(_ string, bc *dataplane.PacketBytes) { served40ms(bc) })
	fold(20, func(name string, bc *dataplane.PacketBytes) {
		if name == "be1" {
			served40ms(bc)
		}
	})
	l := f.shared.Loads.Load()
	us2, _ := l.Latency[ids["be2"]].Micros()
	if pen := f.plane.Config().VIPs[0].Penalty.Microseconds(); us2 >= pen {
		t.Fatalf("be2 idle for 20 s after serving: estimate %d µs, want below the penalty (%d µs), toward its check's 200 µs", us2, pen)
	}
}

// A backend configured at start that has served no handshake yet is cold,
// like one added later: its check's round trip (200 µs) is fed as at least
// the penalty. At start, be1 took the first second's handshakes (40 ms)
// and be2 none; ranked at its check's 200 µs, be2 would take every new
// flow (the cold-start trap) until its own handshakes were folded.
func TestEdgeStartBackendWithoutHandshakeIsCold(t *testing.T) {
	f := newFixture(t, ewmaPair)
	ids, fold := checkedEWMA(t, f, "web", fixedRTT{200 * time.Microsecond})
	fold(1, func(name string, bc *dataplane.PacketBytes) {
		if name == "be1" {
			bc.SYNs += 100
			bc.Established += 100
			bc.HandshakeMs += 100 * 40
		}
	})
	us2, _ := f.shared.Loads.Load().Latency[ids["be2"]].Micros()
	if pen := f.plane.Config().VIPs[0].Penalty.Microseconds(); us2 < pen {
		t.Fatalf("be2, up since start without a handshake: estimate %d µs, want at least the penalty (%d µs)", us2, pen)
	}
}

// coldAfterPause serves be1 and be2 (40 ms handshakes) for 3 s, takes be2
// out of new flows with out, folds 10 s of be1 alone, gives be2 back with
// back, folds idle folds more of be1 alone, and returns be2's published
// estimate and the penalty (µs).
func coldAfterPause(t *testing.T, out, back func(f *fixture) error, idle int) (us, pen int64) {
	t.Helper()
	f := newFixture(t, ewmaPair)
	ids, fold := checkedEWMA(t, f, "web", fixedRTT{200 * time.Microsecond})
	fold(3, func(_ string, bc *dataplane.PacketBytes) { served40ms(bc) })
	if err := out(f); err != nil {
		t.Fatal(err)
	}
	be1Only := func(name string, bc *dataplane.PacketBytes) {
		if name == "be1" {
			served40ms(bc)
		}
	}
	fold(10, be1Only)
	if err := back(f); err != nil {
		t.Fatal(err)
	}
	fold(idle, be1Only)
	us, _ = f.shared.Loads.Load().Latency[ids["be2"]].Micros()
	return us, f.plane.Config().VIPs[0].Penalty.Microseconds()
}

// A backend that served, was set to weight 0 and was given its weight
// back has no handshake of its current service: until its first one is
// folded it stays at least at the penalty, fold after fold, not at its
// check's 200 µs (which would give it every new flow).
func TestEdgeWeightBackStaysColdUntilHandshake(t *testing.T) {
	us, pen := coldAfterPause(t,
		func(f *fixture) error { return f.plane.SetWeight("web", "be2", 0) },
		func(f *fixture) error { return f.plane.SetWeight("web", "be2", 1) }, 2)
	if us < pen {
		t.Fatalf("be2, weight given back 2 s ago, no handshake since: estimate %d µs, want at least the penalty (%d µs)", us, pen)
	}
}

// A drained backend takes no new flows: its estimate is charged the
// penalty meanwhile, so at its undrain it is not ranked at its check's
// 200 µs until the next fold (the schedulers' loads are published by the
// fold, once a second).
func TestEdgeDrainedBackendStaysColdForUndrain(t *testing.T) {
	us, pen := coldAfterPause(t,
		func(f *fixture) error { return f.plane.Drain("web", "be2") },
		func(f *fixture) error { return f.plane.Undrain("web", "be2") }, 0)
	if us < pen {
		t.Fatalf("be2 undrained after 10 s drained: published estimate %d µs, want at least the penalty (%d µs)", us, pen)
	}
}

// The signals fold freezes the converging count at its first run after
// convergence, whether or not anyone read Status meanwhile: 10 flows
// while converging, the fold, 5 flows after, then the first Status read:
// 10, not 15.
func TestEdgeConvergingCountFrozenByFoldWithoutStatusRead(t *testing.T) {
	f := newFixture(t, checkedConfig(""))
	for i := range 10 {
		f.lc.send(syn(t, uint16(5400+i), "S"))
	}
	f.allUp()
	c := []dataplane.Counters{{}}
	if !f.lc.w.Snapshot(&c[0], 5*time.Second) {
		t.Fatal("no counter snapshot")
	}
	f.plane.mu.Lock()
	f.plane.foldSignals(c, f.plane.now())
	f.plane.mu.Unlock()
	for i := range 5 {
		f.lc.send(syn(t, uint16(5500+i), "S"))
	}
	if st := f.plane.Status(false); st.Converging || st.ConvergingNewFlows != 10 {
		t.Fatalf("converging %v, converging_new_flows %d; want false, 10", st.Converging, st.ConvergingNewFlows)
	}
}

// A handshake's mean time is over the handshakes completed, which the
// workers' HandshakeMs sums: 100 SYNs of which 50 completed in 40 ms each
// are a 40 ms sample, not 20 ms (dividing by the SYNs ranked a backend
// that fails half its handshakes as twice as fast).
func TestEdgeHandshakeMeanOverCompletedHandshakes(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
		VIP("web", configtest.Web, 80, `scheduler = "peak-ewma"`).
		Backend("be1", "10.0.1.1").
		Backend("be2", "10.0.1.2").
		String()
	f := newFixture(t, toml)
	sim := newSim(f)
	be1 := idOf(t, f.shared.Services.Load(), "be1")
	bc := &sim.c[0].Backends[be1.ID]
	bc.HandshakeMs += 50 * 40
	sim.period(map[string]uint64{"be1": 100}, map[string]uint64{"be1": 50})
	if us, _ := f.shared.Loads.Load().Latency[be1.ID].Micros(); us != 40000 {
		t.Fatalf("be1's estimate %d µs, want 40000 (50 handshakes of 40 ms)", us)
	}
}
