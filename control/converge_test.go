package control

import (
	"net/netip"
	"strings"
	"testing"

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
	toml := strings.Replace(baseConfig, `next_hop_mac = "02:00:00:00:00:fe"`, `gateway_ipv4 = "192.0.2.1"`, 1)
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
