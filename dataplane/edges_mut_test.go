package dataplane

// Edge cases from a mutation audit of the dataplane (worker.go, fast.go,
// punt.go, quic.go, secondchance.go): each test fails on a mutant that
// every other test of the package let through.

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/punt"
	"github.com/fulcrumlb/fulcrum/sched"
)

// A forged SYN to a check's port is dropped with a single check through
// the tunnel as with several (svc.health.n > 0, not > 1).
func TestEdgeForgedCheckSYNWithOneCheck(t *testing.T) {
	cfg := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Web(1).
		Sub("[vip.health]", `kind = "http"`, "port = 8080", `through = "tunnel"`).
		String()
	r := newRig(t, cfg)
	port := r.healthPort("web", "be1")
	_, v := r.run(frame(t, "198.51.100.7", lb4, 80, port, layers.IPProtocolTCP, "S", 0, true))
	if v[0] != Drop || r.w.c.Drops[DropHealthForgedSYN] != 1 || r.w.c.Punted != 0 {
		t.Fatalf("forged SYN to the one check's port: verdict %v, health-check-forged-syn %d, punted %d; want drop, 1, 0",
			v[0], r.w.c.Drops[DropHealthForgedSYN], r.w.c.Punted)
	}
}

// The group bit of a source MAC address is the first octet's low bit
// (IEEE 802): an echo request from a multicast MAC whose second octet is
// even gets no reply, and one from a unicast MAC whose second octet is odd
// gets its reply.
func TestEdgeGroupSourceIsTheFirstOctetsBit(t *testing.T) {
	r := newRig(t, testConfig)
	ping := icmpEcho(t, "198.51.100.10", configtest.Web)
	mcast := append([]byte(nil), ping...)
	copy(mcast[6:12], []byte{0x01, 0x00, 0x5e, 0x00, 0x00, 0x07})
	oddSecond := append([]byte(nil), ping...)
	copy(oddSecond[6:12], []byte{0x02, 0x01, 0x00, 0x00, 0x00, 0xaa})
	_, v := r.run(mcast, oddSecond)
	if v[0] != Drop || r.w.c.Drops[DropReplyToGroup] != 1 {
		t.Errorf("echo from 01:00:5e:00:00:07: verdict %v, reply-to-group %d; want drop, 1", v[0], r.w.c.Drops[DropReplyToGroup])
	}
	if v[1] != Tx || r.w.c.EchoReplies != 1 {
		t.Errorf("echo from 02:01:00:00:00:aa: verdict %v, echo replies %d; want tx, 1", v[1], r.w.c.EchoReplies)
	}
}

// Link-local is 169.254.0.0/16 and fe80::/10 exactly: a packet to
// 169.1.2.3 or to fec0::1 (another host's, or no one's) is not the
// kernel's, and is dropped as not-for-host instead of taking a punt token.
func TestEdgeLinkLocalBoundsForHost(t *testing.T) {
	r := newRig(t, testConfig)
	cases := []struct {
		src, dst string
		want     Verdict
	}{
		{"198.51.100.7", "169.254.1.1", Punt},
		{"198.51.100.7", "169.1.2.3", Drop},
		{"198.51.100.7", "170.254.1.1", Drop},
		{"2001:db8:c::7", "fe80::1", Punt},
		{"2001:db8:c::7", "febf::1", Punt},
		{"2001:db8:c::7", "fec0::1", Drop},
		{"2001:db8:c::7", "fe00::1", Drop},
	}
	for _, tc := range cases {
		drops, punted := r.w.c.Drops[DropNotForHost], r.w.c.Punted
		_, v := r.run(frame(t, tc.src, tc.dst, 40000, 22, layers.IPProtocolTCP, "S", 0, true))
		if v[0] != tc.want {
			t.Errorf("to %s: verdict %v, want %v", tc.dst, v[0], tc.want)
		}
		if tc.want == Drop && (r.w.c.Drops[DropNotForHost] != drops+1 || r.w.c.Punted != punted) {
			t.Errorf("to %s: not-for-host +%d, punted +%d; want +1, +0", tc.dst, r.w.c.Drops[DropNotForHost]-drops, r.w.c.Punted-punted)
		}
	}
}

// A retransmitted SYN (no SYN-ACK came back: the entry is still new) of
// a load-based VIP keeps its first choice only while that backend is
// healthy: one its checks call down (on_down "keep": Unhealthy, not
// Down) may be dead, and the retransmission is placed anew.
func TestEdgeRetransmittedSYNLeavesAnUnhealthyPin(t *testing.T) {
	for _, k := range sched.Kinds() {
		if !k.IsPicker() {
			continue
		}
		t.Run(k.String(), func(t *testing.T) {
			r := newRig(t, withScheduler(k))
			be1 := backendAddr(r, "web", "be1")
			syn := func(sp uint16) []byte {
				return frame(t, "198.51.100.95", configtest.Web, sp, 80, layers.IPProtocolTCP, "S", 0, true)
			}
			var on1 []uint16
			for sp := uint16(26000); len(on1) < 3 && sp < 26200; sp++ {
				if out, v := r.run(syn(sp)); tunnelDst(t, out[0], v[0]) == be1 {
					on1 = append(on1, sp)
				}
			}
			if len(on1) < 3 {
				t.Fatal("too few SYNs placed on be1")
			}
			r.publish(Overrides{{"web", "be1"}: {Weight: 0, Unhealthy: true}})
			for _, sp := range on1 {
				out, v := r.run(syn(sp))
				if d := tunnelDst(t, out[0], v[0]); d == be1 || !d.IsValid() {
					t.Errorf("retransmitted SYN of port %d went to %v, want another backend than the unhealthy be1", sp, d)
				}
			}
		})
	}
}

// A retransmitted SYN of a Maglev VIP takes the table's current choice on
// both paths: after its backend was drained (weight 0, not down) it goes
// where the table says now, not to the drained pin.
func TestEdgeRetransmittedSYNFollowsTheTable(t *testing.T) {
	for _, general := range []bool{false, true} {
		r := newRig(t, testConfig)
		r.w.generalOnly = general
		be1 := backendAddr(r, "web", "be1")
		syn := func(sp uint16) []byte {
			return frame(t, "198.51.100.96", configtest.Web, sp, 80, layers.IPProtocolTCP, "S", 0, true)
		}
		var on1 []uint16
		for sp := uint16(27000); len(on1) < 3 && sp < 27200; sp++ {
			if out, v := r.run(syn(sp)); tunnelDst(t, out[0], v[0]) == be1 {
				on1 = append(on1, sp)
			}
		}
		if len(on1) < 3 {
			t.Fatal("too few SYNs placed on be1")
		}
		r.publish(Overrides{{"web", "be1"}: {Weight: 0}})
		for _, sp := range on1 {
			out, v := r.run(syn(sp))
			if d := tunnelDst(t, out[0], v[0]); d == be1 || !d.IsValid() {
				t.Errorf("general %v: retransmitted SYN of port %d went to %v, want the table's choice (be1 is drained)", general, sp, d)
			}
		}
	}
}

// A SYN on a live flow with a second chance goes to the chance (which
// holds the connection) only while the chance is healthy: one its checks
// call down (Unhealthy, not Down) may be dead, and the SYN stays on the
// pin.
func TestEdgeKeptSYNSkipsAnUnhealthyChance(t *testing.T) {
	for _, general := range []bool{false, true} {
		r := newRig(t, testConfig)
		r.w.generalOnly = general
		nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
		t0 := time.Unix(1_000_000, 0)
		s3, err := NewServicesAt(nil, r.enc, nh, chanceSpecs(3, encap.GRE, chanceWindow, nil), t0)
		if err != nil {
			t.Fatal(err)
		}
		s4, err := NewServicesAt(s3, r.enc, nh, chanceSpecs(4, encap.GRE, chanceWindow, nil), t0.Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		r.shared.Services.Store(s4)
		moved, _, old, cur := chanceFlows(t, r.key, 1)
		p := moved[0]
		seg := func(flags string, payload int) []byte {
			return frame(t, "198.51.100.9", chanceVIP, p, 80, layers.IPProtocolTCP, flags, payload, true)
		}
		addr := func(name string) netip.Addr {
			var n int
			fmt.Sscanf(name, "be%d", &n)
			return netip.MustParseAddr(fmt.Sprintf("10.0.9.%d", n))
		}
		out, v := r.run(seg("A", 10))
		if d, ch := tunnelChance(t, out[0]); v[0] != Tx || d != addr(cur[p]) || ch != addr(old[p]) {
			t.Fatalf("moved flow: to %v naming %v, want %s naming %s", d, ch, cur[p], old[p])
		}
		r.run(seg("A", 10), seg("A", 10))
		kept := r.w.c.SYNKept
		s5, err := NewServicesAt(s4, r.enc, nh, chanceSpecs(4, encap.GRE, chanceWindow, map[string]Effective{old[p]: {Weight: 0, Unhealthy: true}}), t0.Add(11*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		r.shared.Services.Store(s5)
		out, v = r.run(seg("S", 0))
		if d, _ := tunnelChance(t, out[0]); v[0] != Tx || d != addr(cur[p]) {
			t.Errorf("general %v: SYN on the live flow went to %v, want its pin %s (the chance %s is unhealthy)", general, d, cur[p], old[p])
		}
		if r.w.c.SYNKept != kept+1 {
			t.Errorf("general %v: SYNKept +%d, want +1 (a SYN on a live flow)", general, r.w.c.SYNKept-kept)
		}
	}
}

// Fragments go through no conntrack lookup: they are counted neither as
// conntrack hits nor as misses (the ct miss rate an operator reads would
// rise with every fragment otherwise).
func TestEdgeFragmentsAreNoConntrackMisses(t *testing.T) {
	r := newRig(t, testConfig)
	mk := func(off uint16, more bool) []byte {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 51, 100, 10}, DstIP: net.IP{203, 0, 113, 7}, FragOffset: off, Id: 78}
		if more {
			ip.Flags = layers.IPv4MoreFragments
		}
		buf := gopacket.NewSerializeBuffer()
		_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4}, ip, gopacket.Payload(make([]byte, 64)))
		return append([]byte(nil), buf.Bytes()...)
	}
	_, v := r.run(mk(8, true), mk(16, false))
	if v[0] != Tx || v[1] != Tx {
		t.Fatalf("fragments: verdicts %v", v)
	}
	if c := &r.w.c; c.Fragments != 2 || c.CTMisses != 0 || c.CTHits != 0 {
		t.Errorf("fragments %d, ct misses %d, ct hits %d; want 2, 0, 0", c.Fragments, c.CTMisses, c.CTHits)
	}
}

// A new flow from a VIP's own address is a martian source once: the next
// flow without a backend is counted as no-backend, not as another martian.
func TestEdgeSelfSourceCountedOnce(t *testing.T) {
	r := newRig(t, testConfig)
	_, v := r.run(frame(t, "203.0.113.7", "203.0.113.7", 7100, 80, layers.IPProtocolTCP, "S", 0, true))
	if v[0] != Drop || r.w.c.Drops[DropMartianSource] != 1 {
		t.Fatalf("SYN from the VIP itself: verdict %v, martian-source %d; want drop, 1", v[0], r.w.c.Drops[DropMartianSource])
	}
	r.publish(Overrides{{"web", "be1"}: {}, {"web", "be2"}: {}, {"web", "be3"}: {}})
	_, v = r.run(frame(t, "198.51.100.31", "203.0.113.7", 7101, 80, layers.IPProtocolTCP, "S", 0, true))
	if v[0] != Drop || r.w.c.Drops[DropNoBackend] != 1 || r.w.c.Drops[DropMartianSource] != 1 {
		t.Errorf("SYN with every backend drained: verdict %v, no-backend %d, martian-source %d; want drop, 1, 1",
			v[0], r.w.c.Drops[DropNoBackend], r.w.c.Drops[DropMartianSource])
	}
}

// A priority tag (VLAN 0) with a non-zero priority (PCP) is still a
// priority tag: the kernel takes the frame as untagged, so the LB's ARP
// from a switch that marks priority reaches it (only the VLAN id's 12
// bits make a frame another VLAN's).
func TestEdgePriorityTagWithPCPIsPunted(t *testing.T) {
	r := newRig(t, testConfig)
	arp, _, _, _, _ := puntFrames(t)
	_, v := r.run(tagVID(arp(1), 0xa000), tagVID(arp(2), 0xa064))
	if v[0] != Punt {
		t.Errorf("ARP for the LB, priority 5 on VLAN 0: verdict %v, want punt", v[0])
	}
	if v[1] != Drop {
		t.Errorf("ARP for the LB, priority 5 on VLAN 100: verdict %v, want drop", v[1])
	}
}

// The health class of the punt budget is for the checks' answers: from a
// backend's address, or (through the tunnel) from a VIP to a check port.
// A TCP segment to a check port from anyone else is other: an attacker
// could otherwise spend the health budget and the checks' SYN-ACKs would
// be dropped as punt-rate-limited, calling healthy backends down.
func TestEdgeHealthPuntClassNeedsVIPSource(t *testing.T) {
	r := newRig(t, tunnelConfig)
	port := r.healthPort("web", "be1")
	svc := r.shared.Services.Load()
	for _, tc := range []struct {
		src  string
		want punt.Class
	}{
		{configtest.Web, punt.Health},
		{"198.51.100.7", punt.Other},
	} {
		f := frame(t, tc.src, lb4, 80, port, layers.IPProtocolTCP, "SA", 0, true)
		var ps packet.Parsed
		if res := packet.Parse(f, &ps); res != packet.OK {
			t.Fatalf("parse: %v", res)
		}
		if got := puntClass(svc, &ps); got != tc.want {
			t.Errorf("SYN-ACK from %s to check port %d: class %v, want %v", tc.src, port, got, tc.want)
		}
	}
}

// Only an error about the LB's own tunnel packet (from the LB's address,
// to a backend, by GRE/IPIP or UDP to the GUE port) is a tunnel-icmp-error
// drop; an error about another packet (another source, another
// destination, UDP to another port: a check's or the host's own datagram)
// is the kernel's.
func TestEdgeTunnelICMPNeedsTheLBsTunnelPacket(t *testing.T) {
	r := newRig(t, testConfig)
	be := "10.0.1.1"
	gre := func(src, dst string) []byte { return raw4(src, dst, 47, 9, 0x4000, make([]byte, 28))[14:] }
	udp := frame(t, lb4, be, 5353, 53, layers.IPProtocolUDP, "", 8, false)[14:]
	cases := []struct {
		name  string
		quote []byte
		want  Verdict
	}{
		{"GRE from the LB to a backend", gre(lb4, be), Drop},
		{"GRE from another address to a backend", gre("198.51.100.50", be), Punt},
		{"GRE from the LB to no backend", gre(lb4, "10.77.0.1"), Punt},
		{"UDP from the LB to a backend's port 53", udp, Punt},
	}
	for i, tc := range cases {
		drops := r.w.c.Drops[DropTunnelICMP]
		r.now += 1000
		_, v := r.run(raw4(be, lb4, 1, uint16(100+i), 0, icmpMsg(3, 3, 0, tc.quote)))
		if v[0] != tc.want {
			t.Errorf("%s: verdict %v, want %v", tc.name, v[0], tc.want)
		}
		if want := uint64(0); tc.want == Drop {
			if r.w.c.Drops[DropTunnelICMP] != drops+1 {
				t.Errorf("%s: tunnel-icmp-error +%d, want +1", tc.name, r.w.c.Drops[DropTunnelICMP]-drops)
			}
		} else if r.w.c.Drops[DropTunnelICMP] != drops+want {
			t.Errorf("%s: tunnel-icmp-error +%d, want +0", tc.name, r.w.c.Drops[DropTunnelICMP]-drops)
		}
	}
}
