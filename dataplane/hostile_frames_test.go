package dataplane

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/punt"
)

// a first fragment's transport ports are never checked against
// the VIP's served port. A datagram to an unserved port of a VIP address
// (TCP 22, UDP 11211), sent in two fragments, reaches a backend, where the
// unfragmented packet is dropped as no-service.
func TestFirstFragmentToUnservedPortDropped(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		const cli, vip = "198.51.100.77", "203.0.113.7" // web:80/tcp and dns:53/udp only
		// Unfragmented: dropped.
		for _, f := range [][]byte{
			raw4(cli, vip, 6, 1, 0x4000, tcpSeg(40000, 22, packet.TCPSyn, 0)),
			raw4(cli, vip, 17, 1, 0, udpDgram(40000, 11211, 8+40, 40)),
		} {
			out, v := r.run(f)
			if d := tunnelDst(t, out[0], v[0]); d.IsValid() {
				t.Fatalf("unfragmented packet to an unserved port forwarded to %v", d)
			}
		}
		// The same SYN to port 22 in two fragments: first (TCP header and 4
		// bytes, MF) and last (offset 3, 8 bytes).
		syn := tcpSeg(40001, 22, packet.TCPSyn, 12)
		first := raw4(cli, vip, 6, 77, 0x2000, syn[:24])
		last := raw4(cli, vip, 6, 77, 3, syn[24:])
		out, v := r.run(first, last)
		d0, d1 := tunnelDst(t, out[0], v[0]), tunnelDst(t, out[1], v[1])
		// A memcached request (UDP 11211) in two fragments.
		dg := udpDgram(40002, 11211, 8+40, 40)
		uf := raw4(cli, vip, 17, 78, 0x2000, dg[:24])
		ul := raw4(cli, vip, 17, 78, 3, dg[24:])
		out2, v2 := r.run(uf, ul)
		u0, u1 := tunnelDst(t, out2[0], v2[0]), tunnelDst(t, out2[1], v2[1])
		// IPv6: a SYN to port 22 of the 443 VIP in two fragments.
		syn6 := tcpSeg(40003, 22, packet.TCPSyn, 12)
		f6a := raw6("2001:db8:c::77", "2001:db8:ffff::7", 44, cat(frag6(6, 0, true, 99), syn6[:24]))
		f6b := raw6("2001:db8:c::77", "2001:db8:ffff::7", 44, cat(frag6(6, 24, false, 99), syn6[24:]))
		out3, v3 := r.run(f6a, f6b)
		s0, s1 := tunnelDst(t, out3[0], v3[0]), tunnelDst(t, out3[1], v3[1])
		t.Logf("TCP/22 v4 fragments -> %v %v; UDP/11211 v4 fragments -> %v %v; TCP/22 v6 fragments -> %v %v", d0, d1, u0, u1, s0, s1)
		if d0.IsValid() || u0.IsValid() || s0.IsValid() {
			t.Errorf("a first fragment to an unserved port of a VIP address was forwarded (tcp/22 v4 %v, udp/11211 v4 %v, tcp/22 v6 %v); unfragmented it is no-service", d0, u0, s0)
		}
	})
}

// an echo request and a too-big packet to a VIP in a frame whose
// Ethernet source is a group (broadcast/multicast) address, which no
// station sends from (IEEE 802: the I/G bit of a source is 0). The LB's
// echo reply and its too-big reply go back to that address: one unicast
// frame in, one broadcast frame out to every host of the segment.
func TestNoReplyToGroupSourceMAC(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		bcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		echo := raw4("198.51.100.78", "203.0.113.7", 1, 5, 0, icmpMsg(8, 0, 0x00010001, make([]byte, 32)))
		copy(echo[6:12], bcast)
		fixICMPSum4(echo)
		big := raw4("198.51.100.79", "203.0.113.7", 6, 5, 0x4000, tcpSeg(40010, 80, packet.TCPAck, 1500-40))
		copy(big[6:12], bcast)
		out, v := r.run(echo, big)
		for i, name := range []string{"echo reply", "too-big reply"} {
			if v[i] != Tx {
				t.Logf("%s: verdict %v", name, v[i])
				continue
			}
			if out[i][0]&1 != 0 {
				t.Errorf("%s sent to group MAC % x (trigger's source MAC); want the frame dropped", name, out[i][0:6])
			}
		}
	})
}

func fixICMPSum4(f []byte) {
	m := f[34:]
	m[2], m[3] = 0, 0
	var s uint32
	for i := 0; i+1 < len(m); i += 2 {
		s += uint32(m[i])<<8 | uint32(m[i+1])
	}
	if len(m)%2 == 1 {
		s += uint32(m[len(m)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	c := ^uint16(s)
	m[2], m[3] = byte(c>>8), byte(c)
}

// frames to another station's unicast MAC (the wire port is
// promiscuous; a switch floods unknown unicast) are punted when they are
// not VIP traffic: an ARP reply between two other hosts, a BGP segment
// from the neighbour to the LB's IP but another MAC, a non-IP frame. The
// tap carries the port's MAC, so the kernel drops each as PACKET_OTHERHOST
// after the write; meanwhile each spends its class's budget, so flooded
// unicast ARP between other hosts starves the LB's own ARP/ND.
func TestFramesForOtherMACsNotPunted(t *testing.T) {
	r := newRig(t, testConfig)
	r.shared.Services.Load().SetPunt(punt.Config{}, []netip.Addr{netip.MustParseAddr(peer4)})
	other := [6]byte{0x02, 0, 0, 0, 0, 0x99}
	arp, _, bgp, _, _ := puntFrames(t)
	a := arp(1)
	copy(a[0:6], other[:]) // a unicast ARP frame for another host
	a[21] = 2              // reply
	copy(a[38:42], []byte{192, 0, 2, 77})
	b := bgp(1)
	copy(b[0:6], other[:])
	nonIP := append(append(append([]byte{}, other[:]...), clientMAC...), 0x88, 0xb5)
	nonIP = append(nonIP, make([]byte, 46)...)
	_, v := r.run(a, b, nonIP)
	for i, name := range []string{"unicast ARP reply to another MAC", "BGP segment to another MAC", "experimental EtherType to another MAC"} {
		if v[i] == Punt {
			t.Errorf("%s: punted; the kernel drops it (PACKET_OTHERHOST); want a counted drop", name)
		}
	}
	// The budget: a burst of such ARP frames leaves the LB's own ARP
	// request (to its address, broadcast) rate-limited.
	r.now += 100000
	for range 20 {
		fs := make([][]byte, 32)
		for i := range fs {
			fs[i] = a
		}
		r.runAt(fs...)
	}
	if v := r.runAt(arp(2)); v[0] != Punt {
		t.Errorf("after flooded unicast ARP between other hosts, an ARP request for the LB: %v (neighbour limited %d)", v[0], r.w.c.PuntLimited[punt.Neighbour])
	}
	wantBalance(t, r)
}
