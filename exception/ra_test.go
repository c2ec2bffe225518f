package exception

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vishvananda/netlink"
)

// ndFrame is an ICMPv6 neighbour discovery message (hop limit 255, as
// from the link) from src/srcMAC to dst/dstMAC, checksum right.
func ndFrame(t *testing.T, srcMAC, dstMAC [6]byte, src, dst netip.Addr, msg gopacket.SerializableLayer) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: srcMAC[:], DstMAC: dstMAC[:], EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	icmp := &layers.ICMPv6{}
	_ = icmp.SetNetworkLayerForChecksum(ip)
	var typ uint8
	switch msg.(type) {
	case *layers.ICMPv6RouterAdvertisement:
		typ = layers.ICMPv6TypeRouterAdvertisement
	case *layers.ICMPv6NeighborSolicitation:
		typ = layers.ICMPv6TypeNeighborSolicitation
	}
	icmp.TypeCode = layers.CreateICMPv6TypeCode(typ, 0)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, icmp, msg); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRouterAdvertisementLeavesTheTapAlone: the dataplane punts
// router advertisements to the kernel (the neighbour class), and the
// exception interface is a host interface with the kernel's defaults
// (accept_ra 1, autoconf 1). The LB's router (or anyone on the LAN)
// advertising the LB's own /64 then gives fulcrum0 a SLAAC address the
// operator never configured, and a default route through the dataplane's
// port. The kernel may source its own traffic (BGP, checks, the host's
// IPv6) from that address, and the dataplane drops every answer to it as
// not-for-host (it punts only lb_ipv6); Configure keeps exactly
// ifc.Addrs only until the next RA.
func TestRouterAdvertisementLeavesTheTapAlone(t *testing.T) {
	l := newLAN(t, "ra")
	routerLL := netip.MustParseAddr("fe80::1")
	prefix := net.ParseIP("2001:db8:100::")
	ra := &layers.ICMPv6RouterAdvertisement{HopLimit: 64, RouterLifetime: 1800, Options: layers.ICMPv6Options{
		{Type: layers.ICMPv6OptSourceAddress, Data: l.peerMAC[:]},
		{Type: layers.ICMPv6OptPrefixInfo, Data: append([]byte{64, 0xc0, 0, 0, 0x0e, 0x10, 0, 0, 0x0e, 0x10, 0, 0, 0, 0}, prefix...)},
		{Type: layers.ICMPv6OptMTU, Data: []byte{0, 0, 0, 0, 0x05, 0x00}}, // 1280
	}}
	allNodes := [6]byte{0x33, 0x33, 0, 0, 0, 1}
	// Then a neighbour solicitation for lb_ipv6 from another link-local
	// address: once the kernel holds a neighbour entry for its source, it
	// has taken the RA sent before it (one CPU, one backlog, in order).
	probe := netip.MustParseAddr("fe80::99")
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: l.lbAddr6.AsSlice(), Options: layers.ICMPv6Options{
		{Type: layers.ICMPv6OptSourceAddress, Data: l.peerMAC[:]},
	}}
	solicited := netip.MustParseAddr("ff02::1:ff00:10")
	// Sent again until the kernel takes them: a link just up does not
	// receive IPv6 multicast until the kernel has joined its groups.
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.send(t, ndFrame(t, l.peerMAC, allNodes, routerLL, netip.MustParseAddr("ff02::1"), ra),
			ndFrame(t, l.peerMAC, [6]byte{0x33, 0x33, 0xff, 0, 0, 0x10}, probe, solicited, ns))
		if _, _, ok := neighMAC(t, l.lbH, l.lbIf, probe); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kernel never took the neighbour solicitation sent after the RA (precondition)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	link, err := l.lbH.LinkByName(l.lbIf)
	if err != nil {
		t.Fatal(err)
	}
	if got := globalAddrs(t, l.lbH, link); len(got) != 2 {
		t.Errorf("after one router advertisement the exception interface has addresses %v, want only the configured 192.0.2.10/24 and 2001:db8:100::10/64", got)
	}
	in(t, l.lbNSh, func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + l.lbIf + "/mtu")
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(b)); got != "1500" {
			t.Errorf("after one router advertisement the exception interface's IPv6 MTU is %s, want the configured 1500", got)
		}
		return nil
	})
	routes, err := l.lbH.RouteList(link, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.String() == "::/0" {
			t.Errorf("after one router advertisement the kernel routes through the exception interface: %v", r)
		}
	}
}
