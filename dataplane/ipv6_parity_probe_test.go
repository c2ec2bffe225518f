package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/sched"
)

// IPv6 parity probe: the IPv4 attack tests' twins for IPv6 clients and
// VIPs, and for IPv6 backends (outer IPv6) of IPv4 VIPs, on both paths.

type p6Target struct {
	name, client, vip string
	port              uint16
	vipName, drain    string
	destOpts          bool // every segment behind a destination options header (general path only)
}

func p6Targets() []p6Target {
	return []p6Target{
		{"v6vip-drain-v6outer", "2001:db8:c::90", "2001:db8:ffff::7", 443, "web6", "six1", false},
		{"v6vip-drain-v4outer", "2001:db8:c::91", "2001:db8:ffff::7", 443, "web6", "six2", false},
		{"v6vip-destopts", "2001:db8:c::92", "2001:db8:ffff::7", 443, "web6", "six1", true},
		{"v4vip-drain-v6outer", "198.51.100.96", "203.0.113.7", 80, "web", "be3", false},
	}
}

// withDestOpts6 puts an 8-byte destination options header (PadN) between
// the IPv6 header and its transport header.
func withDestOpts6(f []byte) []byte {
	nh := f[20]
	g := cat(f[:54], []byte{nh, 0, 1, 4, 0, 0, 0, 0}, f[54:])
	g[20] = 60
	binary.BigEndian.PutUint16(g[18:], uint16(len(g)-54))
	return g
}

func (tg p6Target) seg(t *testing.T) func(sp uint16, flags string, payload int) []byte {
	return func(sp uint16, flags string, payload int) []byte {
		f := frame(t, tg.client, tg.vip, sp, tg.port, layers.IPProtocolTCP, flags, payload, true)
		if tg.destOpts {
			f = withDestOpts6(f)
		}
		return f
	}
}

// TestIPv6ParitySpoofedSegments: the spoof_test.go attacks (spoofed SYN,
// forged RST then SYN, two forged SYNs, forged FIN undone by data) against
// connections to the IPv6 VIP and against connections of the IPv4 VIP on
// its IPv6 backend, after a drain of the backend holding them, under every
// scheduler, on both paths.
func TestIPv6ParitySpoofedSegments(t *testing.T) {
	for _, tg := range p6Targets() {
		for _, k := range sched.Kinds() {
			for _, fused := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%v/fused=%v", tg.name, k, fused), func(t *testing.T) {
					r := newRig(t, withScheduler(k))
					r.w.generalOnly = !fused
					const n = 40
					seg := tg.seg(t)
					bases := []uint16{30000, 31000, 32000, 33000}
					owners := make([][]netip.Addr, len(bases))
					drained := backendAddr(r, tg.vipName, tg.drain)
					on := 0
					for b, base := range bases {
						owners[b] = handshakes(t, r, seg, base, n)
						for _, o := range owners[b] {
							if !o.IsValid() {
								t.Fatalf("a handshake SYN was not forwarded")
							}
							if o == drained {
								on++
							}
						}
					}
					if on == 0 {
						t.Fatalf("no connection on %s: the drain shows nothing", tg.drain)
					}
					r.publish(Overrides{{tg.vipName, tg.drain}: {Weight: 0}})
					moved := [4]int{}
					kept0 := r.w.c.SYNKept
					for i := range n {
						// 1: spoofed SYN alone and beside the victim's data.
						sp := bases[0] + uint16(i)
						o1, v1 := r.run(seg(sp, "S", 0), seg(sp, "PA", 100))
						o2, v2 := r.run(seg(sp, "PA", 100))
						if tunnelDst(t, o1[0], v1[0]) != owners[0][i] || tunnelDst(t, o1[1], v1[1]) != owners[0][i] || tunnelDst(t, o2[0], v2[0]) != owners[0][i] {
							moved[0]++
						}
						// 2: forged RST, then SYN, then the client.
						sp = bases[1] + uint16(i)
						r.run(seg(sp, "R", 0))
						o1, v1 = r.run(seg(sp, "S", 0), seg(sp, "PA", 100))
						if tunnelDst(t, o1[0], v1[0]) != owners[1][i] || tunnelDst(t, o1[1], v1[1]) != owners[1][i] {
							moved[1]++
						}
						// 3: two forged SYNs, one burst or two.
						sp = bases[2] + uint16(i)
						var outs [][]byte
						var vs []Verdict
						if i%2 == 0 {
							a, av := r.run(seg(sp, "S", 0))
							b, bv := r.run(seg(sp, "S", 0))
							outs, vs = append(a, b...), append(av, bv...)
						} else {
							outs, vs = r.run(seg(sp, "S", 0), seg(sp, "S", 0))
						}
						c, cv := r.run(seg(sp, "PA", 100))
						outs, vs = append(outs, c...), append(vs, cv...)
						for j := range outs {
							if tunnelDst(t, outs[j], vs[j]) != owners[2][i] {
								moved[2]++
								break
							}
						}
						// 4: forged FIN, the client's data, a forged SYN.
						sp = bases[3] + uint16(i)
						r.run(seg(sp, "FA", 0))
						o1, v1 = r.run(seg(sp, "PA", 100))
						o2, v2 = r.run(seg(sp, "S", 0), seg(sp, "PA", 100))
						if tunnelDst(t, o1[0], v1[0]) != owners[3][i] || tunnelDst(t, o2[0], v2[0]) != owners[3][i] || tunnelDst(t, o2[1], v2[1]) != owners[3][i] {
							moved[3]++
						}
					}
					if moved != [4]int{} {
						t.Errorf("moved (SYN, RST+SYN, 2xSYN, FIN+data+SYN) %v of %d each", moved, n)
					}
					if got := r.w.c.SYNKept - kept0; got != 5*n {
						t.Errorf("SYNKept %d, want %d", got, 5*n)
					}
					for b, base := range bases {
						if est := entriesIn(r, base, n, conntrack.StateEstablished); est != n {
							t.Errorf("attack %d: %d of %d entries established", b+1, est, n)
						}
					}
					if r.w.c.Moved != 0 {
						t.Errorf("Moved %d", r.w.c.Moved)
					}
					wantBalance(t, r)
				})
			}
		}
	}
}

// TestIPv6ParitySYNToUnhealthy: TestSYNDoesNotFollowAPinToAnUnhealthyBackend
// for the IPv6 VIP's IPv6 backend and the IPv4 VIP's IPv6 backend.
func TestIPv6ParitySYNToUnhealthy(t *testing.T) {
	for _, tg := range []p6Target{p6Targets()[0], p6Targets()[3]} {
		for _, fused := range []bool{true, false} {
			r := newRig(t, testConfig)
			r.w.generalOnly = !fused
			bad := backendAddr(r, tg.vipName, tg.drain)
			seg := tg.seg(t)
			var on []uint16
			for sp := uint16(22000); len(on) < 4 && sp < 23000; sp++ {
				out, v := r.run(seg(sp, "S", 0))
				r.run(seg(sp, "A", 0))
				if tunnelDst(t, out[0], v[0]) == bad {
					on = append(on, sp)
				}
			}
			if len(on) < 4 {
				t.Fatal("too few flows")
			}
			r.publish(Overrides{{tg.vipName, tg.drain}: {Weight: 0, Unhealthy: true}})
			kept0 := r.w.c.SYNKept
			out, v := r.run(seg(on[0], "PA", 10), seg(on[1], "PA", 10))
			if tunnelDst(t, out[0], v[0]) != bad || tunnelDst(t, out[1], v[1]) != bad {
				t.Errorf("%s fused %v: an established flow left %s", tg.name, fused, tg.drain)
			}
			out, v = r.run(seg(on[2], "S", 0), seg(on[3], "S", 0))
			for i := range 2 {
				if d := tunnelDst(t, out[i], v[i]); d == bad || !d.IsValid() {
					t.Errorf("%s fused %v: SYN on a flow pinned to the unhealthy backend went to %v", tg.name, fused, d)
				}
			}
			if r.w.c.SYNKept != kept0 {
				t.Errorf("%s fused %v: SYNKept +%d", tg.name, fused, r.w.c.SYNKept-kept0)
			}
			wantBalance(t, r)
		}
	}
}

// TestIPv6ParityMartians: each IPv6 source gets the decision its IPv4 twin
// gets (both drop or both forward), for a SYN and an ACK, on both paths.
func TestIPv6ParityMartians(t *testing.T) {
	pairs := []struct{ what, v4, v6 string }{
		{"unspecified", "0.0.0.0", "::"},
		{"loopback", "127.0.0.1", "::1"},
		{"multicast link", "224.0.0.1", "ff02::1"},
		{"multicast global", "239.1.2.3", "ff0e::1"},
		{"link-local", "169.254.1.1", "fe80::1"},
		{"private / ULA", "10.9.9.9", "fd00::1"},
		{"the VIP", "203.0.113.7", "2001:db8:ffff::7"},
		{"the LB", lb4, "2001:db8:100::10"},
		{"a backend", "10.0.1.1", "2001:db8:1::1"},
		{"a client", "198.51.100.1", "2001:db8:aaaa::1"},
	}
	for _, fused := range []bool{true, false} {
		r := newRig(t, testConfig)
		r.w.generalOnly = !fused
		decide := func(src, dst string, port uint16, flags string) (bool, uint64) {
			m0 := r.w.c.Drops[DropMartianSource]
			out, v := r.run(frame(t, src, dst, 4000, port, layers.IPProtocolTCP, flags, 0, true))
			return tunnelDst(t, out[0], v[0]).IsValid(), r.w.c.Drops[DropMartianSource] - m0
		}
		for _, p := range pairs {
			for _, fl := range []string{"S", "A"} {
				f4, m4 := decide(p.v4, "203.0.113.7", 80, fl)
				f6, m6 := decide(p.v6, "2001:db8:ffff::7", 443, fl)
				if f4 != f6 || m4 != m6 {
					t.Errorf("fused %v %s %q: IPv4 %s forwarded %v (martian +%d), IPv6 %s forwarded %v (martian +%d)", fused, p.what, fl, p.v4, f4, m4, p.v6, f6, m6)
				}
			}
		}
		wantBalance(t, r)
	}
}

// TestIPv6ParityHopLimit: IPv4 TTL 0 and 1 are forwarded (ttl-0 in the
// hostile probe); hop limits 0 and 1 the same, byte for byte inside the
// tunnel, on both paths.
func TestIPv6ParityHopLimit(t *testing.T) {
	tw := newTwin(t, fastTestConfig)
	r := newRig(t, fastTestConfig)
	for _, hl := range []byte{0, 1, 255} {
		f6 := frame(t, "2001:db8:c::33", "2001:db8:ffff::7", 5000+uint16(hl), 443, layers.IPProtocolTCP, "S", 0, true)
		f6[21] = hl
		f4 := fixIPv4Checksum(func() []byte {
			f := frame(t, "198.51.100.33", "203.0.113.7", 5000+uint16(hl), 80, layers.IPProtocolTCP, "S", 0, true)
			f[22] = hl
			return f
		}())
		tw.burst(fmt.Sprintf("hl %d", hl), [][]byte{f6, f4})
		for _, f := range [][]byte{f6, f4} {
			out, v := r.run(f)
			if !tunnelDst(t, out[0], v[0]).IsValid() || !bytes.HasSuffix(out[0], ipPacket(f)) {
				t.Errorf("hop limit/TTL %d (%x): verdict %v", hl, f[12:14], v[0])
			}
		}
	}
	tw.same("hop limit")
}

// TestIPv6ParityFlowLabel: a flow's flow label changing from packet to
// packet (an attacker's or a host's rehash, RFC 6437) moves nothing: one
// backend, one outer header, the inner packet untouched.
func TestIPv6ParityFlowLabel(t *testing.T) {
	bothPaths(t, testConfig, func(t *testing.T, r *rig) {
		for _, src := range []string{"2001:db8:c::40", "2001:db8:c::41", "2001:db8:c::42", "2001:db8:c::43"} {
			seg := func(flags string, label uint32) []byte {
				f := frame(t, src, "2001:db8:ffff::7", 7000, 443, layers.IPProtocolTCP, flags, 50, true)
				binary.BigEndian.PutUint32(f[14:], 0x60000000|label&0xfffff)
				return f
			}
			out, v := r.run(seg("S", 1))
			owner := tunnelDst(t, out[0], v[0])
			var outer []byte
			for l := range uint32(16) {
				f := seg("PA", l*0x1111+7)
				out, v := r.run(f)
				if tunnelDst(t, out[0], v[0]) != owner || !bytes.HasSuffix(out[0], ipPacket(f)) {
					t.Errorf("%s label %x: to %v, owner %v", src, l, tunnelDst(t, out[0], v[0]), owner)
					continue
				}
				h := out[0][:len(out[0])-len(ipPacket(f))]
				if outer == nil {
					outer = append([]byte(nil), h...)
				} else if !bytes.Equal(h, outer) {
					t.Errorf("%s label %x: outer header changed\n% x\n% x", src, l, h, outer)
				}
			}
		}
	})
}

// TestIPv6ParityAtomicFragmentSYN: a forged SYN as an atomic fragment, or
// behind a hop-by-hop header, on a live connection keeps the pin after a
// drain (the general path's Keep), as the plain SYN does.
func TestIPv6ParityAtomicFragmentSYN(t *testing.T) {
	for _, fused := range []bool{true, false} {
		r := newRig(t, testConfig)
		r.w.generalOnly = !fused
		const n = 40
		tg := p6Targets()[0]
		seg := tg.seg(t)
		owner := handshakes(t, r, seg, 34000, n)
		r.publish(Overrides{{"web6", "six1"}: {Weight: 0}})
		kept0 := r.w.c.SYNKept
		moved := 0
		for i := range n {
			sp := 34000 + uint16(i)
			s := seg(sp, "S", 0)
			atomic := cat(s[:54], frag6(6, 0, false, uint32(i)), s[54:])
			atomic[20] = 44
			binary.BigEndian.PutUint16(atomic[18:], uint16(len(atomic)-54))
			hbh := cat(s[:54], []byte{6, 0, 1, 4, 0, 0, 0, 0}, s[54:])
			hbh[20] = 0
			binary.BigEndian.PutUint16(hbh[18:], uint16(len(hbh)-54))
			out, v := r.run(atomic, hbh, seg(sp, "PA", 10))
			for j := range out {
				if tunnelDst(t, out[j], v[j]) != owner[i] {
					moved++
					break
				}
			}
		}
		if moved != 0 || r.w.c.SYNKept-kept0 != 2*n || r.w.c.Fragments != 0 {
			t.Errorf("fused %v: moved %d, SYNKept +%d (want %d), fragments %d", fused, moved, r.w.c.SYNKept-kept0, 2*n, r.w.c.Fragments)
		}
		wantBalance(t, r)
	}
}

// TestIPv6ParityForgedICMPErrors: TestAttackForgedICMPErrors' cases as
// ICMPv6, and ICMPv4 errors about a flow of the IPv4 VIP on its IPv6
// backend.
func TestIPv6ParityForgedICMPErrors(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		const client, vip = "2001:db8:c::60", "2001:db8:ffff::7"
		out, v := r.run(raw6(client, vip, 6, tcpSeg(41000, 443, packet.TCPSyn, 0)))
		owner := tunnelDst(t, out[0], v[0])
		r.run(raw6(client, vip, 6, tcpSeg(41000, 443, packet.TCPAck, 0)))
		ct0 := r.w.ct.Len()
		err6 := func(typ, code uint8, quote []byte) []byte {
			return raw6("2001:db8:99::1", vip, 58, icmpMsg(typ, code, 1280, quote))
		}
		q := func(src, dst string, nh uint8, l4 []byte) []byte { return raw6(src, dst, nh, l4)[14:] }
		back := q(vip, client, 6, tcpSeg(443, 41000, packet.TCPAck, 0))
		cases := []struct {
			name, want string
			f          []byte
		}{
			{"packet too big, tracked flow", "owner", err6(2, 0, back)},
			{"unreachable, 8 bytes of TCP", "owner", err6(1, 4, back[:48])},
			{"time exceeded", "owner", err6(3, 0, back)},
			{"parameter problem", "owner", err6(4, 0, back)},
			{"quote of 3 bytes of TCP", "bad-icmp-quote", err6(2, 0, back[:43])},
			{"quote without IP header", "bad-icmp-quote", err6(2, 0, []byte{0x60, 0, 0})},
			{"quote of IPv4 in ICMPv6", "bad-icmp-quote", err6(2, 0, raw4("203.0.113.7", "198.51.100.1", 6, 1, 0, tcpSeg(80, 1, packet.TCPAck, 0))[14:])},
			{"quote from another address", "icmp-error-not-ours", err6(2, 0, q("2001:db8:ffff::8", client, 6, tcpSeg(443, 41000, packet.TCPAck, 0)))},
			{"quote of client to VIP", "icmp-error-not-ours", err6(2, 0, q(client, vip, 6, tcpSeg(41000, 443, packet.TCPAck, 0)))},
			{"nested ICMPv6 error", "no-service", err6(1, 4, q(vip, client, 58, icmpMsg(1, 4, 0, make([]byte, 48))))},
			{"quoted first fragment", "owner", err6(2, 0, q(vip, client, 44, cat(frag6(6, 0, true, 3), tcpSeg(443, 41000, packet.TCPAck, 0))))},
			{"quoted later fragment", "no-service", err6(2, 0, q(vip, client, 44, cat(frag6(6, 64, true, 3), tcpSeg(443, 41000, packet.TCPAck, 0))))},
			{"echo reply to a VIP", "vip-icmp-not-error", err6(129, 0, nil)},
			{"redirect (ND) to a VIP", "vip-icmp-not-error", err6(137, 0, back)},
			{"fragmented ICMPv6 error", "no-service", raw6("2001:db8:99::1", vip, 44, cat(frag6(58, 0, true, 9), icmpMsg(2, 0, 1280, back)))},
			{"unassigned type 100", "owner", err6(100, 0, back)},
		}
		for _, tc := range cases {
			before := r.w.c.Drops
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
						got = n - before[dr]
					}
				}
				if v[0] != Drop || got != 1 {
					t.Errorf("%s: verdict %v, %s +%d (drops %v, parse %v)", tc.name, v[0], tc.want, got, r.w.c.Drops, r.w.c.Parse)
				}
			}
		}
		if r.w.ct.Len() != ct0 {
			t.Errorf("ICMPv6 errors changed conntrack: %d entries, was %d", r.w.ct.Len(), ct0)
		}
		// IPv4 VIP, a flow on its IPv6 backend be3: the frag-needed
		// about it reaches be3 through an IPv6 tunnel.
		be3 := backendAddr(r, "web", "be3")
		for sp := uint16(45000); sp < 45400; sp++ {
			out, v := r.run(raw4("198.51.100.61", "203.0.113.7", 6, 1, 0x4000, tcpSeg(sp, 80, packet.TCPSyn, 0)))
			if tunnelDst(t, out[0], v[0]) != be3 {
				continue
			}
			e := raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(3, 4, 1400, raw4("203.0.113.7", "198.51.100.61", 6, 1, 0x4000, tcpSeg(80, sp, packet.TCPAck, 0))[14:]))
			out, v = r.run(e)
			if d := tunnelDst(t, out[0], v[0]); d != be3 {
				t.Errorf("frag-needed about a flow on be3 went to %v (verdict %v)", d, v[0])
			}
			return
		}
		t.Error("no flow landed on be3")
	})
}

// TestIPv6ParityFragmentShapes: IPv4's RFC 1858 rule drops a TCP fragment
// at offset 8 (it can only rewrite the first fragment's flags); its IPv6
// twin, and the other shapes.
func TestIPv6ParityFragmentShapes(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		const src, vip = "2001:db8:c::80", "2001:db8:ffff::7"
		cases := []struct {
			name string
			f    []byte
			ok   bool
		}{
			{"TCP at offset 8", raw6(src, vip, 44, cat(frag6(6, 8, true, 1), make([]byte, 16))), false},
			{"TCP at offset 8, last", raw6(src, vip, 44, cat(frag6(6, 8, false, 2), make([]byte, 16))), false},
			{"TCP at offset 16", raw6(src, vip, 44, cat(frag6(6, 16, true, 3), make([]byte, 16))), true},
			{"first TCP, 8 bytes", raw6(src, vip, 44, cat(frag6(6, 0, true, 4), make([]byte, 8))), false},
			{"first fragment, another protocol", raw6(src, vip, 44, cat(frag6(47, 0, true, 5), make([]byte, 40))), false},
			{"first fragment, dest-opts cut", raw6(src, vip, 44, cat(frag6(60, 0, true, 6), []byte{6, 1, 1, 4, 0, 0, 0, 0})), false},
		}
		for _, tc := range cases {
			out, v := r.run(tc.f)
			if got := tunnelDst(t, out[0], v[0]).IsValid(); got != tc.ok {
				t.Errorf("%s: forwarded %v, want %v (verdict %v, parse %v, drops %v)", tc.name, got, tc.ok, v[0], r.w.c.Parse, r.w.c.Drops)
			}
		}
		if r.w.ct.Len() != 0 {
			t.Errorf("fragments left %d entries", r.w.ct.Len())
		}
	})
}

// TestIPv6ParityHopByHopJumbo: a jumbo payload option with a non-zero
// payload length (RFC 2675 3: an error) and a router alert option.
func TestIPv6ParityHopByHopJumbo(t *testing.T) {
	bothPaths(t, testConfig, func(t *testing.T, r *rig) {
		syn := tcpSeg(40001, 443, packet.TCPSyn, 0)
		jumbo := raw6("2001:db8:c::20", "2001:db8:ffff::7", 0, cat([]byte{packet.ProtoTCP, 0, 0xc2, 4, 0, 1, 0, 0}, syn))
		ra := raw6("2001:db8:c::21", "2001:db8:ffff::7", 0, cat([]byte{packet.ProtoTCP, 0, 5, 2, 0, 0, 1, 0}, syn))
		out, v := r.run(jumbo, ra)
		tun := func(i int, f []byte) bool {
			return v[i] == Tx && len(out[i]) > len(f) && bytes.HasSuffix(out[i], ipPacket(f))
		}
		t.Logf("jumbo option, plen %d: verdict %v tunnelled %v; router alert: verdict %v tunnelled %v (parse %v drops %v)",
			binary.BigEndian.Uint16(jumbo[18:]), v[0], tun(0, jumbo), v[1], tun(1, ra), r.w.c.Parse, r.w.c.Drops)
	})
}

// TestIPv6ParityTwinBytes: a mixed IPv6 attack burst gives the same bytes,
// verdicts, counters and table on both paths.
func TestIPv6ParityTwinBytes(t *testing.T) {
	tw := newTwin(t, attackConfig)
	const c, vip = "2001:db8:c::70", "2001:db8:ffff::7"
	var frames [][]byte
	for i := range 10 {
		sp := uint16(46000 + i)
		back := raw6(vip, c, 6, tcpSeg(443, sp, packet.TCPAck, 0))[14:]
		frames = append(frames,
			raw6(c, vip, 6, tcpSeg(sp, 443, packet.TCPSyn, 0)),
			raw6(c, vip, 6, tcpSeg(sp, 443, packet.TCPAck, 10)),
			raw6(c, vip, 6, tcpSeg(sp, 443, packet.TCPRst, 0)),
			raw6(c, vip, 6, tcpSeg(sp, 443, packet.TCPSyn, 0)),
			raw6("2001:db8:99::1", vip, 58, icmpMsg(2, 0, 1280, back)),
			raw6(c, vip, 60, cat([]byte{6, 0, 1, 4, 0, 0, 0, 0}, tcpSeg(sp, 443, packet.TCPAck|packet.TCPFin, 0))),
			raw6(c, vip, 44, cat(frag6(6, 0, false, uint32(i)), tcpSeg(sp, 443, packet.TCPSyn, 0))),
			raw6("fe80::1", vip, 6, tcpSeg(sp, 443, packet.TCPAck, 0)),
			raw6(vip, vip, 6, tcpSeg(sp, 443, packet.TCPAck, 0)),
			raw6(c, vip, 58, icmpMsg(128, 0, 1, make([]byte, 8))),
		)
	}
	for len(frames) > 0 {
		n := min(MaxBurst, len(frames))
		tw.burst("v6 attack", frames[:n])
		tw.fast.now += 10
		tw.slow.now += 10
		frames = frames[n:]
	}
	tw.same("v6 attack")
}
