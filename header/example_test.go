package header_test

import (
	"fmt"

	"github.com/fulcrumlb/fulcrum/header"
)

// A reply built in place: swap the addresses, set a fresh TTL and
// recompute the checksum, reading and writing fields by name.
func ExampleIPv4() {
	b := header.IPv4(make([]byte, header.IPv4MinimumSize))
	b.SetHeaderLength(header.IPv4MinimumSize)
	b.SetTotalLength(header.IPv4MinimumSize)
	b.SetProtocol(header.ProtoICMP)
	b.SetSourceAddress([4]byte{198, 51, 100, 7})
	b.SetDestinationAddress([4]byte{203, 0, 113, 10})

	b.SwapAddresses()
	b.SetTTL(64)
	b.UpdateChecksum()
	fmt.Println(b.SourceAddress(), b.TTL(), b.IsChecksumValid())
	// Output: [203 0 113 10] 64 true
}

// Skipping IPv6 extension headers to the transport header.
func ExampleWalkIPv6Ext() {
	pkt := make([]byte, 40+8+20)
	ip := header.IPv6(pkt)
	ip.SetVersionTrafficClassFlowLabel(0, 0)
	ip.SetPayloadLength(8 + 20)
	ip.SetNextHeader(header.ProtoHopByHop)
	pkt[40] = header.ProtoTCP // the hop-by-hop header's next header; length 0: 8 bytes

	w := header.WalkIPv6Ext(pkt, header.IPv6MinimumSize, ip.NextHeader(), header.IPv6ExtAll, 8)
	fmt.Println(w.Proto, w.Off, w.Status == header.IPv6ExtOK)
	// Output: 6 48 true
}
