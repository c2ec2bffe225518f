//go:build linux

package main

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// docs/second-chance.md, step 1: the agent skips the lookup only for an
// inner packet that is not a TCP segment, or is a SYN. An IPv6 TCP segment
// behind extension headers is a TCP segment, and the LB gives its flow a
// second chance (package packet walks the extension headers to TCP, and
// the dataplane's firstChance looks at the protocol only): the agent must
// find its flow, not count it second_chance.skipped and deliver it here
// without a lookup. So must it behind an atomic Fragment header (offset 0,
// M clear: RFC 6946, what a host sends after a Packet Too Big below
// 1280), which the LB takes for the whole segment.
func TestFlowOfIPv6ExtensionHeader(t *testing.T) {
	client, vip := netip.MustParseAddr("2001:db8:c::9"), netip.MustParseAddr("2001:db8:ffff::7")
	for _, tc := range []struct {
		name string
		nh   byte   // the first extension header's type
		ext  []byte // the extension header, next header TCP
	}{
		{"destination options", 60, []byte{6, 0, 1, 4, 0, 0, 0, 0}},         // PadN
		{"atomic fragment", 44, []byte{6, 0, 0, 0, 0x12, 0x34, 0x56, 0x78}}, // offset 0, M clear
	} {
		tcp := make([]byte, 20)
		tcp[0], tcp[1], tcp[2], tcp[3] = 0x9c, 0x40, 0x01, 0xbb // 40000 -> 443
		tcp[12], tcp[13] = 5<<4, 0x10                           // ACK
		inner := make([]byte, 40, 40+len(tc.ext)+len(tcp))
		inner[0] = 6 << 4
		inner[4], inner[5] = 0, byte(len(tc.ext)+len(tcp))
		inner[6], inner[7] = tc.nh, 64
		copy(inner[8:24], client.AsSlice())
		copy(inner[24:40], vip.AsSlice())
		inner = append(append(inner, tc.ext...), tcp...)

		// What the LB sees: a TCP segment of the flow, not a fragment.
		var p packet.Parsed
		eth := append(make([]byte, 12), 0x86, 0xdd)
		if r := packet.Parse(append(eth, inner...), &p); r != packet.OK || p.Proto != packet.ProtoTCP || p.Fragment || p.TCPFlags != 0x10 {
			t.Fatalf("%s: LB's parse: %v proto %d fragment %v flags %#x", tc.name, r, p.Proto, p.Fragment, p.TCPFlags)
		}
		c, s, flags, ok := flowOf(inner)
		if !ok || c != netip.AddrPortFrom(client, 40000) || s != netip.AddrPortFrom(vip, 443) || flags != 0x10 {
			t.Errorf("%s: agent's flowOf: %v %v flags %#x ok %v: the segment would be counted second_chance.skipped and delivered here without a lookup",
				tc.name, c, s, flags, ok)
		}
	}
}
