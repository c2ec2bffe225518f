//go:build linux

package main

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// FuzzFlowOfMatchesLB: every inner packet the LB takes for an unfragmented
// TCP segment (packet.Parse, the flow the second chance is named for), the
// agent reads as the same flow with the same flags: else it looks up the
// wrong socket, or skips the lookup, and a connection that lives here is
// forwarded away or one that lives on the second chance is delivered here.
func FuzzFlowOfMatchesLB(f *testing.F) {
	f.Add([]byte{0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 198, 51, 100, 1, 203, 0, 113, 7, 0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, inner []byte) {
		if len(inner) == 0 {
			return
		}
		eth := append(make([]byte, 12), 0x08, 0)
		if inner[0]>>4 == 6 {
			eth[12], eth[13] = 0x86, 0xdd
		}
		var p packet.Parsed
		if packet.Parse(append(eth, inner...), &p) != packet.OK || p.Proto != packet.ProtoTCP || p.Fragment {
			return
		}
		c, s, flags, ok := flowOf(inner)
		wantC := netip.AddrPortFrom(p.Tuple.SrcAddr(), p.Tuple.SrcPort)
		wantS := netip.AddrPortFrom(p.Tuple.DstAddr(), p.Tuple.DstPort)
		if !ok || c != wantC || s != wantS || flags != p.TCPFlags {
			t.Fatalf("agent %v %v flags %#x ok %v; LB %v %v flags %#x\n%x", c, s, flags, ok, wantC, wantS, p.TCPFlags, inner)
		}
	})
}
