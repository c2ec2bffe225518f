package control

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// v6ProbeConfig: both LB addresses and both gateways; the IPv4 "web" VIP
// and an IPv6 VIP, all backends IPv6.
func v6ProbeConfig(gw6 string) string {
	return configtest.New().
		Dataplane(`lb_ipv6 = "2001:db8:1::10"`, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv6 = "`+gw6+`"`).
		Section("conntrack", "capacity = 4096").
		VIP("web", configtest.Web, 80).
		Backend("b1", "2001:db8:2::1").Backend("b2", "2001:db8:2::2").
		VIP("web6", "2001:db8:ffff::7", 80).
		Backend("c1", "2001:db8:2::11").
		String()
}

// outer6 reads a forwarded frame's Ethernet destination and outer IPv6
// destination.
func outer6(fr []byte) (mac [6]byte, dst netip.Addr, ok bool) {
	if len(fr) < 54 || fr[12] != 0x86 || fr[13] != 0xdd {
		return mac, dst, false
	}
	copy(mac[:], fr[:6])
	return mac, netip.AddrFrom16([16]byte(fr[38:54])), true
}

// An IPv4 VIP with IPv6 backends waits for the IPv6 next hop, not the
// IPv4 one; once announced it is kept through a short IPv6 loss and
// withdrawn after the grace even though the IPv4 next hop stays; a
// reload to another IPv6 gateway never sends to the old MAC.
func TestV6OnlyProbeIPv6BackendsFollowIPv6NextHop(t *testing.T) {
	f := newFixture(t, v6ProbeConfig("fe80::1"))
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { calls = append(calls, set) }, nil)
	last := func() string {
		if len(calls) == 0 {
			return "[]"
		}
		return fmt.Sprint(calls[len(calls)-1])
	}
	gw4, gw6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("fe80::1")
	mac4, mac6 := [6]byte{2, 0, 0, 0, 4, 1}, [6]byte{2, 0, 0, 0, 6, 1}
	both := fmt.Sprint([]netip.Prefix{netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("2001:db8:ffff::7/128")})

	// Only the IPv4 gateway resolved: nothing can be forwarded.
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: mac4, Has4: true})
	if got := last(); got != "[]" {
		t.Fatalf("announced %s with only the IPv4 next hop; every backend is IPv6", got)
	}
	if r := f.lc.Send(syn(t, 1000, "S")); r.Verdict != dataplane.Drop {
		t.Errorf("SYN forwarded (verdict %d) without an IPv6 next hop", r.Verdict)
	}
	// IPv6 resolved: both addresses announced, packets go out to mac6.
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: mac4, Has4: true, MAC6: mac6, Has6: true})
	if got := last(); got != both {
		t.Fatalf("announced %s, want %s", got, both)
	}
	if got := fmt.Sprint(f.plane.Status(false).Announced); got != "[203.0.113.7/32 2001:db8:ffff::7/128]" {
		t.Errorf("status announced %s", got)
	}
	r := f.lc.Send(syn(t, 1001, "S"))
	m, dst, ok := outer6(r.Frame)
	if r.Verdict != dataplane.Tx || !ok || m != mac6 || !(dst == f.addr("b1") || dst == f.addr("b2")) {
		t.Fatalf("SYN: verdict %d outer6 %v mac %x dst %v", r.Verdict, ok, m, dst)
	}
	// The IPv4 next hop lost for long: nothing withdrawn (no IPv4 backend).
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC6: mac6, Has6: true})
	f.tickFor(2 * NextHopGrace)
	if got := last(); got != both {
		t.Fatalf("after losing only the IPv4 next hop for %v: announced %s, want %s", 2*NextHopGrace, got, both)
	}
	// The IPv6 next hop lost: kept for the grace, then withdrawn.
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: mac4, Has4: true})
	f.tickFor(NextHopGrace - time.Second)
	if got := last(); got != both {
		t.Fatalf("withdrawn within the grace: %s", got)
	}
	f.tickFor(time.Second)
	if got := last(); got != "[]" {
		t.Fatalf("IPv6 next hop lost for %v: still announced %s", NextHopGrace, got)
	}
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: mac4, Has4: true, MAC6: mac6, Has6: true})
	if got := last(); got != both {
		t.Fatalf("IPv6 next hop back: announced %s, want %s", got, both)
	}

	// A reload to another IPv6 gateway: the old MAC is never used.
	cfg, err := config.Parse([]byte(v6ProbeConfig("2001:db8:1::1")), "gw.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if r := f.lc.Send(syn(t, 1002, "S")); r.Verdict == dataplane.Tx {
		m, _, _ := outer6(r.Frame)
		t.Errorf("after a reload to gateway_ipv6 2001:db8:1::1, a SYN went out to the old gateway's MAC %x", m)
	}
	if got, want := f.plane.Gateways(); got != gw4 || want != netip.MustParseAddr("2001:db8:1::1") {
		t.Errorf("Gateways() = %v %v", got, want)
	}
	mac6b := [6]byte{2, 0, 0, 0, 6, 2}
	if f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: mac4, Has4: true, MAC6: mac6b, Has6: true}) {
		t.Errorf("an answer for the gateway before the reload was taken")
	}
	if !f.plane.SetNextHop(gw4, netip.MustParseAddr("2001:db8:1::1"), dataplane.NextHop{MAC4: mac4, Has4: true, MAC6: mac6b, Has6: true}) {
		t.Errorf("the answer for the configured gateways was refused")
	}
	r = f.lc.Send(syn(t, 1003, "S"))
	if m, _, ok := outer6(r.Frame); r.Verdict != dataplane.Tx || !ok || m != mac6b {
		t.Errorf("after the new gateway resolved: verdict %d mac %x", r.Verdict, m)
	}
	if got := last(); got != both {
		t.Errorf("after the reload: announced %s", got)
	}
}

// IPv6-only: lb_ipv6 and gateway_ipv6 only, an IPv6 VIP; the resolver is
// asked for the IPv6 gateway alone and the VIP announced as a /128.
func TestV6OnlyProbePureIPv6Announced(t *testing.T) {
	toml := configtest.New().
		Section("dataplane", `port = "net_ring0"`, `lb_ipv6 = "2001:db8:1::10"`, `gateway_ipv6 = "fe80::1"`, `hash_key = "`+configtest.HashKey+`"`).
		Section("conntrack", "capacity = 4096").
		VIP("v6", "2001:db8:ffff::7", 443).Backend("c1", "2001:db8:2::11").
		String()
	f := newFixture(t, toml)
	g4, g6 := f.plane.Gateways()
	if g4.IsValid() || g6 != netip.MustParseAddr("fe80::1") {
		t.Fatalf("Gateways() = %v %v", g4, g6)
	}
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { calls = append(calls, set) }, nil)
	f.plane.SetNextHop(netip.Addr{}, g6, dataplane.NextHop{MAC6: [6]byte{2, 0, 0, 0, 6, 1}, Has6: true})
	if len(calls) == 0 || fmt.Sprint(calls[len(calls)-1]) != "[2001:db8:ffff::7/128]" {
		t.Fatalf("announced %v", calls)
	}
	// A VIP default name of an IPv6 VIP: fulcrumctl and the page bracket
	// it; the name itself is a key others print.
	if n := f.plane.Config().VIPs[0].Name; strings.Count(n, ":") > 0 && !strings.HasPrefix(n, "v6") {
		t.Logf("name %q", n)
	}
}
