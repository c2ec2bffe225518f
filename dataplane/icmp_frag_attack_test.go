package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/sched"
)

// A hostile client's ICMP, fragments, every-port and UDP VIPs, built byte
// by byte (gopacket would refuse most of them).

// raw4 is an Ethernet frame holding an IPv4 packet with the given
// flags/offset word (ff: DF 0x4000, MF 0x2000, offset in 8-byte units) and
// payload.
func raw4(src, dst string, proto uint8, id, ff uint16, payload []byte) []byte {
	f := make([]byte, 14+20+len(payload))
	copy(f[0:6], portMAC[:])
	copy(f[6:12], clientMAC)
	f[12], f[13] = 0x08, 0x00
	h := f[14:34]
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(h[4:], id)
	binary.BigEndian.PutUint16(h[6:], ff)
	h[8], h[9] = 60, proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	copy(f[34:], payload)
	return fixIPv4Checksum(f)
}

// raw6 is an Ethernet frame holding an IPv6 packet whose first next
// header is nh and whose payload (extension headers included) is rest.
func raw6(src, dst string, nh uint8, rest []byte) []byte {
	f := make([]byte, 14+40+len(rest))
	copy(f[0:6], portMAC[:])
	copy(f[6:12], clientMAC)
	f[12], f[13] = 0x86, 0xdd
	h := f[14:54]
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(rest)))
	h[6], h[7] = nh, 60
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(h[8:24], s[:])
	copy(h[24:40], d[:])
	copy(f[54:], rest)
	return f
}

func tcpSeg(sport, dport uint16, flags uint8, data int) []byte {
	b := make([]byte, 20+data)
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	b[12], b[13] = 0x50, flags
	return b
}

func udpDgram(sport, dport uint16, length uint16, data int) []byte {
	b := make([]byte, 8+data)
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], length)
	return b
}

// frag6 is an IPv6 fragment header.
func frag6(nh uint8, off uint16, more bool, id uint32) []byte {
	b := make([]byte, 8)
	b[0] = nh
	w := off &^ 7
	if more {
		w |= 1
	}
	binary.BigEndian.PutUint16(b[2:], w)
	binary.BigEndian.PutUint32(b[4:], id)
	return b
}

func cat(bs ...[]byte) []byte {
	var o []byte
	for _, b := range bs {
		o = append(o, b...)
	}
	return o
}

// icmpMsg is an ICMP/ICMPv6 message: type, code, 4 bytes of rest, body.
func icmpMsg(typ, code uint8, rest uint32, body []byte) []byte {
	b := make([]byte, 8+len(body))
	b[0], b[1] = typ, code
	binary.BigEndian.PutUint32(b[4:], rest)
	copy(b[8:], body)
	return b
}

// attackConfig is fastTestConfig plus a UDP every-port VIP beside the TCP
// one at 203.0.113.9.
var attackConfig = fastTestConfig + `
[[vip]]
name = "anyudp"
address = "203.0.113.9"
port = 0
protocol = "udp"
  [[vip.backend]]
  name = "u1"
  address = "10.0.4.1"
  [[vip.backend]]
  name = "u2"
  address = "10.0.4.2"
  [[vip.backend]]
  name = "u3"
  address = "10.0.4.3"
`

// bothPaths runs fn with the fused path allowed and with the general path
// forced.
func bothPaths(t *testing.T, toml string, fn func(t *testing.T, r *rig)) {
	for _, fused := range []bool{true, false} {
		t.Run(fmt.Sprintf("fused=%v", fused), func(t *testing.T) {
			r := newRig(t, toml)
			r.w.generalOnly = !fused
			fn(t, r)
			wantBalance(t, r)
		})
	}
}

// underPickers is bothPaths under each of two load-based schedulers.
func underPickers(t *testing.T, fn func(t *testing.T, r *rig)) {
	for _, k := range []sched.Kind{sched.RoundRobin, sched.LeastConn} {
		t.Run(k.String(), func(t *testing.T) { bothPaths(t, withScheduler(k), fn) })
	}
}

// Under a load-based scheduler every fragment of a datagram must still
// reach one backend: fragments are stateless, so each one asked the
// scheduler afresh (round-robin gave consecutive fragments to consecutive
// backends) and counted as a new flow of the chosen backend in the
// scheduler's own load. They follow the VIP's Maglev table, as untracked
// segments do.
func TestAttackFragmentsOneBackendUnderPicker(t *testing.T) {
	underPickers(t, func(t *testing.T, r *rig) {
		const n = 40
		split := 0
		for d := range n {
			src := fmt.Sprintf("198.51.100.%d", 10+d)
			first := raw4(src, "203.0.113.7", 6, uint16(d), 0x2000, cat(tcpSeg(40000, 80, packet.TCPAck, 60)))
			mid := raw4(src, "203.0.113.7", 6, uint16(d), 0x2000|10, make([]byte, 80))
			last := raw4(src, "203.0.113.7", 6, uint16(d), 20, make([]byte, 40))
			var dsts []netip.Addr
			// One burst, then each fragment in its own.
			out, v := r.run(first, mid, last)
			for i := range v {
				dsts = append(dsts, tunnelDst(t, out[i], v[i]))
			}
			for _, f := range [][]byte{first, mid, last} {
				o, vv := r.run(f)
				dsts = append(dsts, tunnelDst(t, o[0], vv[0]))
			}
			for _, x := range dsts {
				if !x.IsValid() || x != dsts[0] {
					split++
					t.Logf("datagram %d: fragments went to %v", d, dsts)
					break
				}
			}
		}
		if split > 0 {
			t.Errorf("%d of %d fragmented datagrams split over backends", split, n)
		}
		var nf uint64
		for _, b := range r.w.c.Backends {
			nf += b.NewFlows
		}
		if r.w.ct.Len() != 0 || nf != 0 || r.w.c.Fragments != 6*n {
			t.Errorf("conntrack %d entries, new flows %d, fragments %d (want 0, 0, %d)", r.w.ct.Len(), nf, r.w.c.Fragments, 6*n)
		}
		svc := r.shared.Services.Load()
		for id, be := range svc.Backends {
			if be != nil {
				if l := r.w.localLoad(uint32(id), be); l != 0 {
					t.Errorf("fragments counted in the scheduler's load: backend %s %d", be.Name, l)
				}
			}
		}
	})
}

// An ICMP error about a flow this instance does not track (ECMP moved it
// here, its entry expired) goes where that flow's segments go: under a
// load-based scheduler a segment of an unknown connection follows the
// Maglev table, so the error must too (path MTU discovery of the flow
// breaks otherwise), and it must not count in the scheduler's load.
func TestAttackICMPErrorUntrackedFlowUnderPicker(t *testing.T) {
	underPickers(t, func(t *testing.T, r *rig) {
		const n = 40
		wrong := 0
		for i := range n {
			sp := uint16(30000 + i)
			// The backend's reply (from the VIP) hit a small MTU.
			quote := raw4("203.0.113.7", "198.51.100.50", 6, 1, 0x4000, tcpSeg(80, sp, packet.TCPAck, 0))[14:]
			e := raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(3, 4, 1400, quote))
			ct0 := r.w.ct.Len()
			out, v := r.run(e)
			got := tunnelDst(t, out[0], v[0])
			if r.w.ct.Len() != ct0 {
				t.Fatalf("an ICMP error created conntrack state")
			}
			// The flow's next segment (not a SYN): the table's answer.
			out, v = r.run(raw4("198.51.100.50", "203.0.113.7", 6, 2, 0x4000, tcpSeg(sp, 80, packet.TCPAck, 10)))
			if want := tunnelDst(t, out[0], v[0]); !got.IsValid() || got != want {
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("%d of %d ICMP errors about an untracked flow reached another backend than the flow", wrong, n)
		}
		if r.w.c.ICMPErrors != n {
			t.Errorf("ICMPErrors %d, want %d", r.w.c.ICMPErrors, n)
		}
	})
}

// An echo request from a VIP's address or the LB's own is spoofed: the
// reply would go to that address (RFC 1812 4.3.2.7 for errors; the
// README: a reply never goes to a VIP or the LB). It is dropped, counted
// once, and a real client's ping is still answered.
func TestAttackEchoFromSelfNotAnswered(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		ping4 := func(src, dst string) []byte {
			return raw4(src, dst, 1, 5, 0, icmpMsg(8, 0, 0x01020003, make([]byte, 32)))
		}
		ping6 := func(src, dst string) []byte { return raw6(src, dst, 58, icmpMsg(128, 0, 0x01020003, make([]byte, 32))) }
		cases := []struct {
			f    []byte
			want Verdict
		}{
			{ping4("203.0.113.9", "203.0.113.7"), Drop},           // from another VIP
			{ping4("203.0.113.7", "203.0.113.7"), Drop},           // from itself
			{ping4(lb4, "203.0.113.7"), Drop},                     // from the LB
			{ping6("2001:db8:ffff::7", "2001:db8:ffff::7"), Drop}, // IPv6 VIP
			{ping6("2001:db8:100::10", "2001:db8:ffff::7"), Drop}, // lb_ipv6
			{ping4("198.51.100.7", "203.0.113.7"), Tx},            // a client
			{ping6("2001:db8:c::7", "2001:db8:ffff::7"), Tx},
		}
		for i, tc := range cases {
			self0, echo0 := r.w.c.Drops[DropICMPToSelf], r.w.c.EchoReplies
			out, v := r.run(tc.f)
			if v[0] != tc.want {
				t.Errorf("case %d: verdict %v, want %v (drops %v)", i, v[0], tc.want, r.w.c.Drops)
				continue
			}
			if tc.want == Drop && (r.w.c.Drops[DropICMPToSelf] != self0+1 || r.w.c.EchoReplies != echo0) {
				t.Errorf("case %d: icmp-error-to-self +%d, echo replies +%d; want +1, +0", i, r.w.c.Drops[DropICMPToSelf]-self0, r.w.c.EchoReplies-echo0)
			}
			if tc.want == Tx && (len(out[0]) != len(tc.f) || r.w.c.EchoReplies != echo0+1) {
				t.Errorf("case %d: reply of %d bytes for a %d-byte request", i, len(out[0]), len(tc.f))
			}
		}
	})
}

// Two fragment headers in one IPv6 header chain: the first says "first
// fragment, more follow", the second is an atomic fragment. The parser
// kept only the last, took the packet for a whole (atomic) one and routed
// it by its ports, with conntrack state, while the rest of its datagram
// (fragments, by the 3-tuple) went to the fragment VIP's backend: the
// backend reassembling the outer datagram never gets its first part. No
// sender puts two fragment headers in a chain (RFC 8200 §4.1): dropped.
func TestAttackIPv6TwoFragmentHeaders(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		const vip6 = "2001:db8:ffff::7"
		bad0 := r.w.c.Parse[packet.BadFragment]
		cases := [][]byte{
			// first fragment, then an atomic one, then TCP
			raw6("2001:db8:c::1", vip6, 44, cat(frag6(44, 0, true, 7), frag6(6, 0, false, 8), tcpSeg(40000, 443, packet.TCPAck, 16))),
			// atomic, then a first fragment
			raw6("2001:db8:c::1", vip6, 44, cat(frag6(44, 0, false, 7), frag6(6, 0, true, 8), tcpSeg(40000, 443, packet.TCPAck, 16))),
			// atomic, then a later fragment
			raw6("2001:db8:c::1", vip6, 44, cat(frag6(44, 0, false, 7), frag6(6, 64, false, 8), make([]byte, 24))),
			// with a destination options header between them
			raw6("2001:db8:c::1", vip6, 44, cat(frag6(60, 0, true, 7), []byte{44, 0, 1, 4, 0, 0, 0, 0}, frag6(6, 0, false, 8), tcpSeg(40000, 443, packet.TCPAck, 16))),
		}
		for i, f := range cases {
			_, v := r.run(f)
			if v[0] != Drop {
				t.Errorf("case %d: verdict %v, want a drop", i, v[0])
			}
		}
		if got := r.w.c.Parse[packet.BadFragment] - bad0; got != uint64(len(cases)) {
			t.Errorf("bad-fragment %d, want %d (parse %v drops %v)", got, len(cases), r.w.c.Parse, r.w.c.Drops)
		}
		if r.w.ct.Len() != 0 {
			t.Errorf("conntrack holds %d entries", r.w.ct.Len())
		}
		// One fragment header, and an atomic fragment: still taken.
		good := [][]byte{
			raw6("2001:db8:c::1", vip6, 44, cat(frag6(6, 0, true, 7), tcpSeg(40000, 443, packet.TCPAck, 16))),
			raw6("2001:db8:c::1", vip6, 44, cat(frag6(6, 64, false, 7), make([]byte, 24))),
			raw6("2001:db8:c::1", vip6, 44, cat(frag6(6, 0, false, 9), tcpSeg(40001, 443, packet.TCPSyn, 0))),
			raw6("2001:db8:c::1", vip6, 60, cat([]byte{44, 0, 1, 4, 0, 0, 0, 0}, frag6(6, 0, true, 10), tcpSeg(40000, 443, packet.TCPAck, 16))),
		}
		out, v := r.run(good...)
		for i := range good {
			if !tunnelDst(t, out[i], v[i]).IsValid() {
				t.Errorf("good case %d: verdict %v (parse %v drops %v)", i, v[i], r.w.c.Parse, r.w.c.Drops)
			}
		}
		if d0, d1, d3 := tunnelDst(t, out[0], v[0]), tunnelDst(t, out[1], v[1]), tunnelDst(t, out[3], v[3]); d0 != d1 || d0 != d3 {
			t.Errorf("fragments of one source went to %v, %v, %v", d0, d1, d3)
		}
	})
}

// ICMP errors a hostile client can forge: each is forwarded to the owner
// of the flow it quotes or dropped under one reason, never creates or
// refreshes conntrack state, and never panics.
func TestAttackForgedICMPErrors(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		const client = "198.51.100.60"
		// A tracked connection.
		out, v := r.run(raw4(client, "203.0.113.7", 6, 1, 0x4000, tcpSeg(41000, 80, packet.TCPSyn, 0)))
		owner := tunnelDst(t, out[0], v[0])
		r.run(raw4(client, "203.0.113.7", 6, 1, 0x4000, tcpSeg(41000, 80, packet.TCPAck, 0)))
		ct0 := r.w.ct.Len()
		err4 := func(typ, code uint8, quote []byte) []byte {
			return raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(typ, code, 1400, quote))
		}
		q := func(src, dst string, proto uint8, ff uint16, l4 []byte) []byte {
			return raw4(src, dst, proto, 3, ff, l4)[14:]
		}
		cases := []struct {
			name string
			f    []byte
			want string // "owner", or the drop counter expected to move
		}{
			{"frag-needed, tracked flow", err4(3, 4, q("203.0.113.7", client, 6, 0x4000, tcpSeg(80, 41000, packet.TCPAck, 0))), "owner"},
			{"unreachable, 8 bytes of TCP", err4(3, 1, q("203.0.113.7", client, 6, 0x4000, tcpSeg(80, 41000, packet.TCPAck, 0))[:28]), "owner"},
			{"quote of 3 bytes of TCP", err4(3, 4, q("203.0.113.7", client, 6, 0x4000, tcpSeg(80, 41000, packet.TCPAck, 0))[:23]), "bad-icmp-quote"},
			{"quote without IP header", err4(3, 4, []byte{0x45, 0, 0}), "bad-icmp-quote"},
			{"quote IHL 15 beyond it", err4(3, 4, append([]byte{0x4f}, make([]byte, 30)...)), "bad-icmp-quote"},
			{"quote of IPv6 in IPv4", err4(3, 4, make([]byte, 48)), "bad-icmp-quote"},
			{"quote from another VIP", err4(3, 4, q("203.0.113.9", client, 6, 0x4000, tcpSeg(80, 41000, packet.TCPAck, 0))), "icmp-error-not-ours"},
			{"quote of client to VIP", err4(3, 4, q(client, "203.0.113.7", 6, 0x4000, tcpSeg(41000, 80, packet.TCPAck, 0))), "icmp-error-not-ours"},
			{"nested ICMP error", err4(3, 4, q("203.0.113.7", client, 1, 0, icmpMsg(3, 4, 0, make([]byte, 28)))), "no-service"},
			{"quoted fragment, no every-port VIP", err4(3, 4, q("203.0.113.7", client, 6, 0x2000|3, make([]byte, 8))), "no-service"},
			{"echo reply to a VIP", err4(0, 0, nil), "vip-icmp-not-error"},
			{"fragmented ICMP error", raw4("192.0.2.99", "203.0.113.7", 1, 9, 0x2000, icmpMsg(3, 4, 0, q("203.0.113.7", client, 6, 0, tcpSeg(80, 41000, packet.TCPAck, 0)))), "no-service"},
			{"redirect", err4(5, 1, q("203.0.113.7", client, 6, 0x4000, tcpSeg(80, 41000, packet.TCPAck, 0))), "owner"},
		}
		for _, tc := range cases {
			before := r.w.c
			before.Drops = r.w.c.Drops
			parse0 := r.w.c.Parse
			out, v := r.run(tc.f)
			switch tc.want {
			case "owner":
				if d := tunnelDst(t, out[0], v[0]); d != owner {
					t.Errorf("%s: went to %v (verdict %v), want the owner %v", tc.name, d, v[0], owner)
				}
			case "bad-icmp-quote":
				if v[0] != Drop || r.w.c.Parse[packet.BadICMPQuote] != parse0[packet.BadICMPQuote]+1 {
					t.Errorf("%s: verdict %v, parse %v", tc.name, v[0], r.w.c.Parse)
				}
			default:
				var got uint64
				for dr, n := range r.w.c.Drops {
					if DropReason(dr).String() == tc.want {
						got = n - before.Drops[dr]
					}
				}
				if v[0] != Drop || got != 1 {
					t.Errorf("%s: verdict %v, %s +%d (drops %v)", tc.name, v[0], tc.want, got, r.w.c.Drops)
				}
			}
		}
		if r.w.ct.Len() != ct0 {
			t.Errorf("ICMP errors changed conntrack: %d entries, was %d", r.w.ct.Len(), ct0)
		}
	})
}

// ICMPv6 errors with extension headers in front of them, and quotes with
// extension headers (a fragment header among them), reach the flow's
// owner or the every-port logic; a quote whose chain is cut is refused.
func TestAttackICMPv6ErrorsWithExtensionHeaders(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		const vip6, client = "2001:db8:ffff::7", "2001:db8:c::60"
		out, v := r.run(raw6(client, vip6, 6, tcpSeg(42000, 443, packet.TCPSyn, 0)))
		owner := tunnelDst(t, out[0], v[0])
		if !owner.IsValid() {
			t.Fatalf("SYN verdict %v", v[0])
		}
		quote := raw6(vip6, client, 6, tcpSeg(443, 42000, packet.TCPAck, 1300))[14:]
		hbh := []byte{58, 0, 1, 4, 0, 0, 0, 0}
		ptb := icmpMsg(2, 0, 1280, quote[:1200])
		// Hop-by-hop in front of the error.
		out, v = r.run(raw6("2001:db8:99::1", vip6, 0, cat(hbh, ptb)))
		if d := tunnelDst(t, out[0], v[0]); d != owner {
			t.Errorf("too-big behind hop-by-hop went to %v (verdict %v), want %v", d, v[0], owner)
		}
		// The quote has a destination options header.
		qd := raw6(vip6, client, 60, cat([]byte{6, 0, 1, 4, 0, 0, 0, 0}, tcpSeg(443, 42000, packet.TCPAck, 0)))[14:]
		out, v = r.run(raw6("2001:db8:99::1", vip6, 58, icmpMsg(1, 4, 0, qd)))
		if d := tunnelDst(t, out[0], v[0]); d != owner {
			t.Errorf("unreachable quoting dest-opts went to %v (verdict %v), want %v", d, v[0], owner)
		}
		// The quote's chain is cut: 9 headers, or one cut short.
		var long []byte
		for range 9 {
			long = append(long, 60, 0, 1, 4, 0, 0, 0, 0)
		}
		long[len(long)-8] = 6
		long = append(long, tcpSeg(443, 42000, packet.TCPAck, 0)...)
		ql := raw6(vip6, client, 60, long)[14:]
		qc := raw6(vip6, client, 60, []byte{6, 4, 0, 0, 0, 0, 0, 0})[14:]
		p0 := r.w.c.Parse[packet.BadICMPQuote]
		_, v1 := r.run(raw6("2001:db8:99::1", vip6, 58, icmpMsg(1, 4, 0, ql)), raw6("2001:db8:99::1", vip6, 58, icmpMsg(1, 4, 0, qc)))
		if v1[0] != Drop || v1[1] != Drop || r.w.c.Parse[packet.BadICMPQuote] != p0+2 {
			t.Errorf("cut quotes: verdicts %v, bad-icmp-quote +%d", v1, r.w.c.Parse[packet.BadICMPQuote]-p0)
		}
		if r.w.ct.Len() != 1 {
			t.Errorf("conntrack %d entries, want 1", r.w.ct.Len())
		}
	})
}

// The LB's own replies are no amplifier: a too-big reply is smaller than
// the packet it answers, comes from the VIP, goes to the client, never to
// an address of the LB's, and is rate-limited; an echo reply is exactly
// as big as its request and rate-limited separately.
func TestAttackRepliesNoAmplifier(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		// Four bursts of 30, 10 ms apart: the budget's 50, then 10 a
		// burst (1000/s).
		var sent, replied int
		for b := range 4 {
			var fs [][]byte
			for i := range 30 {
				sp := uint16(43000 + 30*b + i)
				f := raw4("198.51.100.70", "203.0.113.7", 6, 1, 0x4000, tcpSeg(sp, 80, packet.TCPAck, 1480))
				if i%2 == 1 {
					f = raw6("2001:db8:c::70", "2001:db8:ffff::7", 6, tcpSeg(sp, 443, packet.TCPAck, 1480))
				}
				fs = append(fs, f)
			}
			out, v := r.run(fs...)
			for i := range fs {
				sent++
				if v[i] != Tx {
					continue
				}
				replied++
				if len(out[i]) >= len(fs[i]) || len(out[i]) > 14+1280 {
					t.Errorf("reply of %d bytes for %d", len(out[i]), len(fs[i]))
				}
				if tunnelDst(t, out[i], v[i]).IsValid() {
					t.Errorf("a too-big packet was tunnelled")
				}
			}
		}
		if replied != ICMPBurst+30 || r.w.c.Drops[DropICMPRateLimited] != uint64(sent-replied) {
			t.Errorf("replied %d of %d (rate-limited %d), want %d", replied, sent, r.w.c.Drops[DropICMPRateLimited], ICMPBurst+30)
		}
		// From the LB's own address or another VIP: never answered, and
		// no token spent.
		r.now += 10000
		self0 := r.w.c.Drops[DropICMPToSelf]
		_, v := r.run(raw4(lb4, "203.0.113.7", 6, 1, 0x4000, tcpSeg(1, 80, packet.TCPSyn, 1480)),
			raw4("203.0.113.9", "203.0.113.7", 6, 1, 0x4000, tcpSeg(1, 80, packet.TCPSyn, 1480)))
		if v[0] != Drop || v[1] != Drop || r.w.c.Drops[DropICMPToSelf]+r.w.c.Drops[DropMartianSource] < self0+2 {
			t.Errorf("too-big from self: verdicts %v drops %v", v, r.w.c.Drops)
		}
		// Echo: same size, own budget.
		// Echo: 32, 32, 16 requests 10 ms apart: 32, 28, 10 replies.
		echo0, lim0 := r.w.c.EchoReplies, r.w.c.Drops[DropEchoRateLimited]
		for _, n := range []int{32, 32, 16} {
			fs := make([][]byte, n)
			for i := range fs {
				fs[i] = raw4("198.51.100.71", "203.0.113.9", 1, 1, 0, icmpMsg(8, 0, 7, make([]byte, 1000)))
			}
			out, v := r.run(fs...)
			for i := range fs {
				if v[i] == Tx && len(out[i]) != len(fs[i]) {
					t.Errorf("echo reply %d bytes for %d", len(out[i]), len(fs[i]))
				}
			}
		}
		if got, lim := r.w.c.EchoReplies-echo0, r.w.c.Drops[DropEchoRateLimited]-lim0; got != 70 || lim != 10 {
			t.Errorf("echo replies %d, rate-limited %d; want 70, 10", got, lim)
		}
		if r.w.c.Encap[encap.ICMPReply] != ICMPBurst+30 {
			t.Errorf("icmp replies %d", r.w.c.Encap[encap.ICMPReply])
		}
	})
}

// Fragments of every kind a client can forge: each one goes to the
// fragment VIP's backend of its 3-tuple (the every-port VIP of its address
// and protocol) or is dropped under one reason; none creates state.
func TestAttackFragmentShapes(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		const any = "203.0.113.9"
		src := "198.51.100.80"
		cases := []struct {
			name string
			f    []byte
			ok   bool
		}{
			{"first UDP, full header", raw4(src, any, 17, 5, 0x2000, udpDgram(1, 2, 500, 40)), true},
			{"first UDP, length below 8", raw4(src, any, 17, 5, 0x2000, udpDgram(1, 2, 3, 40)), false},
			{"first TCP, 8 bytes", raw4(src, any, 6, 5, 0x2000, make([]byte, 8)), false},
			{"TCP at offset 8", raw4(src, any, 6, 5, 0x2000|1, make([]byte, 16)), false},
			{"TCP at offset 16", raw4(src, any, 6, 5, 0x2000|2, make([]byte, 16)), true},
			{"last UDP", raw4(src, any, 17, 5, 7, make([]byte, 8)), true},
			{"empty fragment", raw4(src, any, 17, 5, 0x2000|7, nil), true},
			{"offset at the top", raw4(src, any, 17, 5, 0x1fff, make([]byte, 8)), true},
			{"DF and MF", raw4(src, any, 17, 5, 0x6000, udpDgram(1, 2, 9, 40)), true},
			{"first fragment, another protocol", raw4(src, any, 47, 5, 0x2000, make([]byte, 40)), false},
			{"to the port-80 VIP's address", raw4(src, "203.0.113.7", 17, 5, 0x2000|3, make([]byte, 8)), true},
			{"IPv6 first, cut TCP", raw6("2001:db8:c::1", "2001:db8:ffff::7", 44, cat(frag6(6, 0, true, 1), make([]byte, 10))), false},
			{"IPv6 later, offset 8", raw6("2001:db8:c::1", "2001:db8:ffff::7", 44, cat(frag6(6, 8, true, 1), make([]byte, 16))), false}, // RFC 1858, as IPv4
			{"IPv6 later, offset 16", raw6("2001:db8:c::1", "2001:db8:ffff::7", 44, cat(frag6(6, 16, true, 1), make([]byte, 16))), true},
			{"IPv6 fragment of ICMPv6", raw6("2001:db8:c::1", "2001:db8:ffff::7", 44, cat(frag6(58, 0, true, 1), icmpMsg(128, 0, 0, make([]byte, 16)))), false},
		}
		for _, tc := range cases {
			out, v := r.run(tc.f)
			if got := tunnelDst(t, out[0], v[0]).IsValid(); got != tc.ok {
				t.Errorf("%s: forwarded %v, want %v (verdict %v, parse %v, drops %v)", tc.name, got, tc.ok, v[0], r.w.c.Parse, r.w.c.Drops)
			}
		}
		if r.w.ct.Len() != 0 {
			t.Errorf("fragments left %d conntrack entries", r.w.ct.Len())
		}
		// All fragments of one datagram to the every-port VIP, in one
		// burst and one by one, reach one backend.
		for d := range 30 {
			s := fmt.Sprintf("198.51.100.%d", 100+d)
			fs := [][]byte{
				raw4(s, any, 17, uint16(d), 0x2000, udpDgram(uint16(1000+d), 53, 200, 72)),
				raw4(s, any, 17, uint16(d), 0x2000|10, make([]byte, 80)),
				raw4(s, any, 17, uint16(d), 20, make([]byte, 40)),
			}
			out, v := r.run(fs...)
			d0 := tunnelDst(t, out[0], v[0])
			for i := range fs {
				o, vv := r.run(fs[i])
				if tunnelDst(t, out[i], v[i]) != d0 || tunnelDst(t, o[0], vv[0]) != d0 || !d0.IsValid() {
					t.Errorf("datagram %d fragment %d went elsewhere", d, i)
				}
			}
		}
	})
}

// Every-port and UDP VIPs: zero ports, a zero source port, and a UDP
// length that lies about the payload.
func TestAttackZeroPortsAndUDPLength(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		cases := []struct {
			name string
			f    []byte
			ok   bool
		}{
			{"every-port, both ports 0", raw4("198.51.100.90", "203.0.113.9", 6, 1, 0x4000, tcpSeg(0, 0, packet.TCPSyn, 0)), true},
			{"every-port UDP, ports 0", raw4("198.51.100.90", "203.0.113.9", 17, 1, 0, udpDgram(0, 0, 8, 0)), true},
			{"port-80 VIP, destination port 0", raw4("198.51.100.90", "203.0.113.7", 6, 1, 0x4000, tcpSeg(1, 0, packet.TCPSyn, 0)), false},
			{"UDP VIP, source port 0", raw4("198.51.100.90", "203.0.113.7", 17, 1, 0, udpDgram(0, 53, 20, 12)), true},
			{"UDP length beyond the payload", raw4("198.51.100.90", "203.0.113.7", 17, 1, 0, udpDgram(5, 53, 200, 12)), false},
			{"UDP length below 8", raw4("198.51.100.90", "203.0.113.7", 17, 1, 0, udpDgram(5, 53, 4, 12)), false},
			{"UDP length short of the payload", raw4("198.51.100.90", "203.0.113.7", 17, 1, 0, udpDgram(6, 53, 8, 500)), true},
			{"UDP header cut", raw4("198.51.100.90", "203.0.113.7", 17, 1, 0, make([]byte, 7)), false},
			{"IPv6 UDP length 0 (jumbogram)", raw6("2001:db8:c::1", "2001:db8:ffff::7", 17, udpDgram(5, 443, 0, 12)), false},
		}
		for _, tc := range cases {
			out, v := r.run(tc.f)
			if got := tunnelDst(t, out[0], v[0]).IsValid(); got != tc.ok {
				t.Errorf("%s: forwarded %v, want %v (verdict %v, parse %v, drops %v)", tc.name, got, tc.ok, v[0], r.w.c.Parse, r.w.c.Drops)
			}
		}
	})
}

// The same attack traffic through the fused and the general path gives the
// same bytes, verdicts and counters.
func TestAttackICMPFragTwin(t *testing.T) {
	tw := newTwin(t, attackConfig)
	var frames [][]byte
	for i := range 12 {
		sp := uint16(44000 + i)
		frames = append(frames,
			raw4("198.51.100.3", "203.0.113.7", 6, 1, 0x4000, tcpSeg(sp, 80, packet.TCPSyn, 0)),
			raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(3, 4, 1400, raw4("203.0.113.7", "198.51.100.3", 6, 1, 0, tcpSeg(80, sp, packet.TCPAck, 0))[14:])),
			raw4("198.51.100.3", "203.0.113.7", 6, 1, 0x4000, tcpSeg(sp, 80, packet.TCPAck, 0)),
			raw4("198.51.100.3", "203.0.113.9", 17, uint16(i), 0x2000, udpDgram(sp, 9, 100, 50)),
			raw4("198.51.100.3", "203.0.113.9", 17, uint16(i), 8, make([]byte, 42)),
			raw4("198.51.100.3", "203.0.113.7", 1, 1, 0, icmpMsg(8, 0, 1, make([]byte, 8))),
			raw4("203.0.113.9", "203.0.113.7", 1, 1, 0, icmpMsg(8, 0, 1, make([]byte, 8))),
		)
	}
	for len(frames) > 0 {
		n := min(MaxBurst, len(frames))
		tw.burst("attack", frames[:n])
		frames = frames[n:]
	}
	tw.same("attack")
}
