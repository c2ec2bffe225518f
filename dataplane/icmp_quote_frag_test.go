package dataplane

import (
	"fmt"
	"testing"
)

// quoteFragConfig has a UDP VIP of one port on each family beside an
// every-port UDP VIP (attackConfig's anyudp at 203.0.113.9).
var quoteFragConfig = attackConfig + `
[[vip]]
name = "dns6"
address = "2001:db8:ffff::7"
port = 53
protocol = "udp"
  [[vip.backend]]
  name = "s1"
  address = "2001:db8:5::1"
  [[vip.backend]]
  name = "s2"
  address = "2001:db8:5::2"
  [[vip.backend]]
  name = "s3"
  address = "2001:db8:5::3"
`

// A backend's UDP reply too big for its path MTU is sent in fragments
// (an IPv6 host always fragments at the source; an IPv4 one without DF).
// When a later link is smaller still, the router there sends a Packet Too
// Big to the VIP quoting the first fragment (an IPv4 router that cannot
// reach the client, a Destination Unreachable), which
// carries the UDP header and so the flow's ports: RFC 8201 has the
// backend lower its path MTU for the client from it (Linux does, through
// the UDP socket the ports name), and without it every large reply to
// that client is lost at that link. The error must reach the backend the
// flow is on, as an error about an unfragmented packet does. A quote of a
// later fragment (no ports) is a different matter and is not tested here.
func TestICMPErrorQuotingFirstFragmentReachesFlowOwner(t *testing.T) {
	bothPaths(t, quoteFragConfig, func(t *testing.T, r *rig) {
		type flowCase struct {
			name   string
			query  func(sp uint16) []byte // the client's datagram
			errMsg func(sp uint16) []byte // the router's error about the reply's first fragment
		}
		const c4, c6 = "198.51.100.61", "2001:db8:c::61"
		quote4 := func(vip string, sp uint16) []byte {
			// IPv4, MF, offset 0: the first of the reply's fragments.
			return raw4(vip, c4, 17, 77, 0x2000, udpDgram(53, sp, 3000, 548))[14:]
		}
		quote6 := func(sp uint16) []byte {
			u := udpDgram(53, sp, 3000, 1160)
			return raw6("2001:db8:ffff::7", c6, 44, cat(frag6(17, 0, true, 0x1234), u))[14:]
		}
		cases := []flowCase{
			{"IPv6 packet too big, exact-port VIP",
				func(sp uint16) []byte { return raw6(c6, "2001:db8:ffff::7", 17, udpDgram(sp, 53, 20, 12)) },
				func(sp uint16) []byte {
					return raw6("2001:db8:99::1", "2001:db8:ffff::7", 58, icmpMsg(2, 0, 1400, quote6(sp)))
				}},
			{"IPv4 host unreachable, exact-port VIP",
				func(sp uint16) []byte { return raw4(c4, "203.0.113.7", 17, 1, 0, udpDgram(sp, 53, 20, 12)) },
				func(sp uint16) []byte {
					return raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(3, 1, 0, quote4("203.0.113.7", sp)))
				}},
			{"IPv4 host unreachable, every-port VIP",
				func(sp uint16) []byte { return raw4(c4, "203.0.113.9", 17, 1, 0, udpDgram(sp, 53, 20, 12)) },
				func(sp uint16) []byte {
					return raw4("192.0.2.99", "203.0.113.9", 1, 9, 0, icmpMsg(3, 1, 0, quote4("203.0.113.9", sp)))
				}},
		}
		for _, tc := range cases {
			wrong, n := 0, 24
			var first string
			for k := range n {
				sp := uint16(50000 + k)
				out, v := r.run(tc.query(sp))
				owner := tunnelDst(t, out[0], v[0])
				if !owner.IsValid() {
					t.Fatalf("%s: query verdict %v (drops %v)", tc.name, v[0], r.w.c.Drops)
				}
				ct0 := r.w.ct.Len()
				out, v = r.run(tc.errMsg(sp))
				if got := tunnelDst(t, out[0], v[0]); got != owner {
					wrong++
					if first == "" {
						var drops []string
						for dr, c := range r.w.c.Drops {
							if c != 0 {
								drops = append(drops, fmt.Sprintf("%v=%d", DropReason(dr), c))
							}
						}
						first = fmt.Sprintf("port %d: error went to %v (verdict %v, drops %v), the flow is on %v", sp, got, v[0], drops, owner)
					}
				}
				if r.w.ct.Len() != ct0 {
					t.Errorf("%s: the error changed conntrack", tc.name)
				}
			}
			if wrong > 0 {
				t.Errorf("%s: %d of %d errors about a reply's first fragment missed the flow's backend; first: %s", tc.name, wrong, n, first)
			}
		}
	})
}

// Counters.ICMPErrors (fulcrum_worker_icmp_errors_routed_total, "ICMP
// errors sent to the backend owning the quoted flow"; the API's
// icmp_errors, "routed to the backend of the quoted flow") counts the
// errors the LB forwarded, not every error it parsed: one that is then
// dropped (its quote names no port a VIP serves, an error about an ICMP
// message, no backend, no next hop) was routed nowhere.
func TestICMPErrorsCountsOnlyRoutedErrors(t *testing.T) {
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		const client = "198.51.100.62"
		err4 := func(quote []byte) []byte {
			return raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(3, 4, 1400, quote))
		}
		q := func(proto uint8, l4 []byte) []byte { return raw4("203.0.113.7", client, proto, 3, 0x4000, l4)[14:] }
		dropped := [][]byte{
			err4(q(6, tcpSeg(81, 41000, 0x10, 0))),                            // TCP port 81: no VIP
			err4(q(17, udpDgram(54, 41000, 8, 0))),                            // UDP port 54: no VIP
			err4(q(1, icmpMsg(0, 0, 0, make([]byte, 8)))),                     // about the LB's echo reply
			err4(q(1, icmpMsg(3, 4, 0, make([]byte, 28)))),                    // about an error
			err4(q(6, tcpSeg(80, 41000, 0x10, 0))[:20]),                       // no ports: bad quote
			raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(0, 0, 0, nil)), // not an error
		}
		e0 := r.w.c.ICMPErrors
		_, v := r.run(dropped...)
		for i := range v {
			if v[i] != Drop {
				t.Errorf("case %d: verdict %v, want a drop", i, v[i])
			}
		}
		if got := r.w.c.ICMPErrors - e0; got != 0 {
			t.Errorf("icmp errors routed +%d after %d errors that were all dropped (drops %v, parse %v)", got, len(dropped), r.w.c.Drops, r.w.c.Parse)
		}
		// One that is routed counts.
		_, v = r.run(err4(q(6, tcpSeg(80, 41000, 0x10, 0))))
		if v[0] != Tx || r.w.c.ICMPErrors-e0 != 1 {
			t.Errorf("routed error: verdict %v, icmp errors +%d, want Tx, +1", v[0], r.w.c.ICMPErrors-e0)
		}
	})
}
