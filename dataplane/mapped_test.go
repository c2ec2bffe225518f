package dataplane

import (
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/packet"
)

// IPv6 packets with an IPv4-mapped source or destination
// (::ffff:0:0/96) are dropped as ipv4-mapped-ipv6 on both paths. A tuple
// keeps IPv4 addresses in that form, so before the check an IPv6 SYN to
// ::ffff:203.0.113.7 reached the IPv4 VIP 203.0.113.7 and was tunnelled
// to its backend, and a source ::ffff:127.0.0.1 passed the IPv6 martian
// test (the echo and too-big replies went back to it).
func TestMappedIPv6Dropped(t *testing.T) {
	tw := newTwin(t, fastTestConfig)
	const vip4, vip6 = "203.0.113.7", "2001:db8:ffff::7"
	ok6 := frame(t, "2001:db8:5::1", vip6, 40000, 443, layers.IPProtocolTCP, "S", 0, false)
	burst := [][]byte{
		ok6, // 0: forwarded
		frame(t, "2001:db8:5::2", "::ffff:"+vip4, 40001, 80, layers.IPProtocolTCP, "S", 0, false),           // 1: to the IPv4 VIP, mapped
		frame(t, "2001:db8:5::3", "::ffff:"+vip4, 40002, 53, layers.IPProtocolUDP, "", 20, false),           // 2: a datagram to it
		frame(t, "::ffff:127.0.0.1", vip6, 40003, 443, layers.IPProtocolTCP, "S", 0, false),                 // 3: a mapped martian source
		frame(t, "::ffff:198.51.100.9", vip6, 40004, 443, layers.IPProtocolTCP, "S", 0, false),              // 4: a mapped unicast source
		frame(t, "2001:db8:5::4", "::ffff:"+lb4, 40005, 22, layers.IPProtocolTCP, "S", 0, false),            // 5: to the LB's address, mapped
		frame(t, "2001:db8:5::1", vip6, 40000, 443, layers.IPProtocolTCP, "A", 10, false),                   // 6: flow 0's ACK: forwarded
		frame(t, "::ffff:198.51.100.9", "::ffff:"+vip4, 40006, 80, layers.IPProtocolTCP, "A", 10, false),    // 7: both mapped
		frame(t, "2001:db8:5::5", "::ffff:255.255.255.255", 40007, 80, layers.IPProtocolTCP, "S", 0, false), // 8: mapped broadcast
	}
	want := []Verdict{Tx, Drop, Drop, Drop, Drop, Drop, Tx, Drop, Drop}
	tw.burst("mapped", burst)
	tw.same("mapped")
	for i, w := range want {
		if got := tw.slow.w.Verdicts[i]; got != w {
			t.Errorf("packet %d: verdict %v, want %v", i, got, w)
		}
	}
	for _, w := range []*Worker{tw.slow.w, tw.fast.w} {
		if n := w.c.Parse[packet.MappedIPv6]; n != 7 {
			t.Errorf("%d counted as ipv4-mapped-ipv6, want 7", n)
		}
	}
}
