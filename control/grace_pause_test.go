package control

// A lost next hop's grace across a pause of the whole process.

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// step runs Run's once-a-second step received d after the last one.
func (f *fixture) step(d time.Duration) {
	f.advance(d)
	f.tick()
}

func gatewayedBase(t *testing.T) *fixture {
	f := newFixture(t, gatewayed(baseConfig))
	f.step(0)
	return f
}

// The IPv4 next hop is lost, 5 s pass, and the process is stopped for a
// minute (SIGSTOP, a VM paused for migration). The minute does not count
// toward the grace: the address stays announced at the first step after
// the pause, and is withdrawn once the process has run 15 s without the
// next hop. Counting the pause withdrew it at once, while the resolver
// (which holds an entry that failed across a pause) had not looked again.
func TestNextHopGraceSkipsAPause(t *testing.T) {
	f := gatewayedBase(t)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	if len(lastAnnounced(*calls)) != 1 {
		t.Fatalf("not announced: %v", *calls)
	}
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	for range 5 {
		f.step(time.Second)
	}
	f.step(time.Minute)
	if got := lastAnnounced(*calls); len(got) != 1 {
		t.Fatalf("next hop lost 5 s before a 1 min pause: withdrawn (%v) at the first step after it", got)
	}
	ran := 6 * time.Second // 5 steps and the second before the pause
	for ran < NextHopGrace-time.Second {
		f.step(time.Second)
		ran += time.Second
	}
	if got := lastAnnounced(*calls); len(got) != 1 {
		t.Fatalf("next hop lost for %v of running time: withdrawn (%v) before the grace", ran, got)
	}
	f.step(time.Second)
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("next hop lost for %v of running time (and a 1 min pause): still announced %v", ran+time.Second, got)
	}
}

// The same pause, and the first thing the process does after it is not
// Run's step but a rebuild something else asked for: an operator's drain
// through the admin API, a weight set, a reload. Each rebuild
// announces; it judged the grace by the clock, pause included, and
// withdrew the address until Run's step a moment later, which put the
// pause back out of the grace and announced it again: a withdrawal and an
// announcement the routers pass on, for nothing. Only a step ends a grace.
func TestNextHopGraceSkipsAPauseBeforeRunsStep(t *testing.T) {
	for _, c := range []struct {
		name  string
		after func(f *fixture) error
	}{
		{"drain", func(f *fixture) error { return f.plane.Drain("web", "be2") }},
		{"weight", func(f *fixture) error { return f.plane.SetWeight("web", "be3", 7) }},
		{"reload", func(f *fixture) error {
			return f.plane.Apply(mustParse(f.t, gatewayed(strings.Replace(baseConfig, `slow_start = "10s"`, `slow_start = "20s"`, 1))))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := gatewayedBase(t)
			calls := f.recordAnnounced()
			f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
			f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
			for range 5 {
				f.step(time.Second)
			}
			n := len(*calls)
			f.advance(time.Minute) // stopped: no step, nothing runs
			if err := c.after(f); err != nil {
				t.Fatal(err)
			}
			f.step(time.Second) // Run's overdue step
			if got := (*calls)[n:]; len(got) != 0 {
				t.Fatalf("next hop lost 5 s before a 1 min pause, then a %s: announced %v after it; want no change", c.name, got)
			}
			ran := 6 * time.Second
			for ran < NextHopGrace {
				f.step(time.Second)
				ran += time.Second
			}
			if got := lastAnnounced(*calls); len(got) != 0 {
				t.Errorf("next hop lost for %v of running time: still announced %v", ran, got)
			}
		})
	}
}

// A loss whose grace ended before the pause stays acted on: the address,
// withdrawn, is not announced again by the pause, nor by a rebuild after.
func TestNextHopGraceEndedBeforePauseStaysWithdrawn(t *testing.T) {
	f := gatewayedBase(t)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	for range int(NextHopGrace/time.Second) + 1 {
		f.step(time.Second)
	}
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Fatalf("not withdrawn after the grace: %v", got)
	}
	f.step(time.Minute)
	f.rebuild()
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("next hop lost for the grace, then a pause: announced again %v", got)
	}
}

// Steps late by up to stepSlack are no pause: the grace ends on time.
func TestNextHopGraceLateStepsNoPause(t *testing.T) {
	f := gatewayedBase(t)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	for range int(NextHopGrace / (2 * time.Second)) {
		f.step(2 * time.Second)
	}
	f.step(2 * time.Second)
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("next hop lost for %v in steps 2 s apart: still announced %v", 2*time.Second*time.Duration(int(NextHopGrace/(2*time.Second))+1), got)
	}
}

// The step after a gap (a pause of the process, or Run busy) comes 3 s
// after the previous one; the IPv4 next hop was lost 2.5 s after that
// previous step, by the resolver's SetNextHop (the process was running
// then: the loss was seen). The loss may be re-dated by at most the part
// of the gap after it: never past the step itself. It was re-dated by the
// whole gap less 1 s, 1.5 s into the future: the status says "missing for
// -2s" and the address stays announced without a next hop 2 s past the
// grace. After a 10 min pause, a loss the resolver reports before Run
// receives its (overdue) step is held for 10 min + 15 s.
func TestNextHopLossAfterGapNotPostdated(t *testing.T) {
	f := gatewayedBase(t)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	if len(lastAnnounced(*calls)) != 1 {
		t.Fatalf("not announced: %v", *calls)
	}
	f.step(time.Second)
	f.advance(2500 * time.Millisecond)
	lostAt := f.plane.now()
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	f.step(500 * time.Millisecond) // 3 s after the previous step
	f.plane.mu.Lock()
	since, now := f.plane.hopLost[0].since, f.plane.now()
	state := hopState(f.plane.hopLost[0], now)
	f.plane.mu.Unlock()
	if since.After(now) || strings.Contains(state, "-") {
		t.Errorf("loss seen %v before the step dated %v after it (%q)", now.Sub(lostAt), since.Sub(now), state)
	}
	for f.plane.now().Sub(lostAt) < NextHopGrace+time.Second {
		f.step(time.Second)
	}
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("next hop lost %v ago, the process running all along: still announced %v", f.plane.now().Sub(lostAt), got)
	}
}

// Run is busy, not paused: every step it rebuilds (a slow start is under
// way) and the rebuild takes seconds (the clock moves 1 s at each of its
// readings: a large configuration on a loaded host). The process, the
// resolver and the workers run all along, and the workers drop the VIP's
// traffic (no-next-hop) from the loss on. The README: "The 15 s are of
// running time: while the process is stopped (SIGSTOP, a VM paused) they
// do not run". Each step came more than 2 s after the previous one, so
// holdGraceAcrossPauseLocked took Run's own work for a pause and re-dated
// the loss by it: the grace became 15 steps, however long each took (here
// still announced 30 s after the loss, with the process running).
func TestNextHopGraceCountsRunsOwnWork(t *testing.T) {
	toml := gatewayed(baseConfig)
	toml = strings.Replace(toml, `slow_start = "10s"`, `slow_start = "1h"`, 1)
	f := newFixture(t, toml)
	f.step(0)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	if len(lastAnnounced(*calls)) != 1 {
		t.Fatalf("not announced: %v", *calls)
	}
	name := f.plane.Config().VIPs[0].Backends[0].Name
	if err := f.plane.Drain("web", name); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Undrain("web", name); err != nil { // ramping for 1 h: Run rebuilds at every step
		t.Fatal(err)
	}
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	lostAt := time.Unix(0, f.clock.Load())
	f.stride.Store(int64(time.Second))
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() { defer close(exited); f.plane.Run(done) }()
	t.Cleanup(func() { close(done); <-exited })
	deadline := time.Now().Add(60 * time.Second)
	for {
		f.plane.mu.Lock()
		ran := time.Unix(0, f.clock.Load()).Sub(lostAt)
		got := lastAnnounced(*calls)
		f.plane.mu.Unlock()
		if ran >= 2*NextHopGrace {
			if len(got) != 0 {
				t.Errorf("next hop lost %v ago, Run busy (not paused) at every step: still announced %v", ran, got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run made the clock run only %v in 60 s", ran)
		}
		time.Sleep(50 * time.Millisecond) // polling, not synchronisation
	}
}

// The IPv4 next hop is lost and, 5 s of running later, the process is
// stopped for a minute (SIGSTOP, a VM paused). On resume, Run receives a
// kick (a health verdict, a passive ejection's end) before its overdue
// step: its rebuild announces from the snapshot with the minute counted
// toward the grace, and withdraws the address at once, where the README
// says "The 15 s are of running time ... after a pause the resolver has
// what was left of them". (Run's own step would have re-dated the loss.)
func TestKickAfterPauseCountsThePause(t *testing.T) {
	toml := gatewayed(baseConfig)
	f := newFixture(t, toml)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	if len(lastAnnounced(*calls)) != 1 {
		t.Fatalf("not announced: %v", *calls)
	}
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	f.advance(5 * time.Second) // the process ran 5 s without the next hop
	done, exited := make(chan struct{}), make(chan struct{})
	go func() { defer close(exited); f.plane.Run(done) }()
	t.Cleanup(func() { close(done); <-exited })
	deadline := time.Now().Add(10 * time.Second)
	for { // Run's first step: it waits for the next one from here
		f.plane.mu.Lock()
		stepped := !f.plane.lastStep.IsZero()
		f.plane.mu.Unlock()
		if stepped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run took no step in 10 s")
		}
		time.Sleep(10 * time.Millisecond) // polling
	}
	f.plane.mu.Lock()
	f.advance(time.Minute) // the pause: Run's next step is overdue
	n := f.plane.rebuilds
	f.plane.mu.Unlock()
	f.plane.Kick()
	for {
		f.plane.mu.Lock()
		rebuilt, got := f.plane.rebuilds > n, lastAnnounced(*calls)
		f.plane.mu.Unlock()
		if rebuilt {
			if len(got) != 1 {
				t.Errorf("next hop lost for 5 s of running time and a 1 min pause: withdrawn (%v) by the first rebuild after the pause", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not rebuild on the kick")
		}
		time.Sleep(10 * time.Millisecond) // polling
	}
}

// An address withdrawn because its next hop was lost for the grace is
// announced again, per the README, "as soon as the gateway resolves". A
// reload that changes the gateway (the operator's fix of a typo) restarts
// the loss's clock (a new hopLoss, ended false), and announceLocked then
// re-announced the withdrawn address at once, although the new gateway
// had not resolved: every packet it pulled in was dropped as no-next-hop,
// and 15 s later it was withdrawn again (a flap the routers pass on).
func TestWithdrawnAddressNotReannouncedByGatewayReload(t *testing.T) {
	toml := gatewayed(baseConfig)
	f := newFixture(t, toml)
	calls := f.hopLostForGrace()
	n := len(*calls)
	gw2 := netip.MustParseAddr("192.0.2.199")
	f.apply(strings.Replace(toml, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv4 = "192.0.2.199"`, 1))
	f.plane.SetNextHop(gw2, netip.Addr{}, dataplane.NextHop{}) // not resolved yet
	f.tickFor(NextHopGrace + time.Second)
	if got := (*calls)[n:]; len(got) != 0 {
		t.Fatalf("withdrawn for a lost next hop, then a reload to a gateway that does not resolve: announcements %v; want none", got)
	}
	f.plane.SetNextHop(gw2, netip.Addr{}, hop4)
	if got := lastAnnounced(*calls); len(got) != 1 {
		t.Errorf("new gateway resolved: announced %v; want the address", got)
	}
}
