//go:build linux

package main

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// TestFlowOfIPv6AtomicFragment: an IPv6 TCP segment behind an atomic
// Fragment header (offset 0, M clear: RFC 6946, what a host sends after a
// Packet Too Big below 1280) is the whole segment to the LB (package
// packet: not a fragment, routed by its ports, given a second chance), so
// the agent must find its flow as it does behind other extension headers,
// not count it second_chance.skipped and deliver it here without a lookup.
func TestFlowOfIPv6AtomicFragment(t *testing.T) {
	client, vip := netip.MustParseAddr("2001:db8:c::9"), netip.MustParseAddr("2001:db8:ffff::7")
	tcp := make([]byte, 20)
	tcp[0], tcp[1], tcp[2], tcp[3] = 0x9c, 0x40, 0x01, 0xbb // 40000 -> 443
	tcp[12], tcp[13] = 5<<4, 0x10                           // ACK
	frag := []byte{6, 0, 0, 0, 0x12, 0x34, 0x56, 0x78}      // Fragment (next header TCP), offset 0, M clear
	inner := make([]byte, 40, 40+len(frag)+len(tcp))
	inner[0] = 6 << 4
	inner[4], inner[5] = 0, byte(len(frag)+len(tcp))
	inner[6], inner[7] = 44, 64
	copy(inner[8:24], client.AsSlice())
	copy(inner[24:40], vip.AsSlice())
	inner = append(append(inner, frag...), tcp...)

	var p packet.Parsed
	eth := append(make([]byte, 12), 0x86, 0xdd)
	if r := packet.Parse(append(eth, inner...), &p); r != packet.OK || p.Proto != packet.ProtoTCP || p.Fragment || p.TCPFlags != 0x10 {
		t.Fatalf("LB's parse: %v proto %d fragment %v flags %#x", r, p.Proto, p.Fragment, p.TCPFlags)
	}
	c, s, flags, ok := flowOf(inner)
	if !ok || c != netip.AddrPortFrom(client, 40000) || s != netip.AddrPortFrom(vip, 443) || flags != 0x10 {
		t.Errorf("agent's flowOf: %v %v flags %#x ok %v; the LB takes it for the whole segment", c, s, flags, ok)
	}
}
