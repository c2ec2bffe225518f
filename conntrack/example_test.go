package conntrack_test

import (
	"fmt"
	"net/netip"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

// The per-packet sequence of the dataplane: hash once, look up, and on a
// miss pin the backend Maglev chose; on a hit, touch the entry.
func Example() {
	cfg := conntrack.DefaultConfig()
	cfg.Capacity = 1024
	tb, err := conntrack.New(cfg)
	if err != nil {
		panic(err)
	}
	hasher := flow.NewHasher(flow.Key{1, 2, 3})
	maglevPick := func(hash uint64) uint32 { return uint32(hash % 3) } // stands in for the VIP's Maglev table

	key, _ := flow.TupleFrom(netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr("203.0.113.7"), 40000, 443, packet.ProtoTCP)
	packets := []uint8{packet.TCPSyn, packet.TCPAck, packet.TCPAck | packet.TCPPsh, packet.TCPFin | packet.TCPAck}

	for i, flags := range packets {
		now := conntrack.Time(1000 * i) // read once per burst from a coarse monotonic clock, in ms
		hash := hasher.Hash(&key)
		e := tb.Lookup(hash, &key, now)
		if e != nil {
			tb.Touch(e, now, flags)
		} else {
			e = tb.Insert(hash, &key, conntrack.Initial(key.Proto, flags), 1, maglevPick(hash), 1, now)
		}
		fmt.Printf("packet %d: %v, backend %d\n", i, e.State(), e.Backend())
	}
	c := tb.Counters()
	fmt.Printf("hits %d, misses %d, inserts %d\n", c.Hits, c.Misses, c.Inserts)
	// Output:
	// packet 0: new, backend 1
	// packet 1: established, backend 1
	// packet 2: established, backend 1
	// packet 3: closing, backend 1
	// hits 3, misses 1, inserts 1
}
