package exception

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vishvananda/netlink"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// udpFrame is a UDP datagram from src to dst in an Ethernet frame from
// srcMAC to dstMAC, checksums right.
func udpFrame(t *testing.T, srcMAC, dstMAC [6]byte, src, dst netip.Addr) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: srcMAC[:], DstMAC: dstMAC[:], EthernetType: layers.EthernetTypeIPv4}
	var ip gopacket.NetworkLayer
	var ipl gopacket.SerializableLayer
	if dst.Is4() {
		v4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		ip, ipl = v4, v4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		ip, ipl = v6, v6
	}
	u := &layers.UDP{SrcPort: 4000, DstPort: 9}
	_ = u.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ipl, u, gopacket.Payload("relay")); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// forwarded is how many datagrams the LB's namespace has forwarded, both
// families (the kernel's SNMP counters: ForwDatagrams, Ip6OutForwDatagrams).
func (l *lan) forwarded(t *testing.T) uint64 {
	t.Helper()
	var n uint64
	in(t, l.lbNSh, func() error {
		// thread-self: this thread's namespace, not the process's.
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i+1 < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "Ip: ") || !strings.HasPrefix(lines[i+1], "Ip: ") {
				continue
			}
			ks, vs := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			for j := range ks {
				if ks[j] == "ForwDatagrams" && j < len(vs) {
					v, err := strconv.ParseUint(vs[j], 10, 64)
					if err != nil {
						return err
					}
					n += v
				}
			}
			break
		}
		b, err = os.ReadFile("/proc/thread-self/net/snmp6")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "Ip6OutForwDatagrams" {
				v, err := strconv.ParseUint(f[1], 10, 64)
				if err != nil {
					return err
				}
				n += v
			}
		}
		return nil
	})
	return n
}

func txPackets(t *testing.T, h *netlink.Handle, ifc string) uint64 {
	t.Helper()
	link, err := h.LinkByName(ifc)
	if err != nil {
		t.Fatal(err)
	}
	return link.Attrs().Statistics.TxPackets
}

// TestExceptionPathForwardsNothing: the dataplane punts every packet that
// is not VIP traffic to the kernel through the exception interface,
// whatever its destination. On a host with forwarding on (ip_forward=1 and
// IPv6 forwarding, a container host's default), the kernel routed such
// packets on: anyone on the LB's LAN could send through the LB into
// another network of the host (here "mgmt"), with any source. After
// Configure, nothing that arrives on the exception interface is
// forwarded, in either family, while the host's own address still
// answers (ARP here).
func TestExceptionPathForwardsNothing(t *testing.T) {
	l := newLAN(t, "fwd")
	// The host's management network: a veth whose other end is up in
	// the peer's namespace (only so that its carrier is up), with a
	// station on it.
	mgmt := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "flxmgmt"}, PeerName: "flxmgmtp"}
	if err := netlink.LinkAdd(mgmt); err != nil {
		t.Fatal(err)
	}
	for n, ns := range map[string]int{"flxmgmt": int(l.lbNSh), "flxmgmtp": int(l.peerNSh)} {
		link, err := netlink.LinkByName(n)
		if err == nil {
			err = netlink.LinkSetNsFd(link, ns)
		}
		if err != nil {
			if link, lerr := netlink.LinkByName("flxmgmt"); lerr == nil {
				netlink.LinkDel(link)
			}
			t.Fatal(err)
		}
	}
	m, err := l.lbH.LinkByName("flxmgmt")
	if err != nil {
		t.Fatal(err)
	}
	mp, err := l.peerH.LinkByName("flxmgmtp")
	if err != nil {
		t.Fatal(err)
	}
	station4, station6 := netip.MustParseAddr("198.51.100.5"), netip.MustParseAddr("2001:db8:200::5")
	for _, p := range []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24"), netip.MustParsePrefix("2001:db8:200::1/64")} {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = 0x02 // IFA_F_NODAD
		}
		if err := l.lbH.AddrAdd(m, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.lbH.LinkSetUp(m); err != nil {
		t.Fatal(err)
	}
	if err := l.peerH.LinkSetUp(mp); err != nil {
		t.Fatal(err)
	}
	addNeigh(t, l.lbH, "flxmgmt", station4, [6]byte{2, 0, 0, 0, 0, 0x55}, netlink.NUD_PERMANENT)
	addNeigh(t, l.lbH, "flxmgmt", station6, [6]byte{2, 0, 0, 0, 0, 0x55}, netlink.NUD_PERMANENT)
	in(t, l.lbNSh, func() error {
		for _, k := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
			if err := os.WriteFile(k, []byte("1"), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	// Forwarding on, set after Configure (as a container runtime
	// starting later does): Configure again, as a reload does.
	if err := Configure(Iface{Name: l.lbIf, MAC: l.lbMAC, MTU: 1500,
		Addrs: []netip.Prefix{netip.PrefixFrom(l.lbAddr, 24), netip.PrefixFrom(l.lbAddr6, 64)}}, l.lbNS); err != nil {
		t.Fatal(err)
	}

	const n = 20
	attacker := [6]byte{2, 0, 0, 0, 0, 0x66}
	var frames [][]byte
	for i := 0; i < n; i++ {
		frames = append(frames,
			udpFrame(t, attacker, l.lbMAC, netip.MustParseAddr("192.0.2.66"), station4),
			udpFrame(t, attacker, l.lbMAC, netip.MustParseAddr("2001:db8:100::66"), station6))
	}
	before, lbTx := l.forwarded(t), txPackets(t, l.lbH, l.lbIf)
	// Then an ARP request for the LB's address: its answer, sent after
	// the kernel has taken every frame before it, tells they were all
	// handled.
	frames = append(frames, arp(1, attacker, attacker, netip.MustParseAddr("192.0.2.66"), l.lbAddr))
	l.send(t, frames...)
	deadline := time.Now().Add(5 * time.Second)
	for txPackets(t, l.lbH, l.lbIf) == lbTx {
		if time.Now().After(deadline) {
			t.Fatal("the LB's address did not answer ARP within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := l.forwarded(t) - before; got != 0 {
		t.Errorf("the kernel forwarded %d of %d packets that arrived on the exception interface into another network", got, 2*n)
	}
	// Idempotent: one rule per family, however often Configure runs.
	if err := Configure(Iface{Name: l.lbIf, MAC: l.lbMAC, MTU: 1500, Addrs: []netip.Prefix{netip.PrefixFrom(l.lbAddr, 24)}}, l.lbNS); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := l.lbH.RuleListFiltered(fam, &netlink.Rule{Priority: ForwardRulePriority}, netlink.RT_FILTER_PRIORITY)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].IifName != l.lbIf {
			t.Errorf("family %d: rules at %d: %+v, want one for %s", fam, ForwardRulePriority, rs, l.lbIf)
		}
	}
}

// TestResolverResolvesBothFamiliesOnTheLAN: with the exception interface
// configured (its no-forwarding rules in place), the resolver gets the
// gateway's MAC for both families from the kernel, which asks ARP and ND
// on the link when poked (in the interface's namespace) and takes the
// answers, addressed to the host: the rules keep the host's own traffic.
func TestResolverResolvesBothFamiliesOnTheLAN(t *testing.T) {
	l := newLAN(t, "res")
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []netip.Prefix{netip.PrefixFrom(l.gwAddr, 24), netip.PrefixFrom(l.gwAddr6, 64)} {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = 0x02 // IFA_F_NODAD
		}
		if err := l.peerH.AddrAdd(peer, a); err != nil {
			t.Fatal(err)
		}
	}
	pubs := make(chan dataplane.NextHop, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: 20 * time.Millisecond}
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: l.gwAddr, IPv6: l.gwAddr6} }, nil, func(_ Gateways, nh dataplane.NextHop) bool { pubs <- nh; return true })
	}()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case nh := <-pubs:
			if nh.Has4 && nh.MAC4 != l.peerMAC || nh.Has6 && nh.MAC6 != l.peerMAC {
				t.Fatalf("published %+v, want %v for both", nh, net.HardwareAddr(l.peerMAC[:]))
			}
			if nh.Has4 && nh.Has6 {
				return
			}
		case <-deadline:
			t.Fatal("both gateways not resolved within 10s")
		}
	}
}
