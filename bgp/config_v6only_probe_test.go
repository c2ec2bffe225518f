package bgp

import (
	"testing"
)

func v6Config() Config {
	return Config{
		ASN:       65100,
		RouterID:  "192.0.2.1",
		Neighbors: []Neighbor{{Address: "2001:db8:1::1", PeerASN: 65001}},
	}
}

// An IPv6-only speaker validates, and its session carries IPv6 only.
func TestV6OnlyProbeIPv6NeighborValid(t *testing.T) {
	c := v6Config().WithDefaults()
	cc, err := c.compile()
	if err != nil {
		t.Fatal(err)
	}
	if n := cc.neighbors[0]; n.v4 || !n.v6 {
		t.Errorf("IPv6 neighbor families v4=%v v6=%v, want v6 only", n.v4, n.v6)
	}
	// With next_hop_v4 it carries IPv4 too.
	c.NextHopV4 = "192.0.2.10"
	if cc, err = c.compile(); err != nil || !cc.neighbors[0].v4 {
		t.Errorf("next_hop_v4 set: err %v v4 %v", err, err == nil && cc.neighbors[0].v4)
	}
}

// next_hop_v6 must be a next hop a router can use: "is not a unicast IPv6
// address" is the promise of the message, yet multicast, loopback and a
// bare link-local (RFC 2545 §3: the global address must be there; a
// link-local one only as a second address) are not unicast next hops a
// router can forward to.
func TestV6OnlyProbeNextHopV6NotUsable(t *testing.T) {
	for _, nh := range []string{"ff02::1", "::1", "fe80::10"} {
		c := v6Config().WithDefaults()
		c.NextHopV6 = nh
		if err := c.Validate(); err == nil {
			t.Errorf("next_hop_v6 = %q accepted", nh)
		}
	}
	for _, nh := range []string{"224.0.0.1", "127.0.0.1", "255.255.255.255"} {
		c := validConfig().WithDefaults()
		c.NextHopV4 = nh
		if err := c.Validate(); err == nil {
			t.Errorf("next_hop_v4 = %q accepted", nh)
		}
	}
}

// A link-local neighbor (routers on the LAN often peer over fe80::):
// without a zone the connect has no interface; the zone is the only way to
// say it. Either a zoned one is accepted, or a bare one refused.
func TestV6OnlyProbeLinkLocalNeighbor(t *testing.T) {
	c := v6Config().WithDefaults()
	c.Neighbors[0].Address = "fe80::1"
	bareOK := c.Validate() == nil
	c.Neighbors[0].Address = "fe80::1%fulcrum0"
	zonedOK := c.Validate() == nil
	if bareOK {
		t.Errorf("neighbor fe80::1 without a zone accepted (zoned accepted: %v): the session cannot be opened without an interface", zonedOK)
	}
	c = v6Config().WithDefaults()
	c.Neighbors[0].LocalAddress = "::ffff:192.0.2.10"
	if c.Validate() == nil {
		t.Error("local_address ::ffff:192.0.2.10 for an IPv6 neighbor accepted")
	}
}
