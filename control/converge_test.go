package control

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// A fresh instance serves with every configured backend until its checks
// have given their first verdicts (health unknown counts as up, as the
// fleet's peers still believe), announces nothing meanwhile, and counts
// the flows it forwarded while converging (finding 4).
func TestFreshInstanceConverges(t *testing.T) {
	f := newFixture(t, checkedConfig(""))
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { calls = append(calls, set) }, nil)
	announced := func() int {
		if len(calls) == 0 {
			return 0
		}
		return len(calls[len(calls)-1])
	}
	allInTable := func(when string) {
		t.Helper()
		for _, b := range f.plane.Status(false).VIPs[0].Backends {
			if b.Slots == 0 || b.Down || b.Effective != WeightScale || b.Health == "down" {
				t.Errorf("%s: %s not in the table as up: %+v", when, b.Name, b)
			}
		}
	}
	if st := f.plane.Status(false); !st.Converging || announced() != 0 {
		t.Fatalf("before any verdict: converging %v, announced %d prefixes", st.Converging, announced())
	}
	allInTable("before any verdict")
	for i := 0; i < 50; i++ {
		f.lc.send(syn(t, uint16(7000+i), "S"))
	}
	// Half the verdicts: still converging, still every backend in the table
	// (the other two are not known to be down).
	f.setHealth("be1", true)
	f.setHealth("be2", true)
	st := f.plane.Status(false)
	if !st.Converging || announced() != 0 {
		t.Fatalf("after 2 of 4 verdicts: converging %v, announced %d", st.Converging, announced())
	}
	allInTable("after 2 of 4 verdicts")
	f.plane.mu.Lock()
	f.plane.foldSignals(st.Workers, f.plane.now())
	f.plane.mu.Unlock()
	if st := f.plane.Status(false); st.ConvergingNewFlows != 50 {
		t.Errorf("converging new flows %d, want 50", st.ConvergingNewFlows)
	}
	f.setHealth("be3", true)
	f.setHealth("be4", true)
	st = f.plane.Status(false)
	if st.Converging || announced() != 1 {
		t.Fatalf("after every verdict: converging %v, announced %d", st.Converging, announced())
	}
	allInTable("after every verdict")
	// Flows after convergence are not counted (beyond the next fold).
	f.plane.mu.Lock()
	f.plane.foldSignals(st.Workers, f.plane.now())
	f.plane.mu.Unlock()
	for i := 0; i < 20; i++ {
		f.lc.send(syn(t, uint16(8000+i), "S"))
	}
	st = f.plane.Status(false)
	f.plane.mu.Lock()
	f.plane.foldSignals(st.Workers, f.plane.now())
	f.plane.mu.Unlock()
	if st := f.plane.Status(false); st.ConvergingNewFlows != 50 {
		t.Errorf("converging new flows %d after convergence, want 50", st.ConvergingNewFlows)
	}
}

// A verdict of down during convergence: the backend leaves the table (no
// new flows) but nothing is announced until the rest have answered.
func TestConvergingDownVerdict(t *testing.T) {
	f := newFixture(t, checkedConfig(""))
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { calls = append(calls, set) }, nil)
	f.setHealth("be1", false)
	if w, down := f.published("be1"); w != 0 || down {
		t.Fatalf("be1 down during convergence: weight %d down %v", w, down)
	}
	for _, b := range []string{"be2", "be3"} {
		f.setHealth(b, true)
	}
	if len(calls) > 0 && len(calls[len(calls)-1]) > 0 {
		t.Fatal("announced before every check answered")
	}
	f.setHealth("be4", true)
	if len(calls) == 0 || len(calls[len(calls)-1]) != 1 || f.plane.Status(false).Converging {
		t.Fatalf("not announced after every verdict: %v", calls)
	}
}

// The announced prefix covers every port of the address: while one VIP on
// it waits for its checks, the address is withheld, even if another VIP on
// it has settled.
func TestAnnouncementWaitsForEveryVIPOnTheAddress(t *testing.T) {
	toml := checkedConfig("") + `
[[vip]]
name = "tls"
address = "203.0.113.7"
port = 443
  [[vip.backend]]
  name = "t1"
  address = "10.0.2.1"
`
	f := newFixture(t, toml)
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { calls = append(calls, set) }, nil)
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		f.setHealth(b, true)
	}
	if len(calls) > 0 && len(calls[len(calls)-1]) > 0 {
		t.Fatalf("address announced while VIP tls has no verdict: %v", calls)
	}
	if err := f.plane.SetHealth("tls", "t1", true, "test"); err != nil {
		t.Fatal(err)
	}
	f.rebuild()
	if len(calls) == 0 || len(calls[len(calls)-1]) != 1 {
		t.Fatalf("not announced once both VIPs settled: %v", calls)
	}
}

// A fresh instance whose gateway's MAC the kernel has not resolved yet
// withholds its VIPs: announcing them would pull traffic onto an instance
// that can only drop it (no-next-hop).
func TestAnnouncementWaitsForTheNextHop(t *testing.T) {
	toml := gatewayed(baseConfig)
	f := newFixture(t, toml)
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { calls = append(calls, set) }, nil)
	if len(calls) != 0 && len(calls[len(calls)-1]) != 0 {
		t.Fatalf("announced %v before the gateway was resolved", calls[len(calls)-1])
	}
	f.plane.SetNextHop(netip.MustParseAddr("192.0.2.1"), netip.Addr{}, dataplane.NextHop{MAC4: [6]byte{2, 0, 0, 0, 0, 1}, Has4: true})
	if len(calls) == 0 || len(calls[len(calls)-1]) == 0 {
		t.Fatalf("nothing announced after the gateway was resolved: %v", calls)
	}
	// Once announced, a next hop lost for a moment does not withdraw it.
	n := len(calls)
	f.plane.SetNextHop(netip.MustParseAddr("192.0.2.1"), netip.Addr{}, dataplane.NextHop{})
	if len(calls) != n && len(calls[len(calls)-1]) == 0 {
		t.Error("withdrawn when the next hop went unresolved after the announcement")
	}
}

// tick is Run's once-a-second step (stepLocked) at the fixture's clock: a
// VIP whose next hop has been missing for NextHopGrace is withdrawn
// without waiting for a rebuild.
func (f *fixture) tick() {
	f.plane.mu.Lock()
	defer f.plane.mu.Unlock()
	f.plane.stepLocked(f.plane.now(), time.Time{}, true)
}

// An announced VIP whose next hop stays missing (a reload to a gateway
// that never resolves, or the gateway gone) drops every packet, so it is
// withdrawn after NextHopGrace, not before, and announced again when the
// next hop is back.
func TestAnnouncementWithdrawnWithoutNextHop(t *testing.T) {
	toml := gatewayed(baseConfig)
	f := newFixture(t, toml)
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { calls = append(calls, set) }, nil)
	announced := func() bool { return len(calls) > 0 && len(calls[len(calls)-1]) == 1 }
	gw1, gw2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.199")
	mac := dataplane.NextHop{MAC4: [6]byte{2, 0, 0, 0, 0, 1}, Has4: true}
	f.plane.SetNextHop(gw1, netip.Addr{}, mac)
	if !announced() {
		t.Fatalf("not announced once resolved: %v", calls)
	}

	// Lost for less than the grace, back, lost again: the clock restarts.
	f.plane.SetNextHop(gw1, netip.Addr{}, dataplane.NextHop{})
	f.tickFor(NextHopGrace - time.Second)
	f.plane.SetNextHop(gw1, netip.Addr{}, mac)
	f.plane.SetNextHop(gw1, netip.Addr{}, dataplane.NextHop{})
	f.tickFor(NextHopGrace - time.Second)
	f.rebuild()
	if !announced() {
		t.Fatalf("withdrawn within %v of losing the next hop: %v", NextHopGrace, calls)
	}
	// Lost for the grace: withdrawn by the step alone, no rebuild.
	f.tickFor(time.Second)
	if announced() {
		t.Fatalf("still announced %v after losing the next hop", NextHopGrace)
	}
	if got := f.plane.Status(false).Announced; len(got) != 0 {
		t.Errorf("status lists %v as announced", got)
	}
	n := len(calls)
	f.tickFor(time.Minute)
	f.rebuild()
	if len(calls) != n {
		t.Errorf("announcer called again while nothing changed: %v", calls[n:])
	}
	f.plane.SetNextHop(gw1, netip.Addr{}, mac)
	if !announced() {
		t.Fatalf("not announced again when the next hop came back: %v", calls)
	}

	// A reload to a gateway that never resolves: announced for the grace
	// (the resolver asks for the new one at once), then withdrawn.
	cfg, err := config.Parse([]byte(strings.Replace(toml, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv4 = "192.0.2.199"`, 1)), "typo.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	f.plane.SetNextHop(gw2, netip.Addr{}, dataplane.NextHop{})
	f.tickFor(NextHopGrace - time.Second)
	if !announced() {
		t.Fatalf("withdrawn within %v of the reload: %v", NextHopGrace, calls)
	}
	f.tickFor(time.Second)
	if announced() {
		t.Fatalf("still announced %v after a reload to a gateway that does not resolve", NextHopGrace)
	}
	f.plane.SetNextHop(gw2, netip.Addr{}, mac)
	if !announced() {
		t.Fatalf("not announced again once the new gateway resolved: %v", calls)
	}
}
