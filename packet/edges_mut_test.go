package packet

import (
	"encoding/binary"
	"testing"
)

// Edge cases that no other test of the package pinned down: a mutation
// audit changed each line they guard (a comparison, a condition, a
// constant) and every other test still passed.

// frag6 is an IPv6 fragment header: next header nh, offset in bytes (a
// multiple of 8), more fragments.
func frag6(nh uint8, off uint16, more bool) []byte {
	b := make([]byte, 8)
	b[0] = nh
	v := off
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	binary.BigEndian.PutUint32(b[4:], 0x1234)
	return b
}

func TestEdgeParseEdges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		want  Reason
	}{
		// One word of options, an LSRR after a NOP: source routed like
		// any longer option block.
		{"v4-lsrr-in-one-word", hpFrame4([]byte{1, 0x83, 3, 4}), SourceRouted},
		// RFC 1858 for IPv6: a TCP fragment at offset 8 overwrites the
		// first fragment's flags.
		{"v6-tcp-fragment-at-8", hpFrame6(44, frag6(ProtoTCP, 8, false), make([]byte, 16)), BadFragment},
		{"v6-tcp-fragment-at-16", hpFrame6(44, frag6(ProtoTCP, 16, false), make([]byte, 16)), OK},
		// Two fragment headers in one packet.
		{"v6-two-fragment-headers", hpFrame6(44, frag6(44, 0, true), frag6(ProtoTCP, 0, true), hpTCP()), BadFragment},
		// A last fragment that would reassemble past 65535 bytes of payload.
		{"v6-fragment-ends-at-65536", hpFrame6(44, frag6(ProtoUDP, 65528, false), make([]byte, 8)), BadFragment},
		{"v6-fragment-ends-at-65535", hpFrame6(44, frag6(ProtoUDP, 65528, false), make([]byte, 7)), OK},
	} {
		var p Parsed
		if got := Parse(tc.frame, &p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// frame4 is an Ethernet frame with an IPv4 header (no options) of protocol
// proto, flags/fragment word ff, and payload l4.
func frame4(proto uint8, ff uint16, l4 []byte) []byte {
	f := make([]byte, 14+20, 14+20+len(l4))
	f[12], f[13] = 0x08, 0x00
	f[14] = 0x45
	binary.BigEndian.PutUint16(f[16:], uint16(20+len(l4)))
	binary.BigEndian.PutUint16(f[18:], 0x4242)
	binary.BigEndian.PutUint16(f[20:], ff)
	f[22], f[23] = 64, proto
	copy(f[26:30], []byte{198, 51, 100, 1})
	copy(f[30:34], []byte{203, 0, 113, 7})
	return append(f, l4...)
}

// The first fragment of a UDP datagram carries a UDP length larger than
// the fragment: it parses (as a fragment, ports and all), not BadUDPLen,
// or every fragmented datagram is dropped.
func TestEdgeUDPFirstFragment(t *testing.T) {
	u := make([]byte, 100)
	binary.BigEndian.PutUint16(u[0:], 5353)
	binary.BigEndian.PutUint16(u[2:], 53)
	binary.BigEndian.PutUint16(u[4:], 3000) // the whole datagram's length
	var p Parsed
	if got := Parse(frame4(ProtoUDP, 0x2000 /* MF */, u), &p); got != OK {
		t.Fatalf("first fragment of a 3000-byte UDP datagram: %v, want OK", got)
	}
	if !p.Fragment || p.Tuple.SrcPort != 0 && p.Tuple.SrcPort != 5353 {
		t.Fatalf("fragment %v ports %d -> %d", p.Fragment, p.Tuple.SrcPort, p.Tuple.DstPort)
	}
}

// An ICMP message shorter than its 8-byte header is truncated.
func TestEdgeShortICMP(t *testing.T) {
	for n := 0; n < 8; n++ {
		var p Parsed
		if got := Parse(frame4(ProtoICMP, 0, make([]byte, n)), &p); got != TruncatedICMP {
			t.Errorf("ICMP of %d bytes: %v, want TruncatedICMP", n, got)
		}
	}
}

func tcpSYN() []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b[0:], 40000)
	binary.BigEndian.PutUint16(b[2:], 443)
	b[12], b[13] = 0x50, TCPSyn
	return b
}

// ParseFlow refuses what its doc says Parse decides: a frame to a group
// MAC address, a first fragment (MF set, offset 0), and an IPv4 total
// length below the header's (which would slice past it: a panic).
func TestEdgeParseFlowRefuses(t *testing.T) {
	ok := frame4(ProtoTCP, 0, tcpSYN())
	var p Parsed
	if !ParseFlow(ok, &p) {
		t.Fatal("setup: ParseFlow refuses a plain SYN")
	}
	group := append([]byte(nil), ok...)
	group[0] = 0x01 // 01:00:00:00:00:00, a multicast MAC
	firstFrag := frame4(ProtoTCP, 0x2000, tcpSYN())
	short := append([]byte(nil), ok...)
	binary.BigEndian.PutUint16(short[16:], 19)
	for name, f := range map[string][]byte{"group MAC": group, "first fragment": firstFrag, "total length 19": short} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: ParseFlow panicked: %v", name, r)
				}
			}()
			if ParseFlow(f, &p) {
				t.Errorf("%s: ParseFlow accepted it", name)
			}
		}()
	}
}

// The fast path's L4 checks match Parse's: a UDP length below 8 and a TCP
// data offset past the segment are refused.
func TestEdgeParseFlowL4Lengths(t *testing.T) {
	u := make([]byte, 8)
	binary.BigEndian.PutUint16(u[4:], 4)
	badDoff := tcpSYN()
	badDoff[12] = 0xf0 // 60 bytes of header in a 20-byte segment
	var p Parsed
	for name, f := range map[string][]byte{"udp length 4": frame4(ProtoUDP, 0, u), "tcp doff 60": frame4(ProtoTCP, 0, badDoff)} {
		if r := Parse(f, &p); r == OK {
			t.Fatalf("%s: Parse accepts it", name)
		}
		if ParseFlow(f, &p) {
			t.Errorf("%s: ParseFlow accepted a frame Parse refuses", name)
		}
	}
}

// icmpErr4 is an ICMPv4 message of type typ quoting quote.
func icmpErr4(typ uint8, ff uint16, quote []byte) []byte {
	return frame4(ProtoICMP, ff, append([]byte{typ, 0, 0, 0, 0, 0, 0, 0}, quote...))
}

// quote4 is an IPv4 TCP header from 203.0.113.7:80 to 198.51.100.10:40000
// and the first n bytes of its TCP header.
func quote4(n int) []byte {
	q := make([]byte, 20+n)
	q[0] = 0x45
	binary.BigEndian.PutUint16(q[2:], 60)
	q[8], q[9] = 64, ProtoTCP
	copy(q[12:], []byte{203, 0, 113, 7, 198, 51, 100, 10})
	tcp := make([]byte, 8)
	binary.BigEndian.PutUint16(tcp[0:], 80)
	binary.BigEndian.PutUint16(tcp[2:], 40000)
	copy(q[20:], tcp[:min(n, 8)])
	return q
}

func TestEdgeICMPErrors(t *testing.T) {
	parse := func(f []byte) (*Parsed, Reason, flowTuple) {
		var p Parsed
		if r := Parse(f, &p); r != OK {
			t.Fatalf("Parse = %v", r)
		}
		var q flowTuple
		return &p, ParseICMPError(f, &p, &q), q
	}
	// A redirect (type 5) is an error quoting the flow.
	if _, r, q := parse(icmpErr4(5, 0, quote4(8))); r != OK || q.SrcPort != 80 || q.DstPort != 40000 {
		t.Errorf("redirect: %v %v, want OK with ports 80 -> 40000", r, q)
	}
	// A quote with the ports alone (4 bytes of TCP) still names the flow.
	if _, r, q := parse(icmpErr4(3, 0, quote4(4))); r != OK || q.SrcPort != 80 || q.DstPort != 40000 {
		t.Errorf("quote of 4 bytes of TCP: %v %v, want OK with ports", r, q)
	}
	// A fragment of an ICMP message is not taken as an error (its quote
	// may be cut anywhere).
	if p, r, _ := parse(icmpErr4(3, 0x2000, quote4(8))); p.IsICMPError() || r != NotICMPError {
		t.Errorf("first fragment of an ICMP error: IsICMPError %v, %v; want false, NotICMPError", p.IsICMPError(), r)
	}
	// ICMPv6 128 (echo request) is informational.
	echo6 := hpFrame6(ProtoICMPv6, []byte{128, 0, 0, 0, 0, 1, 0, 1})
	if p, r, _ := parse(echo6); p.IsICMPError() || r != NotICMPError {
		t.Errorf("ICMPv6 echo request: IsICMPError %v, %v", p.IsICMPError(), r)
	}
	// A quoted IPv6 packet with two fragment headers is refused.
	q6 := hpFrame6(44, frag6(44, 0, true), frag6(ProtoUDP, 0, true), make([]byte, 8))[14:]
	ptb := hpFrame6(ProtoICMPv6, append([]byte{2, 0, 0, 0, 0, 0, 5, 0x78}, q6...))
	if _, r, _ := parse(ptb); r != BadICMPQuote {
		t.Errorf("quote with two fragment headers: %v, want BadICMPQuote", r)
	}
}
