package bgp

import (
	"context"
	"testing"
)

// A link-local neighbour whose interface is missing at start (a typo, or
// an interface that comes later) passes Validate, as any unreachable
// neighbour does, but it made Start fail: GoBGP looks the interface's
// link-local address up when the peer is added, so the whole speaker,
// and with it `fulcrum run` (after its dataplane began forwarding), exits
// over one neighbour, the other sessions never come up. An unreachable
// global neighbour only stays down with its reason in LastError.
func TestLinkLocalNeighborMissingInterfaceStarts(t *testing.T) {
	for _, addr := range []string{"fe80::2%nosuchif0", "fe80::2%lo"} {
		cfg := Config{ASN: 65100, RouterID: "192.0.2.10", Neighbors: []Neighbor{
			{Address: "192.0.2.1", PeerASN: 65001},
			{Address: addr, PeerASN: 65001},
		}}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		s, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Errorf("neighbor %s accepted by Validate, but Start fails: %v", addr, err)
		}
		s.Stop()
	}
}
