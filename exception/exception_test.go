package exception

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// testNetns makes a network namespace of the test's own with a dummy
// interface in it, so nothing the test does reaches the host's interfaces.
func testNetns(t *testing.T, ifc string) (string, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	name := fmt.Sprintf("fulcrum-exc-%d-%s", os.Getpid(), t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Skipf("netns: %v", err)
	}
	ns, err := netns.NewNamed(name) // creates it and enters it
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("back to the test's namespace: %v", serr) // the thread stays locked: it is tainted
	}
	orig.Close()
	runtime.UnlockOSThread()
	if err != nil {
		t.Skipf("netns: %v", err)
	}
	t.Cleanup(func() { ns.Close(); netns.DeleteNamed(name) })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	// A tap, as the daemon's exception interface is: made here (the tun
	// driver makes it in the caller's namespace) and moved.
	if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: ifc}, Mode: netlink.TUNTAP_MODE_TAP}); err != nil {
		t.Skipf("tap device: %v", err)
	}
	if err := MoveToNetns(ifc, name); err != nil {
		if l, lerr := netlink.LinkByName(ifc); lerr == nil {
			netlink.LinkDel(l)
		}
		t.Fatal(err)
	}
	return name, h
}

func globalAddrs(t *testing.T, h *netlink.Handle, link netlink.Link) []string {
	t.Helper()
	as, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsGlobalUnicast() {
			ones, _ := a.Mask.Size()
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones).String())
		}
	}
	sort.Strings(out)
	return out
}

// TestConfigure: the interface gets the MAC, MTU and addresses asked for,
// and a second Configure (a reload) replaces the addresses and MTU.
func TestConfigure(t *testing.T) {
	const ifc = "fltest1"
	ns, h := testNetns(t, ifc)
	mac := [6]byte{2, 0xf1, 0, 0, 0, 1}
	steps := []struct {
		ifc  Iface
		want []string
	}{
		{Iface{Name: ifc, MAC: mac, MTU: 1500, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24"), netip.MustParsePrefix("2001:db8:100::10/64")}},
			[]string{"192.0.2.10/24", "2001:db8:100::10/64"}},
		{Iface{Name: ifc, MAC: mac, MTU: 1280, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.20/25")}},
			[]string{"192.0.2.20/25"}},
	}
	for i, s := range steps {
		if err := Configure(s.ifc, ns); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		link, err := h.LinkByName(ifc)
		if err != nil {
			t.Fatal(err)
		}
		a := link.Attrs()
		if a.MTU != s.ifc.MTU || a.HardwareAddr.String() != net.HardwareAddr(mac[:]).String() || a.Flags&net.FlagUp == 0 {
			t.Errorf("step %d: mtu %d mac %v flags %v, want mtu %d mac %v up", i, a.MTU, a.HardwareAddr, a.Flags, s.ifc.MTU, net.HardwareAddr(mac[:]))
		}
		if got := globalAddrs(t, h, link); fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("step %d: addresses %v, want %v", i, got, s.want)
		}
	}
}

func addNeigh(t *testing.T, h *netlink.Handle, ifc string, ip netip.Addr, mac [6]byte, state int) {
	t.Helper()
	link, err := h.LinkByName(ifc)
	if err != nil {
		t.Fatal(err)
	}
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	n := &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: fam, State: state, IP: ip.AsSlice(), HardwareAddr: net.HardwareAddr(mac[:])}
	if err := h.NeighSet(n); err != nil {
		t.Fatal(err)
	}
}

// TestLookup reads the kernel's neighbour table over netlink.
func TestLookup(t *testing.T) {
	const ifc = "fltest2"
	ns, h := testNetns(t, ifc)
	if err := Configure(Iface{Name: ifc, MAC: [6]byte{2, 0xf1, 0, 0, 0, 2}, MTU: 1500,
		Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24"), netip.MustParsePrefix("2001:db8:100::10/64")}}, ns); err != nil {
		t.Fatal(err)
	}
	m4, m6 := [6]byte{2, 0, 0, 0, 0, 0x41}, [6]byte{2, 0, 0, 0, 0, 0x61}
	addNeigh(t, h, ifc, netip.MustParseAddr("192.0.2.1"), m4, netlink.NUD_REACHABLE)
	addNeigh(t, h, ifc, netip.MustParseAddr("2001:db8:100::1"), m6, netlink.NUD_STALE)
	for _, c := range []struct {
		ip   string
		mac  [6]byte
		want bool
	}{
		{"192.0.2.1", m4, true},
		{"2001:db8:100::1", m6, true},
		{"192.0.2.99", [6]byte{}, false},
	} {
		mac, ok := Lookup(ns, ifc, netip.MustParseAddr(c.ip))
		if ok != c.want || mac != c.mac {
			t.Errorf("%s: %v %v, want %v %v", c.ip, net.HardwareAddr(mac[:]), ok, net.HardwareAddr(c.mac[:]), c.want)
		}
	}
}

// TestReconfigureKeepsNeighbours: a reload that changes nothing on the
// interface must not disturb the kernel's neighbour table (setting even
// the same MAC flushes it, and the gateway goes unresolved: forwarding
// stops until ARP answers again).
func TestReconfigureKeepsNeighbours(t *testing.T) {
	const ifc = "fltest4"
	ns, h := testNetns(t, ifc)
	cfg := Iface{Name: ifc, MAC: [6]byte{2, 0xf1, 0, 0, 0, 4}, MTU: 1500, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}}
	if err := Configure(cfg, ns); err != nil {
		t.Fatal(err)
	}
	gw, m4 := netip.MustParseAddr("192.0.2.1"), [6]byte{2, 0, 0, 0, 0, 0x44}
	addNeigh(t, h, ifc, gw, m4, netlink.NUD_REACHABLE)
	for i := 0; i < 3; i++ {
		if err := Configure(cfg, ns); err != nil {
			t.Fatal(err)
		}
		if mac, ok := Lookup(ns, ifc, gw); !ok || mac != m4 {
			t.Fatalf("after reconfiguration %d: gateway %v %v, want %v (neighbour entry kept)", i+1, net.HardwareAddr(mac[:]), ok, net.HardwareAddr(m4[:]))
		}
	}
}

// TestResolverFollowsGateways: the resolver publishes the gateways' MACs,
// and resolves again at once (not at its next interval) when told the
// gateways changed, as a reload does.
func TestResolverFollowsGateways(t *testing.T) {
	const ifc = "fltest3"
	ns, h := testNetns(t, ifc)
	if err := Configure(Iface{Name: ifc, MAC: [6]byte{2, 0xf1, 0, 0, 0, 3}, MTU: 1500, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}}, ns); err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	ma, mb := [6]byte{2, 0, 0, 0, 0, 0xa}, [6]byte{2, 0, 0, 0, 0, 0xb}
	addNeigh(t, h, ifc, a, ma, netlink.NUD_REACHABLE)
	addNeigh(t, h, ifc, b, mb, netlink.NUD_REACHABLE)

	gw := make(chan Gateways, 1)
	gw <- Gateways{IPv4: a}
	cur := Gateways{}
	gateways := func() Gateways {
		select {
		case cur = <-gw:
		default:
		}
		return cur
	}
	type pub struct {
		g  Gateways
		nh dataplane.NextHop
	}
	pubs := make(chan pub, 16)
	changed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: ifc, Netns: ns, Interval: time.Hour}
	go func() {
		defer close(done)
		r.Run(ctx, gateways, changed, func(g Gateways, nh dataplane.NextHop) bool { pubs <- pub{g, nh}; return true })
	}()
	t.Cleanup(func() { cancel(); <-done })

	next := func() pub {
		t.Helper()
		select {
		case p := <-pubs:
			return p
		case <-time.After(10 * time.Second):
			t.Fatal("nothing published within 10s")
			return pub{}
		}
	}
	if p := next(); p.g.IPv4 != a || !p.nh.Has4 || p.nh.MAC4 != ma || p.nh.Has6 {
		t.Errorf("first: %+v, want %v at %v", p, a, net.HardwareAddr(ma[:]))
	}
	gw <- Gateways{IPv4: b}
	changed <- struct{}{}
	if p := next(); p.g.IPv4 != b || !p.nh.Has4 || p.nh.MAC4 != mb {
		t.Errorf("after the gateway changed: %+v, want %v at %v", p, b, net.HardwareAddr(mb[:]))
	}
}

// TestResolverAnswersAgainWhenRefused: an answer the plane refused (two
// quick reloads moved the gateway from A to B and back to A while the
// resolver looked A up, so the answer arrived while B was configured) is
// given again at the next round, though the gateways are A again and the
// MAC the same: the plane must not be left without A's MAC, dropping
// every packet as no-next-hop, until the MAC changes.
func TestResolverAnswersAgainWhenRefused(t *testing.T) {
	const ifc = "fltest9"
	ns, h := testNetns(t, ifc)
	if err := Configure(Iface{Name: ifc, MAC: [6]byte{2, 0xf1, 0, 0, 0, 9}, MTU: 1500, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}}, ns); err != nil {
		t.Fatal(err)
	}
	a, ma := netip.MustParseAddr("192.0.2.1"), [6]byte{2, 0, 0, 0, 0, 0xa}
	addNeigh(t, h, ifc, a, ma, netlink.NUD_REACHABLE)

	pubs := make(chan dataplane.NextHop, 16)
	refuse := true // the first answer comes while B is configured
	changed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: ifc, Netns: ns, Interval: time.Hour}
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: a} }, changed, func(_ Gateways, nh dataplane.NextHop) bool {
			taken := !refuse
			refuse = false
			pubs <- nh
			return taken
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func() (dataplane.NextHop, bool) {
		select {
		case nh := <-pubs:
			return nh, true
		case <-time.After(10 * time.Second):
			return dataplane.NextHop{}, false
		}
	}
	if nh, ok := next(); !ok || !nh.Has4 || nh.MAC4 != ma {
		t.Fatalf("first answer: %+v (published %v), want %v", nh, ok, net.HardwareAddr(ma[:]))
	}
	changed <- struct{}{} // the reload back to A
	if nh, ok := next(); !ok || !nh.Has4 || nh.MAC4 != ma {
		t.Errorf("after the refused answer and the reload back to A: %+v (published %v), want %v again", nh, ok, net.HardwareAddr(ma[:]))
	}
}

// TestConfigureRoutes: the VIPs checked through the tunnel are routed into
// the tap with a permanent neighbour (the kernel never asks ARP for them);
// a reload that drops one removes its route and neighbour and leaves the
// operator's own routes alone.
func TestConfigureRoutes(t *testing.T) {
	const ifc = "fltest5"
	ns, h := testNetns(t, ifc)
	mac := [6]byte{2, 0xf1, 0, 0, 0, 5}
	v4, v6, v4b := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8:ffff::7"), netip.MustParseAddr("203.0.113.8")
	base := Iface{Name: ifc, MAC: mac, MTU: 1500, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24"), netip.MustParsePrefix("2001:db8:100::10/64")}}
	cfg := base
	cfg.Routes = []Route{{Addr: v4, MTU: 1476}, {Addr: v6, MTU: 1456}, {Addr: v4b}}
	if err := Configure(cfg, ns); err != nil {
		t.Fatal(err)
	}
	link, err := h.LinkByName(ifc)
	if err != nil {
		t.Fatal(err)
	}
	// An operator's route on the same link, which Configure must keep.
	own := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: hostNet(netip.MustParseAddr("198.51.100.9")), Scope: netlink.SCOPE_LINK}
	if err := h.RouteAdd(own); err != nil {
		t.Fatal(err)
	}
	check := func(step string, want []netip.Addr, gone []netip.Addr) {
		t.Helper()
		for _, a := range want {
			rs, err := h.RouteGet(a.AsSlice())
			if err != nil || len(rs) == 0 || rs[0].LinkIndex != link.Attrs().Index {
				t.Errorf("%s: route to %v: %+v %v, want via %s", step, a, rs, err, ifc)
			}
			// The route's MTU, which the kernel's TCP sizes its
			// segments by (a check's must fit the tunnel).
			for _, r := range cfg.Routes {
				if r.Addr != a {
					continue
				}
				rs, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: link.Attrs().Index, Dst: hostNet(a), Protocol: RouteProtocol},
					netlink.RT_FILTER_OIF|netlink.RT_FILTER_DST|netlink.RT_FILTER_PROTOCOL)
				if err != nil || len(rs) != 1 || rs[0].MTU != r.MTU {
					t.Errorf("%s: route to %v: %+v %v, want mtu %d", step, a, rs, err, r.MTU)
				}
			}
			// The tap's own MAC: never a next hop (Lookup refuses it),
			// so the table is read as it is.
			if m, st, ok := neighMAC(t, h, ifc, a); !ok || m != mac || st != netlink.NUD_PERMANENT {
				t.Errorf("%s: neighbour %v = %v %v, want %v", step, a, net.HardwareAddr(m[:]), ok, net.HardwareAddr(mac[:]))
			}
		}
		for _, a := range gone {
			if _, _, ok := neighMAC(t, h, ifc, a); ok {
				t.Errorf("%s: neighbour %v still there", step, a)
			}
			rs, _ := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: link.Attrs().Index, Protocol: RouteProtocol}, netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
			for _, r := range rs {
				if r.Dst != nil && r.Dst.IP.Equal(a.AsSlice()) {
					t.Errorf("%s: route to %v still there", step, a)
				}
			}
		}
	}
	check("first", []netip.Addr{v4, v6, v4b}, nil)
	cfg.Routes = []Route{{Addr: v4, MTU: 1460}}
	if err := Configure(cfg, ns); err != nil {
		t.Fatal(err)
	}
	check("reload", []netip.Addr{v4}, []netip.Addr{v6, v4b})
	if err := Configure(cfg, ns); err != nil { // idempotent
		t.Fatal(err)
	}
	check("again", []netip.Addr{v4}, []netip.Addr{v6, v4b})
	if err := Configure(base, ns); err != nil {
		t.Fatal(err)
	}
	check("none", nil, []netip.Addr{v4})
	rs, err := h.RouteGet(netip.MustParseAddr("198.51.100.9").AsSlice())
	if err != nil || len(rs) == 0 || rs[0].LinkIndex != link.Attrs().Index {
		t.Errorf("the operator's route is gone: %+v %v", rs, err)
	}
}
