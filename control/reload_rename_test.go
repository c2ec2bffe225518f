package control

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// blueGreen: the live VIP at 203.0.113.7:80 and a staging one at
// 203.0.113.8:80, named live and staging as given; both checked (tcp).
func blueGreen(live, staging string) string {
	return configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", "panic_threshold = 0").
		Section("health", `kind = "tcp"`).
		VIP(live, "203.0.113.7", 80, `on_down = "move"`).
		Backend("be1", "10.0.1.1").Backend("be2", "10.0.1.2").
		VIP(staging, "203.0.113.8", 80).
		Backend("be1", "10.0.2.1").Backend("be2", "10.0.2.2").
		String()
}

// A blue/green rename in one reload: the live VIP "web" becomes
// "web-old" and the staging VIP "web-new" becomes "web". Neither VIP's
// address, port, protocol or backends change, so the dataplane keeps both
// (it knows VIPs by key) with their flows. README: "VIPs and backends are
// added, changed and removed live: backends that stay keep their
// conntrack entries and their health state"; carryRenamedVIPs: a renamed
// VIP keeps its drains, weight overrides and health. Here the live VIP
// is renamed to a new name, but since its old name is reused in the same
// reload, its state is not carried: it loses the operator's drain and
// every health verdict (its backends are "down, not checked yet"), and
// with on_down = move and panic_threshold = 0 its established flows are
// told to move and it takes no new flow until checks pass again.
func TestBlueGreenRenameKeepsLiveVIPState(t *testing.T) {
	f := newFixture(t, blueGreen("web", "web-new"))
	for _, r := range []dataplane.BackendRef{{VIP: "web", Backend: "be1"}, {VIP: "web", Backend: "be2"}, {VIP: "web-new", Backend: "be1"}, {VIP: "web-new", Backend: "be2"}} {
		if err := f.plane.SetHealth(r.VIP, r.Backend, true, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.plane.Drain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	live := flow.VIPKey{Addr: netip.MustParseAddr("203.0.113.7"), Port: 80, Proto: 6}
	// An established flow on the live VIP.
	r := f.lc.send(syn(t, 4000, "S"))
	if r.verdict != dataplane.Tx {
		t.Fatalf("before: verdict %v", r.verdict)
	}
	first := r.dst
	be1 := pubByKey(t, f.shared, live, "be1")
	be2 := pubByKey(t, f.shared, live, "be2")
	if be1.Weight == 0 || be1.Down || be2.Weight != 0 {
		t.Fatalf("before: be1 %+v be2 %+v", be1, be2)
	}

	f.apply(blueGreen("web-old", "web"))

	be1 = pubByKey(t, f.shared, live, "be1")
	be2 = pubByKey(t, f.shared, live, "be2")
	if be1.Weight == 0 || be1.Down || be1.Unhealthy {
		t.Errorf("live VIP (renamed web -> web-old) be1 after the reload: weight %d down %v unhealthy %v; want it serving as before (healthy, checked up)", be1.Weight, be1.Down, be1.Unhealthy)
	}
	if be2.Weight != 0 {
		t.Errorf("live VIP be2 after the reload: weight %d; want 0 (the operator drained it; only the VIP's name changed)", be2.Weight)
	}
	if r := f.lc.send(syn(t, 4000, "A")); r.verdict != dataplane.Tx || r.dst != first {
		t.Errorf("established flow after the rename: verdict %v to %v, want Tx to %v", r.verdict, r.dst, first)
	}
	// And the drain must not have moved onto the staging VIP's be2 (another server).
	staging := flow.VIPKey{Addr: netip.MustParseAddr("203.0.113.8"), Port: 80, Proto: 6}
	if b := pubByKey(t, f.shared, staging, "be2"); b.Weight == 0 {
		t.Errorf("staging VIP be2 (10.0.2.2) took the live VIP's drain: weight 0")
	}
}

// The same with the two names swapped outright (a <-> b).
func TestVIPNameSwapKeepsState(t *testing.T) {
	f := newFixture(t, blueGreen("a", "b"))
	for _, r := range []dataplane.BackendRef{{VIP: "a", Backend: "be1"}, {VIP: "a", Backend: "be2"}, {VIP: "b", Backend: "be1"}, {VIP: "b", Backend: "be2"}} {
		if err := f.plane.SetHealth(r.VIP, r.Backend, true, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.plane.Drain("a", "be2"); err != nil {
		t.Fatal(err)
	}
	f.apply(blueGreen("b", "a"))
	live := flow.VIPKey{Addr: netip.MustParseAddr("203.0.113.7"), Port: 80, Proto: 6}
	be1 := pubByKey(t, f.shared, live, "be1")
	be2 := pubByKey(t, f.shared, live, "be2")
	if be1.Weight == 0 || be1.Unhealthy || be2.Weight != 0 {
		t.Errorf("203.0.113.7:80 after swapping names: be1 weight %d unhealthy %v, be2 weight %d; want be1 serving and be2 still drained", be1.Weight, be1.Unhealthy, be2.Weight)
	}
}

// checkPortCfg: web with two backends checked by tcp on port (0: the
// VIP's, 80).
func checkPortCfg(vipPort int, checkPort string) string {
	keys := []string{`kind = "tcp"`}
	if checkPort != "" {
		keys = append(keys, "port = "+checkPort)
	}
	return configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", "panic_threshold = 0").
		VIP("web", "203.0.113.7", vipPort).
		Sub("[vip.health]", keys...).
		Backend("be1", "10.0.1.1").Backend("be2", "10.0.1.2").
		String()
}

// A reload that moves the check to another port keeps each backend's
// verdict until the check at the new port gives its own (README, "Health
// checks"): be1, up at :80, keeps serving (starting it down would take
// its established flows away with on_down = "move", and withdraw the VIP
// if every backend's check moved); be2, down at :80, stays out.
func TestCheckPortMoveKeepsVerdictUntilChecked(t *testing.T) {
	f := newFixture(t, checkPortCfg(80, ""))
	f.plane.SetHealth("web", "be1", true, "test")
	f.plane.SetHealth("web", "be2", false, "refused at :80")
	f.apply(checkPortCfg(80, "8080"))
	st := func(n string) *backendState {
		f.plane.mu.Lock()
		defer f.plane.mu.Unlock()
		return f.plane.backends[dataplane.BackendRef{VIP: "web", Backend: n}]
	}
	ts, _ := healthTargets(f.plane.Config(), nil)
	if s, a := st("be1"), ts["web/be1"].ProbeAddr(); a.Port() != 8080 || s.health != HealthUp {
		t.Errorf("be1 after the check moved from :80 to :8080: checked at %v, health %v; want :8080, up until checked there", a, s.health)
	}
	if s := st("be2"); s.health != HealthDown {
		t.Errorf("be2 after the check moved: health %v; want down until checked at :8080", s.health)
	}
}

// nhCfg: web behind gateway 192.0.2.1, with a static next_hop_mac too when
// static is true.
func nhCfg(static bool) string {
	keys := []string{`gateway_ipv4 = "192.0.2.1"`}
	if static {
		keys = append(keys, `next_hop_mac = "02:00:00:00:00:fe"`)
	}
	return configtest.New().Dataplane(keys...).Section("conntrack", "capacity = 65536").Web(2).String()
}

// A reload that removes next_hop_mac (the gateways unchanged) hands the
// next hop to the kernel's resolution of gateway_ipv4, which the resolver
// has not been asked for while the static MAC was set (Gateways() is
// empty then). The snapshot the reload publishes has no IPv4 next hop:
// every tunnelled packet is dropped (no-next-hop) until the resolver's
// next periodic pass. A reload that changes the gateways signals
// GatewaysChanged so the resolver looks them up at once; this one, which
// changes what Gateways() returns just as much, does not.
func TestStaticMACRemovedResolvesAtOnce(t *testing.T) {
	f := newFixture(t, nhCfg(true))
	if r := f.lc.send(syn(t, 5000, "S")); r.verdict != dataplane.Tx {
		t.Fatalf("before: %v", r.verdict)
	}
	if g4, _ := f.plane.Gateways(); g4.IsValid() {
		t.Fatalf("Gateways with a static MAC: %v", g4)
	}
	f.apply(nhCfg(false))
	if g4, _ := f.plane.Gateways(); !g4.IsValid() {
		t.Fatalf("Gateways after the reload: none")
	}
	nh := f.shared.Services.Load().NextHop
	signalled := false
	select {
	case <-f.plane.GatewaysChanged():
		signalled = true
	default:
	}
	if !nh.Has4 && !signalled {
		t.Errorf("after removing next_hop_mac: snapshot next hop Has4 %v and the resolver not told to resolve gateway_ipv4 now (GatewaysChanged not signalled): forwarding stops until its next periodic pass", nh.Has4)
	}
}

// scCfg: web (4 backends) with the second chance on and hash keys.
func scCfg(n int, hashKeys ...string) string {
	return configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "second_chance = true").
		Section("conntrack", "capacity = 65536").
		Web(n, hashKeys...).
		String()
}

// README "Hash fields": "A reload applies a changed hash like a table
// change: established flows keep their backends, new flows take the new
// slots". For the second chance (docs/second-chance.md) a table change
// keeps the outgoing table as the previous one, so a mid-connection
// packet of a flow this instance never saw names the backend the fleet's
// old mapping chose. A reload that changes only hash moves (nearly) every
// flow just as a table change does, but the snapshot keeps no previous
// table: the flows that move instance in the window get no second chance.
func TestHashChangeKeepsPreviousTable(t *testing.T) {
	f := newFixture(t, scCfg(4))
	f.advance(10e9)
	f.apply(scCfg(4, `hash = "src-ip"`))
	v := f.vipByName("web")
	if v.Hash == (flow.Fields{}) {
		t.Fatal("hash not applied")
	}
	if v.Prev == nil {
		t.Errorf("after a reload changing web's hash from 5-tuple to src-ip (every flow's slot moves) with second_chance on: no previous table kept")
	}
}

// A previous table held from an earlier change (a backend added) is then
// consulted under the new hash after a reload that changes hash: it is
// the old mapping's table, but indexed by a hash the old mapping never
// used, so the backend it names as the second chance is not the one the
// flow had.
func TestPrevTableKeepsItsHash(t *testing.T) {
	f := newFixture(t, scCfg(4))
	f.advance(10e9)
	f.apply(scCfg(5)) // a table change: prev = the 4-backend table, under 5-tuple
	f.advance(10e9)
	before := f.vipByName("web")
	if before.Prev == nil {
		t.Fatal("no previous table after adding a backend")
	}
	f.apply(scCfg(5, `hash = "src-ip"`))
	after := f.vipByName("web")
	if after.Prev == nil {
		t.Fatal("no previous table after the hash change")
	}
	// Whichever table is kept as previous (here the one from before the
	// backend was added: the table changed again within PrevMinAge), it
	// is looked up under the hash fields it was used with, not the VIP's
	// new ones.
	if after.Prev.Table == before.Prev.Table && after.Prev.Hash != before.Prev.Hash || after.Prev.Hash != before.Hash {
		t.Errorf("previous table kept with hash fields %v after the VIP's changed from %v to %v: the second chance would look it up under a hash the old mapping never used", after.Prev.Hash, before.Hash, after.Hash)
	}
}

func (f *fixture) vipByName(name string) *dataplane.VIP {
	for _, v := range f.shared.Services.Load().VIPs {
		if v != nil && v.Name == name {
			return v
		}
	}
	f.t.Fatalf("no vip %s", name)
	return nil
}

// A backend ejected by the passive checks, then a reload that turns them
// off (`passive = "off"`: "off disables them", config.Health). The
// operator turns them off because they misjudged; the ejection they made
// goes on for its whole backoff (flap_backoff, up to flap_backoff_max,
// 1 h at most) though nothing judges any more: the backend takes no new
// flow, and the table stays without it.
func TestPassiveOffEndsEjection(t *testing.T) {
	on := strings.Replace(baseConfig, "[[vip]]",
		"[health]\npassive_window = \"4s\"\npassive_min = 20\nflap_backoff = \"10m\"\nflap_backoff_max = \"1h\"\n\n[[vip]]", 1)
	off := strings.Replace(on, "passive_min = 20\n", "passive_min = 20\npassive = \"off\"\n", 1)
	f := newFixture(t, on)
	sim := newSim(f)
	for range 8 {
		sim.period(allGood, be2Refuse)
	}
	if !f.backend("be2").Outlier {
		t.Fatal("be2 not ejected")
	}
	f.apply(off)
	for range 5 {
		sim.period(allGood, allGood)
	}
	if b := f.backend("be2"); b.Outlier || b.Slots == 0 {
		t.Errorf("be2 after a reload turned passive checks off (and 5 s of healthy traffic): outlier %v, %d slots; want back in the table: nothing judges it any more", b.Outlier, b.Slots)
	}
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight == 0 {
		t.Errorf("published be2 weight 0 with passive checks off")
	}
}

// The blue/green rename as the routers see it: the live VIP's address is
// withdrawn by the reload (no backend of it serves: all "not checked
// yet"), though nothing about the service changed but its name.
func TestBlueGreenRenameWithdrawsLiveVIP(t *testing.T) {
	f := newFixture(t, blueGreen("web", "web-new"))
	var last []netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { last = append([]netip.Prefix(nil), set...) }, nil)
	for _, r := range []dataplane.BackendRef{{VIP: "web", Backend: "be1"}, {VIP: "web", Backend: "be2"}, {VIP: "web-new", Backend: "be1"}, {VIP: "web-new", Backend: "be2"}} {
		if err := f.plane.SetHealth(r.VIP, r.Backend, true, "test"); err != nil {
			t.Fatal(err)
		}
	}
	f.rebuild()
	live := netip.MustParsePrefix("203.0.113.7/32")
	has := func() bool {
		for _, p := range last {
			if p == live {
				return true
			}
		}
		return false
	}
	if !has() {
		t.Fatalf("live VIP not announced before: %v", last)
	}
	f.apply(blueGreen("web-old", "web"))
	if !has() {
		t.Errorf("after renaming the live VIP web -> web-old (and web-new -> web): %v announced; the live VIP's address 203.0.113.7 was withdrawn", last)
	}
}
