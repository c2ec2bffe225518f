package dataplane

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/sched"
)

// withScheduler is testConfig with both VIPs on scheduler k.
func withScheduler(k sched.Kind) string {
	s := strings.Replace(testConfig, "port = 80\n", fmt.Sprintf("port = 80\nscheduler = %q\n", k), 1)
	return strings.Replace(s, "encap = \"ipip\"\n", fmt.Sprintf("encap = \"ipip\"\nscheduler = %q\n", k), 1)
}

// sumBackends adds up the per-backend counters of the test config's ids.
func sumBackends(c *Counters) (p PacketBytes) {
	for _, b := range c.Backends {
		p.Packets += b.Packets
		p.NewFlows += b.NewFlows
		p.SYNs += b.SYNs
		p.Established += b.Established
		p.SYNRetrans += b.SYNRetrans
		p.HandshakeMs += b.HandshakeMs
	}
	return p
}

// Every packet of a new flow goes where its first packet went, even when
// they share the first packet's receive burst, under every scheduler; and
// the flow is counted once.
func TestNewFlowBurstOneBackend(t *testing.T) {
	for _, k := range sched.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			r := newRig(t, withScheduler(k))
			if v := r.shared.Services.Load().LookupVIP(netip.MustParseAddr("203.0.113.7"), 80, 6); v.Sched != k {
				t.Fatalf("scheduler %v, want %v", v.Sched, k)
			}
			type fl struct {
				src, dst string
				dport    uint16
				flags    []string
			}
			var flows []fl
			for i := 0; i < 8; i++ {
				f := fl{src: "198.51.100.80", dst: "203.0.113.7", dport: 80, flags: []string{"S", "A", "PA", "A"}}
				if i%2 == 1 {
					f.src, f.dst, f.dport = "2001:db8:aaaa::8", "2001:db8:ffff::7", 443
				}
				flows = append(flows, f)
			}
			// One more flow whose SYN is retransmitted within the burst.
			flows = append(flows, fl{src: "198.51.100.81", dst: "203.0.113.7", dport: 80, flags: []string{"S", "S", "A", "A"}})
			// Interleave: the k-th packet of every flow, then the k+1-th.
			var frames [][]byte
			var owner []int
			for p := 0; p < 4; p++ {
				for i, f := range flows {
					frames = append(frames, frame(t, f.src, f.dst, uint16(5000+i), f.dport, layers.IPProtocolTCP, f.flags[p], 0, true))
					owner = append(owner, i)
				}
			}
			out, v := r.run(frames...)
			dst := make([]netip.Addr, len(flows))
			for j := range frames {
				if v[j] != Tx {
					t.Fatalf("packet %d verdict %v (drops %v)", j, v[j], r.w.c.Drops)
				}
				d, _, _ := decodeTunnel(t, out[j])
				i := owner[j]
				if !dst[i].IsValid() {
					dst[i] = d
				} else if d != dst[i] {
					t.Errorf("flow %d: packet %d went to %v, its first packet to %v", i, j, d, dst[i])
				}
			}
			c := &r.w.c
			n, pkts := uint64(len(flows)), uint64(len(frames))
			if c.CTHits+c.CTMisses != pkts || c.CTMisses != n {
				t.Errorf("conntrack hits %d + misses %d, want %d packets of which %d misses", c.CTHits, c.CTMisses, pkts, n)
			}
			var vipNew uint64
			for _, vc := range c.VIPs {
				vipNew += vc.NewFlows
			}
			s := sumBackends(c)
			if vipNew != n || s.NewFlows != n || s.SYNs != n {
				t.Errorf("new flows: VIPs %d, backends %d, SYNs %d; want %d", vipNew, s.NewFlows, s.SYNs, n)
			}
			if s.Established != n || s.SYNRetrans != 1 || s.HandshakeMs != 0 {
				t.Errorf("established %d, SYN retransmissions %d, handshake ms %d; want %d, 1, 0", s.Established, s.SYNRetrans, s.HandshakeMs, n)
			}
			if s.Packets != pkts || r.w.ct.Len() != len(flows) {
				t.Errorf("backend packets %d, conntrack entries %d; want %d, %d", s.Packets, r.w.ct.Len(), pkts, len(flows))
			}
		})
	}
}

// Every packet that goes through conntrack is one hit or one miss: a SYN
// reusing a tuple and a flow moved off a down backend included.
func TestConntrackCountsEachPacketOnce(t *testing.T) {
	r := newRig(t, testConfig)
	const src, vip = "198.51.100.82", "203.0.113.7"
	out, _ := r.run(frame(t, src, vip, 6000, 80, layers.IPProtocolTCP, "S", 0, true))
	first, _, _ := decodeTunnel(t, out[0])
	r.run(frame(t, src, vip, 6000, 80, layers.IPProtocolTCP, "A", 0, true))
	r.run(frame(t, src, vip, 6000, 80, layers.IPProtocolTCP, "FA", 0, true))
	r.run(frame(t, src, vip, 6000, 80, layers.IPProtocolTCP, "S", 0, true)) // a new connection on the same tuple
	r.run(frame(t, src, vip, 6000, 80, layers.IPProtocolTCP, "A", 0, true))
	c := &r.w.c
	if c.CTHits != 4 || c.CTMisses != 1 {
		t.Errorf("hits %d misses %d, want 4 and 1", c.CTHits, c.CTMisses)
	}
	if s := sumBackends(c); s.NewFlows != 2 || s.Established != 2 {
		t.Errorf("new flows %d established %d, want 2 connections, both established", s.NewFlows, s.Established)
	}
	// The backend goes down: the flow moves, and the packet is still one hit.
	var name string
	for _, b := range r.shared.Services.Load().Backends {
		if b != nil && b.Addr == first {
			name = b.Name
		}
	}
	r.publish(Overrides{{"web", name}: {Weight: 0, Down: true}})
	r.run(frame(t, src, vip, 6000, 80, layers.IPProtocolTCP, "A", 0, true))
	if c.Moved != 1 || c.CTHits+c.CTMisses != 6 || c.CTMisses != 1 {
		t.Errorf("moved %d, hits %d, misses %d; want 1 moved and 6 packets of which 1 miss", c.Moved, c.CTHits, c.CTMisses)
	}
}

// icmpEcho is an ICMP echo request from client to the IPv4 vip, built by
// gopacket.
func icmpEcho(t *testing.T, client, vip string) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, IHL: 5, TTL: 50, Protocol: layers.IPProtocolICMPv4, SrcIP: net.ParseIP(client).To4(), DstIP: net.ParseIP(vip).To4()},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 3}, gopacket.Payload("ping!"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// A ping flood uses up the echo budget only: too-big replies, which path
// MTU discovery needs, keep their own. The bursts arrive within one
// millisecond (line rate), so no budget refills between them.
func TestPingFloodLeavesTooBigBudget(t *testing.T) {
	r := newRig(t, testConfig)
	ping := icmpEcho(t, "198.51.100.10", "203.0.113.7")
	big := frame(t, "198.51.100.10", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 1480, true)
	pings := make([][]byte, 60)
	for i := range pings {
		pings[i] = ping
	}
	r.run(pings...)
	r.now -= 10 // run advances the clock 10 ms: keep it where it was
	r.run(pings...)
	r.now -= 10
	_, v := r.run(append(pings, big, big, big, big)...)
	c := &r.w.c
	if c.EchoReplies != EchoBurst || c.Drops[DropEchoRateLimited] != 3*60-EchoBurst {
		t.Errorf("echo replies %d, limited %d; want %d, %d", c.EchoReplies, c.Drops[DropEchoRateLimited], EchoBurst, 3*60-EchoBurst)
	}
	if c.Encap[encap.ICMPReply] != 4 || c.Drops[DropICMPRateLimited] != 0 {
		t.Errorf("too-big replies %d, limited %d; want 4, 0", c.Encap[encap.ICMPReply], c.Drops[DropICMPRateLimited])
	}
	for i := 60; i < 64; i++ {
		if v[i] != Tx {
			t.Errorf("big packet %d: verdict %v, want a too-big reply", i, v[i])
		}
	}
	if got := c.EchoReplies + c.Encap[encap.ICMPReply] + c.Dropped(); got != c.RxPackets {
		t.Errorf("replies + drops = %d, received %d", got, c.RxPackets)
	}
}

// An ICMP error is never sent to a VIP or to the LB's own address: such a
// source is spoofed, and the reply would loop back into the LB. A new
// flow from such a source is dropped before it reaches the encapsulation
// (martian-source); the too-big check behind it (icmp-error-to-self)
// guards flows tracked before.
func TestNoTooBigTowardVIPOrLB(t *testing.T) {
	r := newRig(t, testConfig)
	frames := [][]byte{
		frame(t, "203.0.113.7", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 1480, true),            // the VIP itself
		frame(t, "192.0.2.10", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 1480, true),             // lb_ipv4
		frame(t, "2001:db8:ffff::7", "2001:db8:ffff::7", 2, 443, layers.IPProtocolTCP, "A", 1440, true), // the IPv6 VIP
		frame(t, "2001:db8:100::10", "2001:db8:ffff::7", 2, 443, layers.IPProtocolTCP, "A", 1440, true), // lb_ipv6
		frame(t, "198.51.100.10", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 1480, true),          // a client: answered
		frame(t, "2001:db8:aaaa::1", "2001:db8:ffff::7", 2, 443, layers.IPProtocolTCP, "A", 1440, true), // a client: answered
	}
	_, v := r.run(frames...)
	want := []Verdict{Drop, Drop, Drop, Drop, Tx, Tx}
	for i := range want {
		if v[i] != want[i] {
			t.Errorf("packet %d: verdict %v, want %v", i, v[i], want[i])
		}
	}
	c := &r.w.c
	if c.Drops[DropMartianSource] != 4 || c.Encap[encap.ICMPReply] != 2 {
		t.Errorf("dropped as martian %d, replies %d; want 4, 2", c.Drops[DropMartianSource], c.Encap[encap.ICMPReply])
	}
	if got := c.Encap[encap.ICMPReply] + c.Dropped(); got != c.RxPackets {
		t.Errorf("replies + drops = %d, received %d", got, c.RxPackets)
	}
}

// TCP flag combinations no stack sends are dropped before they create
// state; the ordinary ones pass.
func TestImpossibleTCPFlagsDropped(t *testing.T) {
	for _, tc := range []struct {
		flags string
		ok    bool
	}{
		{"S", true}, {"SA", true}, {"A", true}, {"PA", true}, {"FA", true}, {"R", true}, {"RA", true}, {"SEC", true},
		{"SR", false}, {"SF", false}, {"", false}, {"FPU", false}, {"SRFPUA", false},
	} {
		r := newRig(t, testConfig)
		_, v := r.run(frame(t, "198.51.100.83", "203.0.113.7", 7000, 80, layers.IPProtocolTCP, tc.flags, 0, true))
		c := &r.w.c
		if tc.ok {
			if v[0] != Tx || r.w.ct.Len() != 1 {
				t.Errorf("flags %q: verdict %v, %d conntrack entries; want Tx and 1", tc.flags, v[0], r.w.ct.Len())
			}
			continue
		}
		if v[0] != Drop || c.Parse[packet.BadTCPFlags] != 1 || r.w.ct.Len() != 0 || c.CTMisses != 0 {
			t.Errorf("flags %q: verdict %v, bad-tcp-flags %d, %d conntrack entries, %d misses; want Drop, 1, 0, 0",
				tc.flags, v[0], c.Parse[packet.BadTCPFlags], r.w.ct.Len(), c.CTMisses)
		}
	}
}

// The paths this file tests allocate nothing either: a burst of new flows
// with several packets each (the re-look-up), a ping, too-big replies to a
// client, a new flow from a VIP, and a packet with impossible flags.
func TestNewPathsAllocateNothing(t *testing.T) {
	for _, k := range []sched.Kind{sched.Maglev, sched.RoundRobin} {
		r := newRig(t, withScheduler(k))
		var frames [][]byte
		for _, fl := range []string{"S", "A", "PA"} {
			for i := 0; i < 8; i++ {
				frames = append(frames, frame(t, "198.51.100.84", "203.0.113.7", uint16(100+i), 80, layers.IPProtocolTCP, fl, 0, true))
			}
		}
		newFlows := len(frames)
		frames = append(frames,
			icmpEcho(t, "198.51.100.84", "203.0.113.7"),
			frame(t, "198.51.100.84", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 1480, true),
			frame(t, "203.0.113.7", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 1480, true),
			frame(t, "198.51.100.84", "203.0.113.7", 3, 80, layers.IPProtocolTCP, "SR", 0, true))
		pkts := make([]Pkt, len(frames))
		bufs := make([][]byte, len(frames))
		for i, f := range frames {
			bufs[i] = make([]byte, headroom+len(f))
		}
		round := uint16(0)
		allocs := testing.AllocsPerRun(100, func() {
			round++
			for i, f := range frames {
				copy(bufs[i][headroom:], f)
				if i < newFlows {
					// A new client address each round: new flows again.
					bufs[i][headroom+28], bufs[i][headroom+29] = byte(round>>8), byte(round)
				}
				pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(f)}
			}
			r.now++
			r.w.Process(pkts, r.now)
		})
		if allocs != 0 {
			t.Errorf("%v: Process allocates %v times per burst", k, allocs)
		}
		if c := &r.w.c; c.CTMisses < 8*100 || c.Drops[DropMartianSource] == 0 || c.Parse[packet.BadTCPFlags] == 0 || c.EchoReplies == 0 {
			t.Errorf("%v: paths not taken: misses %d, from self %d, bad flags %d, echo %d", k, c.CTMisses, c.Drops[DropMartianSource], c.Parse[packet.BadTCPFlags], c.EchoReplies)
		}
	}
}
