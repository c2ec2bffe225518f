package control

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/exception"
)

// revertNetns makes a network namespace with a tap ifc in it holding the
// LB's address, as the daemon's exception interface is.
func revertNetns(t *testing.T, ifc string) (string, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	name := fmt.Sprintf("fulcrum-ctl-%d", os.Getpid())
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Skipf("netns: %v", err)
	}
	ns, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("back to the test's namespace: %v", serr)
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
	if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: ifc}, Mode: netlink.TUNTAP_MODE_TAP}); err != nil {
		t.Skipf("tap device: %v", err)
	}
	if err := exception.MoveToNetns(ifc, name); err != nil {
		if l, lerr := netlink.LinkByName(ifc); lerr == nil {
			netlink.LinkDel(l)
		}
		t.Fatal(err)
	}
	if err := exception.Configure(exception.Iface{Name: ifc, MAC: [6]byte{2, 0xf1, 0, 0, 0, 0x41}, MTU: 1500,
		Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}}, name); err != nil {
		t.Fatal(err)
	}
	return name, h
}

// A static next_hop_mac set by one reload and removed by the next, both
// while the resolver is in the middle of one round (in its netlink
// look-up, or waiting for the plane's lock that the reloads hold), the
// gateway and its MAC unchanged. The first reload forgets the resolved
// MAC (Apply: p.hop = resolvedHop{}), the second publishes a snapshot
// with the family unresolved and signals GatewaysChanged. But the
// resolver never saw the static period (Gateways() was never empty when
// it asked): the gateway and MAC it finds are the ones it last published,
// so it publishes nothing, at this round or any later one while the
// neighbour entry stays valid. Every tunnelled packet is dropped as
// no-next-hop from then on, and the VIPs are withdrawn after
// NextHopGrace.
func TestStaticMACSetAndRevertedWithinOneResolverRound(t *testing.T) {
	const ifc = "flctl41"
	ns, h := revertNetns(t, ifc)
	link, err := h.LinkByName(ifc)
	if err != nil {
		t.Fatal(err)
	}
	gwMAC := [6]byte{2, 0, 0, 0, 0, 0x41}
	if err := h.NeighSet(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.IP(netip.MustParseAddr("192.0.2.1").AsSlice()), HardwareAddr: net.HardwareAddr(gwMAC[:])}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, nhCfg(false)) // gateway_ipv4 = 192.0.2.1, no static MAC
	parse := func(s string) *config.Config {
		c, err := config.Parse([]byte(s), "test.toml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The resolver as fulcrum run wires it; gate stands for the time a
	// round takes (each round waits for a permit).
	gate := make(chan struct{}, 16)
	var rounds atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &exception.Resolver{Iface: ifc, Netns: ns, Interval: time.Hour}
	go func() {
		defer close(done)
		r.Run(ctx, func() exception.Gateways {
			rounds.Add(1)
			<-gate
			v4, v6 := f.plane.Gateways()
			return exception.Gateways{IPv4: v4, IPv6: v6}
		}, f.plane.GatewaysChanged(), func(g exception.Gateways, nh dataplane.NextHop) bool {
			return f.plane.SetNextHop(g.IPv4, g.IPv6, nh)
		})
	}()
	t.Cleanup(func() { cancel(); close(gate); <-done })
	resolved := func() bool {
		nh := f.shared.Services.Load().NextHop
		return nh.Has4 && nh.MAC4 == gwMAC
	}
	waitUntil := func(what string, cond func() bool) bool {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if cond() {
				return true
			}
		}
		t.Logf("%s: not within 5s", what)
		return false
	}

	gate <- struct{}{} // round 1
	if !waitUntil("first resolution", resolved) {
		t.Fatal("the resolver never published the gateway's MAC")
	}
	if r := f.lc.send(syn(t, 5000, "S")); r.verdict != dataplane.Tx {
		t.Fatalf("before the reloads: %v", r.verdict)
	}

	// Reload 1 sets the static MAC: the resolver is woken and starts
	// round 2, which is still running when reload 2 removes the MAC.
	if err := f.plane.Apply(parse(nhCfg(true))); err != nil {
		t.Fatal(err)
	}
	if !waitUntil("round 2 started", func() bool { return rounds.Load() >= 2 }) {
		t.Fatal("the resolver did not start a round after the first reload")
	}
	if err := f.plane.Apply(parse(nhCfg(false))); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		gate <- struct{}{} // rounds 2 and on run freely
	}
	if !waitUntil("round 3 started", func() bool { return rounds.Load() >= 3 }) {
		t.Fatal("the resolver did not run again after the second reload's signal")
	}
	if !waitUntil("next hop back", resolved) {
		r := f.lc.send(syn(t, 5001, "S"))
		t.Errorf("after next_hop_mac was set and removed again (gateway 192.0.2.1 unchanged, resolvable at %v): snapshot next hop %+v, a SYN's verdict %v; the resolver ran %d rounds and will not publish again while the MAC stays the same",
			net.HardwareAddr(gwMAC[:]), f.shared.Services.Load().NextHop, r.verdict, rounds.Load())
	}
}
