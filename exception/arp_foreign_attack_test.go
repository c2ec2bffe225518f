package exception

import (
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestTapAnswersARPOnlyForItsOwnAddresses: the dataplane punts every
// broadcast ARP request of the LB's LAN to the tap, and Linux answers ARP
// for any address of the host on any interface (arp_ignore 0, the weak
// host model). So the LB answered, with the wire port's MAC, an ARP
// request on the production LAN for an address of another of its
// interfaces (the management network's, a container bridge's): it claimed
// that address on a LAN where it does not live, and the traffic that
// followed reached the dataplane, which drops it (not-for-host). A station
// of the LAN that has the same address (overlapping private ranges, the
// common 172.17.0.1 of container bridges) loses its traffic to the LB
// whenever the LB's answer comes last; and the LAN learns the host's other
// addresses. The tap must answer only for its own addresses (the
// configuration's lb_ipv4), as README says of it ("its addresses ...
// are the configuration's alone").
func TestTapAnswersARPOnlyForItsOwnAddresses(t *testing.T) {
	l := newLAN(t, "arpi")
	// Another interface of the LB host, with an address of its own.
	// (A veth pair inside the LB's namespace: the test's own.)
	if err := l.lbH.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "flxarpimg"}, PeerName: "flxarpimp"}); err != nil {
		t.Fatal(err)
	}
	mgmt, err := l.lbH.LinkByName("flxarpimg")
	if err != nil {
		t.Fatal(err)
	}
	mgmtAddr := netip.MustParseAddr("198.51.100.5")
	if err := l.lbH.AddrAdd(mgmt, &netlink.Addr{IPNet: &net.IPNet{IP: mgmtAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	if err := l.lbH.LinkSetUp(mgmt); err != nil {
		t.Fatal(err)
	}
	// Configure again, as a reload does, with the other interface there.
	if err := Configure(Iface{Name: l.lbIf, MAC: l.lbMAC, MTU: 1500,
		Addrs: []netip.Prefix{netip.PrefixFrom(l.lbAddr, 24), netip.PrefixFrom(l.lbAddr6, 64)}}, l.lbNS); err != nil {
		t.Fatal(err)
	}
	// A station of the LAN that looks for mgmtAddr on the LAN (quick
	// failure: 3 requests 100 ms apart), and for the LB's own address.
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.peerH.AddrAdd(peer, &netlink.Addr{IPNet: &net.IPNet{IP: l.gwAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	if err := l.peerH.RouteAdd(&netlink.Route{LinkIndex: peer.Attrs().Index, Dst: &net.IPNet{IP: mgmtAddr.AsSlice(), Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}); err != nil {
		t.Fatal(err)
	}
	in(t, l.peerNSh, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/neigh/"+l.peerIf+"/retrans_time_ms", []byte("100"), 0o644)
	})
	// state is the peer's neighbour entry for ip: its MAC and NUD state.
	state := func(ip netip.Addr) ([6]byte, int) {
		ns, err := l.peerH.NeighList(peer.Attrs().Index, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip {
				var m [6]byte
				copy(m[:], n.HardwareAddr)
				return m, n.State
			}
		}
		return [6]byte{}, netlink.NUD_NONE
	}
	// resolve has the peer's kernel look ip up, and returns the MAC it
	// found, or false once its requests went unanswered.
	resolve := func(ip netip.Addr) ([6]byte, bool) {
		poke(l.peerNS, l.peerIf, ip)
		deadline := time.Now().Add(10 * time.Second)
		for {
			m, st := state(ip)
			switch {
			case st&netlink.NUD_FAILED != 0:
				return m, false
			case st&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE) != 0:
				return m, true
			}
			if time.Now().After(deadline) {
				t.Fatalf("the peer's entry for %v still %#x after 10s", ip, st)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if m, ok := resolve(l.lbAddr); !ok || m != l.lbMAC {
		t.Fatalf("the LB's own address: %v %v, want %v (precondition)", net.HardwareAddr(m[:]), ok, net.HardwareAddr(l.lbMAC[:]))
	}
	if m, ok := resolve(mgmtAddr); ok {
		t.Errorf("ARP for %v, an address of another interface of the LB host, answered on the LB's LAN with %v; want no answer",
			mgmtAddr, net.HardwareAddr(m[:]))
	}
}
