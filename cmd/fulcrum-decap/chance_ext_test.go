//go:build linux

package main

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// docs/second-chance.md, step 1: the agent skips the lookup only for an
// inner packet that is not a TCP segment, or is a SYN. An IPv6 TCP segment
// behind a Destination Options header is a TCP segment, and the LB gives
// its flow a second chance (package packet walks the extension headers to
// TCP, and the dataplane's firstChance looks at the protocol only): the
// agent must find its flow, not deliver it here without a lookup.
func TestFlowOfIPv6ExtensionHeader(t *testing.T) {
	client, vip := netip.MustParseAddr("2001:db8:c::9"), netip.MustParseAddr("2001:db8:ffff::7")
	tcp := make([]byte, 20)
	tcp[0], tcp[1], tcp[2], tcp[3] = 0x9c, 0x40, 0x01, 0xbb // 40000 -> 443
	tcp[12], tcp[13] = 5<<4, 0x10                           // ACK
	opts := []byte{6, 0, 1, 4, 0, 0, 0, 0}                  // Destination Options (next header TCP), PadN
	inner := make([]byte, 40, 40+len(opts)+len(tcp))
	inner[0] = 6 << 4
	inner[4], inner[5] = 0, byte(len(opts)+len(tcp))
	inner[6], inner[7] = 60, 64
	copy(inner[8:24], client.AsSlice())
	copy(inner[24:40], vip.AsSlice())
	inner = append(append(inner, opts...), tcp...)

	// What the LB sees: a TCP segment of the flow, not a fragment.
	var p packet.Parsed
	eth := append(make([]byte, 12), 0x86, 0xdd)
	if r := packet.Parse(append(eth, inner...), &p); r != packet.OK || p.Proto != packet.ProtoTCP || p.Fragment || p.TCPFlags != 0x10 {
		t.Fatalf("LB's parse: %v proto %d fragment %v flags %#x", r, p.Proto, p.Fragment, p.TCPFlags)
	}
	c, s, flags, ok := flowOf(inner)
	if !ok || c != netip.AddrPortFrom(client, 40000) || s != netip.AddrPortFrom(vip, 443) || flags != 0x10 {
		t.Errorf("agent's flowOf: %v %v flags %#x ok %v: the segment would be counted second_chance.skipped and delivered here without a lookup", c, s, flags, ok)
	}
}
