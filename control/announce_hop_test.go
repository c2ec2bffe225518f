package control

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// dualFamilyConfig: the "web" VIP 203.0.113.7:80 with IPv4 backends and a
// "tls" VIP on the same address, port 443, with an IPv6 backend; both
// gateways configured (resolved at run time by SetNextHop).
func dualFamilyConfig() string {
	toml := strings.Replace(baseConfig, `next_hop_mac = "02:00:00:00:00:fe"`, "gateway_ipv4 = \"192.0.2.1\"\ngateway_ipv6 = \"2001:db8:ff::1\"\nlb_ipv6 = \"2001:db8:ff::10\"", 1)
	return toml + `
[[vip]]
name = "tls"
address = "203.0.113.7"
port = 443
  [[vip.backend]]
  name = "t6"
  address = "2001:db8:2::1"
`
}

func lastAnnounced(calls [][]netip.Prefix) []netip.Prefix {
	if len(calls) == 0 {
		return nil
	}
	return calls[len(calls)-1]
}

// The gateways of the next-hop tests' configurations, and their next hops
// resolved: IPv4 only, IPv6 only and both.
var (
	testGW4 = netip.MustParseAddr("192.0.2.1")
	testGW6 = netip.MustParseAddr("2001:db8:ff::1")
	hop4    = dataplane.NextHop{MAC4: [6]byte{2, 0, 0, 0, 0, 1}, Has4: true}
	hop6    = dataplane.NextHop{MAC6: [6]byte{2, 0, 0, 0, 0, 2}, Has6: true}
	hopBoth = dataplane.NextHop{MAC4: hop4.MAC4, Has4: true, MAC6: hop6.MAC6, Has6: true}
)

// recordAnnounced makes f's plane append every set of prefixes it
// announces to the slice returned.
func (f *fixture) recordAnnounced() *[][]netip.Prefix {
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(s []netip.Prefix) { calls = append(calls, s) }, nil)
	return &calls
}

// gatewayed is toml with its static next hop MAC replaced by the IPv4
// gateway 192.0.2.1 (testGW4), resolved at run time by SetNextHop.
func gatewayed(toml string) string {
	return strings.Replace(toml, `next_hop_mac = "02:00:00:00:00:fe"`, `gateway_ipv4 = "192.0.2.1"`, 1)
}

// announcedWithBothHops records f's announcements and resolves both
// gateways; it fails the test unless the address is announced then.
func (f *fixture) announcedWithBothHops() *[][]netip.Prefix {
	f.t.Helper()
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, testGW6, hopBoth)
	if len(lastAnnounced(*calls)) != 1 {
		f.t.Fatalf("not announced with both next hops: %v", *calls)
	}
	return calls
}

// hopLostForGrace records f's announcements, resolves the IPv4 gateway
// (the address is announced) and then loses it for the grace (the address
// is withdrawn); it fails the test if either does not happen.
func (f *fixture) hopLostForGrace() *[][]netip.Prefix {
	f.t.Helper()
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	if len(lastAnnounced(*calls)) != 1 {
		f.t.Fatalf("not announced: %v", *calls)
	}
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	f.tickFor(NextHopGrace + time.Second)
	if len(lastAnnounced(*calls)) != 0 {
		f.t.Fatalf("not withdrawn after the grace: %v", *calls)
	}
	return calls
}

// tickFor moves f's clock on by d, a second at a time as in Run, running
// the next hop's grace at each step.
func (f *fixture) tickFor(d time.Duration) {
	for range int(d / time.Second) {
		f.advance(time.Second)
		f.tick()
	}
}

// Finding: an address carrying a VIP that can forward (web, IPv4
// backends, IPv4 next hop resolved) and one that cannot (tls, IPv6
// backends, IPv6 next hop not resolved). A running instance that loses
// the IPv6 next hop keeps the address announced for web's sake (keep);
// a fresh instance in the very same state never announces it. A rolling
// restart thus withdraws web:80 from the whole fleet.
func TestFreshInstanceAnnouncesAddressAnotherVIPCanServe(t *testing.T) {
	// Running instance: both next hops, announced; then IPv6 lost for
	// well over the grace: still announced (web forwards).
	run := newFixture(t, dualFamilyConfig())
	rc := run.recordAnnounced()
	run.plane.SetNextHop(testGW4, testGW6, hopBoth)
	if len(lastAnnounced(*rc)) != 1 {
		t.Fatalf("running instance: not announced with both next hops: %v", *rc)
	}
	run.plane.SetNextHop(testGW4, testGW6, hop4)
	run.tickFor(2 * NextHopGrace)
	run.rebuild()
	if len(lastAnnounced(*rc)) != 1 {
		t.Fatalf("running instance: withdrawn after IPv6 next hop loss although web forwards over IPv4: %v", *rc)
	}

	// Fresh instance, same state: IPv4 next hop resolved, IPv6 not.
	fresh := newFixture(t, dualFamilyConfig())
	fc := fresh.recordAnnounced()
	fresh.plane.SetNextHop(testGW4, testGW6, hop4)
	fresh.tickFor(2 * NextHopGrace)
	fresh.rebuild()
	if sv := fresh.shared.Services.Load(); sv.VIPs[0].Table == nil {
		t.Fatalf("web has no table on the fresh instance")
	}
	if got := lastAnnounced(*fc); len(got) != 1 {
		t.Errorf("fresh instance: web:80 can serve (table, IPv4 next hop) yet 203.0.113.7 is withheld (announced %v) while the running instance in the same state announces it", got)
	}
}

// An address withdrawn for a lost next hop keeps its "was announced"
// standing (so it comes back without waiting for checks). Meanwhile the
// operator drains every backend: no table, nothing takes new flows, and
// the flows it held moved to the other instances during the withdrawal.
// When the next hop comes back, is the address announced again?
// (A fresh instance, or one that withdrew it for not serving, would not
// announce a VIP whose every backend is drained.)
func TestHopWithdrawnThenAllDrainedNotReannounced(t *testing.T) {
	toml := gatewayed(baseConfig)
	f := newFixture(t, toml)
	calls := f.hopLostForGrace()
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		if err := f.plane.Drain("web", b); err != nil {
			t.Fatal(err)
		}
	}
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	if sv := f.shared.Services.Load(); sv.VIPs[0].Table != nil {
		t.Fatal("every backend drained, yet a table")
	}
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("next hop back, every backend drained (no table, no flows left here): announced %v; new flows pulled here are dropped as no-backend", got)
	}
}

// h8MixedConfig: web with its four IPv4 backends and one IPv6 backend
// be6; both gateways configured.
func h8MixedConfig() string {
	toml := strings.Replace(baseConfig, `next_hop_mac = "02:00:00:00:00:fe"`, "gateway_ipv4 = \"192.0.2.1\"\ngateway_ipv6 = \"2001:db8:ff::1\"\nlb_ipv6 = \"2001:db8:ff::10\"", 1)
	return strings.Replace(toml, "port = 80\n", "port = 80\n  [[vip.backend]]\n  name = \"be6\"\n  address = \"2001:db8:2::6\"\n", 1)
}

// canForward counts every member of the VIP, also those that take no new
// flows (drained, down). A dual-stack pool whose IPv6 member is drained
// (or down) and whose IPv4 next hop is gone for good (the README's own
// example: a typo'd gateway_ipv4 in a reload): every member in the table
// is IPv4, every new flow is dropped as no-next-hop, yet the address
// stays announced forever, because the drained IPv6 member "can forward".
func TestHopLossNotKeptByMemberOutsideTheTable(t *testing.T) {
	f := newFixture(t, h8MixedConfig())
	calls := f.announcedWithBothHops()
	if err := f.plane.Drain("web", "be6"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if r := f.lc.send(syn(t, uint16(8000+i), "S")); r.verdict == dataplane.Drop {
			t.Fatalf("before the loss, a new flow is dropped: %+v", r)
		}
	}
	v6only := hop6
	f.plane.SetNextHop(testGW4, testGW6, v6only) // the IPv4 gateway is gone
	f.tickFor(4 * NextHopGrace)
	f.rebuild()
	// What a new flow meets: the table holds only IPv4 backends.
	drops := 0
	for i := range 20 {
		if r := f.lc.send(syn(t, uint16(9000+i), "S")); r.verdict == dataplane.Drop {
			drops++
		}
	}
	var noHop uint64
	for _, w := range f.plane.Status(false).Workers {
		noHop += w.Drops[dataplane.DropNoNextHop]
	}
	t.Logf("no-next-hop drops: %d", noHop)
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("IPv4 next hop gone for %v, the only member with a next hop (be6) drained: %d of 20 new flows dropped, yet still announced %v", 4*NextHopGrace, drops, got)
	}
}

// The same on a fresh instance: it waits for "the next hop of at least
// one backend's family", and counts a drained IPv6 member that is in no
// table: announced at once while every new flow is dropped.
func TestFreshInstanceWithholdsWhenOnlyOutOfTableMemberForwardable(t *testing.T) {
	f := newFixture(t, h8MixedConfig())
	calls := f.recordAnnounced()
	if err := f.plane.Drain("web", "be6"); err != nil {
		t.Fatal(err)
	}
	f.plane.SetNextHop(testGW4, testGW6, dataplane.NextHop{MAC6: [6]byte{2, 0, 0, 0, 0, 2}, Has6: true})
	drops := 0
	for i := range 20 {
		if r := f.lc.send(syn(t, uint16(9000+i), "S")); r.verdict == dataplane.Drop {
			drops++
		}
	}
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("fresh instance, IPv4 next hop unresolved, only IPv6 member drained: %d of 20 new flows dropped, yet announced %v", drops, got)
	}
}

// Variant: be6 is down by its health check (not drained).
func TestHopLossNotKeptByDownMember(t *testing.T) {
	toml := strings.Replace(h8MixedConfig(), "[[vip]]", "[health]\nkind = \"tcp\"\n\n[[vip]]", 1)
	f := newFixture(t, toml)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, testGW6, hopBoth)
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		f.setHealth(b, true)
	}
	f.setHealth("be6", false)
	if len(lastAnnounced(*calls)) != 1 {
		t.Fatalf("not announced: %v", *calls)
	}
	f.plane.SetNextHop(testGW4, testGW6, hop6)
	f.tickFor(4 * NextHopGrace)
	f.rebuild()
	drops := 0
	for i := range 20 {
		if r := f.lc.send(syn(t, uint16(9000+i), "S")); r.verdict == dataplane.Drop {
			drops++
		}
	}
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("IPv4 next hop gone for %v, IPv6 member down: %d of 20 new flows dropped, yet still announced %v", 4*NextHopGrace, drops, got)
	}
}
