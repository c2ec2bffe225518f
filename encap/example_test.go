package encap_test

import (
	"fmt"
	"net/netip"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
)

// The slow path resolves the config and the backends once; the fast path
// calls Encap per packet on the frame in its mbuf.
func Example() {
	e, err := encap.New(encap.Config{
		SrcV4: netip.MustParseAddr("192.0.2.1"),
		SrcV6: netip.MustParseAddr("2001:db8:1::1"),
		MTU:   1500,
	})
	if err != nil {
		panic(err)
	}
	backend, err := e.Backend(netip.MustParseAddr("2001:db8:b::5")) // a v6 backend for a v4 VIP
	if err != nil {
		panic(err)
	}

	// A bare 20-byte IPv4 header (protocol 253, for experiments) after a 14-byte Ethernet header,
	// behind 128 bytes of headroom, as in a DPDK mbuf.
	buf := make([]byte, 128+34)
	frame := buf[128:]
	copy(frame[12:], []byte{0x08, 0x00, 0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 253, 0, 0, 198, 51, 100, 7, 203, 0, 113, 10})
	var p packet.Parsed
	if r := packet.Parse(frame, &p); r != packet.OK {
		panic(r)
	}
	nextHop := [6]byte{2, 0, 0, 0, 0, 0xcc}
	port := [6]byte{2, 0, 0, 0, 0, 0xdd}
	start, length, res := e.Encap(buf, 128, len(frame), &p, 0x1234, encap.GRE, &backend, nextHop, port)
	fmt.Println(res, start, length, encap.Overhead(encap.GRE, backend.IsV6()))
	// Output: forward 84 78 44
}
