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

// Finding: an address carrying a VIP that can forward (web, IPv4
// backends, IPv4 next hop resolved) and one that cannot (tls, IPv6
// backends, IPv6 next hop not resolved). A running instance that loses
// the IPv6 next hop keeps the address announced for web's sake (keep);
// a fresh instance in the very same state never announces it. A rolling
// restart thus withdraws web:80 from the whole fleet.
func TestFreshInstanceAnnouncesAddressAnotherVIPCanServe(t *testing.T) {
	gw4, gw6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8:ff::1")
	v4only := dataplane.NextHop{MAC4: [6]byte{2, 0, 0, 0, 0, 1}, Has4: true}
	both := v4only
	both.MAC6, both.Has6 = [6]byte{2, 0, 0, 0, 0, 2}, true

	// Running instance: both next hops, announced; then IPv6 lost for
	// well over the grace: still announced (web forwards).
	run := newFixture(t, dualFamilyConfig())
	var rc [][]netip.Prefix
	run.plane.SetAnnouncer(func(s []netip.Prefix) { rc = append(rc, s) }, nil)
	run.plane.SetNextHop(gw4, gw6, both)
	if len(lastAnnounced(rc)) != 1 {
		t.Fatalf("running instance: not announced with both next hops: %v", rc)
	}
	run.plane.SetNextHop(gw4, gw6, v4only)
	for range 2 * int(NextHopGrace/time.Second) {
		run.advance(time.Second)
		run.tick()
	}
	run.rebuild()
	if len(lastAnnounced(rc)) != 1 {
		t.Fatalf("running instance: withdrawn after IPv6 next hop loss although web forwards over IPv4: %v", rc)
	}

	// Fresh instance, same state: IPv4 next hop resolved, IPv6 not.
	fresh := newFixture(t, dualFamilyConfig())
	var fc [][]netip.Prefix
	fresh.plane.SetAnnouncer(func(s []netip.Prefix) { fc = append(fc, s) }, nil)
	fresh.plane.SetNextHop(gw4, gw6, v4only)
	for range 2 * int(NextHopGrace/time.Second) {
		fresh.advance(time.Second)
		fresh.tick()
	}
	fresh.rebuild()
	if sv := fresh.shared.Services.Load(); sv.VIPs[0].Table == nil {
		t.Fatalf("web has no table on the fresh instance")
	}
	if got := lastAnnounced(fc); len(got) != 1 {
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
	toml := strings.Replace(baseConfig, `next_hop_mac = "02:00:00:00:00:fe"`, `gateway_ipv4 = "192.0.2.1"`, 1)
	f := newFixture(t, toml)
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(s []netip.Prefix) { calls = append(calls, s) }, nil)
	gw := netip.MustParseAddr("192.0.2.1")
	mac := dataplane.NextHop{MAC4: [6]byte{2, 0, 0, 0, 0, 1}, Has4: true}
	f.plane.SetNextHop(gw, netip.Addr{}, mac)
	if len(lastAnnounced(calls)) != 1 {
		t.Fatalf("not announced: %v", calls)
	}
	f.plane.SetNextHop(gw, netip.Addr{}, dataplane.NextHop{})
	for range int(NextHopGrace/time.Second) + 1 {
		f.advance(time.Second)
		f.tick()
	}
	if len(lastAnnounced(calls)) != 0 {
		t.Fatalf("not withdrawn after the grace: %v", calls)
	}
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		if err := f.plane.Drain("web", b); err != nil {
			t.Fatal(err)
		}
	}
	f.plane.SetNextHop(gw, netip.Addr{}, mac)
	if sv := f.shared.Services.Load(); sv.VIPs[0].Table != nil {
		t.Fatal("every backend drained, yet a table")
	}
	if got := lastAnnounced(calls); len(got) != 0 {
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
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(s []netip.Prefix) { calls = append(calls, s) }, nil)
	gw4, gw6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8:ff::1")
	both := dataplane.NextHop{MAC4: [6]byte{2, 0, 0, 0, 0, 1}, Has4: true, MAC6: [6]byte{2, 0, 0, 0, 0, 2}, Has6: true}
	f.plane.SetNextHop(gw4, gw6, both)
	if len(lastAnnounced(calls)) != 1 {
		t.Fatalf("not announced: %v", calls)
	}
	if err := f.plane.Drain("web", "be6"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if r := f.lc.send(syn(t, uint16(8000+i), "S")); r.verdict == dataplane.Drop {
			t.Fatalf("before the loss, a new flow is dropped: %+v", r)
		}
	}
	v6only := dataplane.NextHop{MAC6: both.MAC6, Has6: true}
	f.plane.SetNextHop(gw4, gw6, v6only) // the IPv4 gateway is gone
	for range 4 * int(NextHopGrace/time.Second) {
		f.advance(time.Second)
		f.tick()
	}
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
	if got := lastAnnounced(calls); len(got) != 0 {
		t.Errorf("IPv4 next hop gone for %v, the only member with a next hop (be6) drained: %d of 20 new flows dropped, yet still announced %v", 4*NextHopGrace, drops, got)
	}
}

// The same on a fresh instance: it waits for "the next hop of at least
// one backend's family", and counts a drained IPv6 member that is in no
// table: announced at once while every new flow is dropped.
func TestFreshInstanceWithholdsWhenOnlyOutOfTableMemberForwardable(t *testing.T) {
	f := newFixture(t, h8MixedConfig())
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(s []netip.Prefix) { calls = append(calls, s) }, nil)
	if err := f.plane.Drain("web", "be6"); err != nil {
		t.Fatal(err)
	}
	gw4, gw6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8:ff::1")
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC6: [6]byte{2, 0, 0, 0, 0, 2}, Has6: true})
	drops := 0
	for i := range 20 {
		if r := f.lc.send(syn(t, uint16(9000+i), "S")); r.verdict == dataplane.Drop {
			drops++
		}
	}
	if got := lastAnnounced(calls); len(got) != 0 {
		t.Errorf("fresh instance, IPv4 next hop unresolved, only IPv6 member drained: %d of 20 new flows dropped, yet announced %v", drops, got)
	}
}

// Variant: be6 is down by its health check (not drained).
func TestHopLossNotKeptByDownMember(t *testing.T) {
	toml := strings.Replace(h8MixedConfig(), "[[vip]]", "[health]\nkind = \"tcp\"\n\n[[vip]]", 1)
	f := newFixture(t, toml)
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(s []netip.Prefix) { calls = append(calls, s) }, nil)
	gw4, gw6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8:ff::1")
	both := dataplane.NextHop{MAC4: [6]byte{2, 0, 0, 0, 0, 1}, Has4: true, MAC6: [6]byte{2, 0, 0, 0, 0, 2}, Has6: true}
	f.plane.SetNextHop(gw4, gw6, both)
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		f.setHealth(b, true)
	}
	f.setHealth("be6", false)
	if len(lastAnnounced(calls)) != 1 {
		t.Fatalf("not announced: %v", calls)
	}
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC6: both.MAC6, Has6: true})
	for range 4 * int(NextHopGrace/time.Second) {
		f.advance(time.Second)
		f.tick()
	}
	f.rebuild()
	drops := 0
	for i := range 20 {
		if r := f.lc.send(syn(t, uint16(9000+i), "S")); r.verdict == dataplane.Drop {
			drops++
		}
	}
	if got := lastAnnounced(calls); len(got) != 0 {
		t.Errorf("IPv4 next hop gone for %v, IPv6 member down: %d of 20 new flows dropped, yet still announced %v", 4*NextHopGrace, drops, got)
	}
}
