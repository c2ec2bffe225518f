package bgp

import (
	"net/netip"
	"slices"
	"testing"
)

// Edge cases from a mutation audit of package bgp: each test fails on a
// mutant that every other test of the package let through.

// A VIP announced again with other communities (and the same MED and next
// hop) replaces its recorded announcement: before Start, what Start
// will send; the mutant that compared only the MED and next hop kept the
// first communities, so the routers got graceful-shutdown, no-export or a
// TE community that the control plane had since changed.
func TestEdgeAnnounceCommunitiesChangeRecorded(t *testing.T) {
	s, err := New(validConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix("203.0.113.7/32")
	if err := s.Announce(p, VIPAttrs{Communities: []Community{CommunityNoExport}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Announce(p, VIPAttrs{Communities: []Community{CommunityGracefulShutdown}}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	got := s.announced[p].attrs.communities
	s.mu.Unlock()
	if !slices.Contains(got, CommunityGracefulShutdown) || slices.Contains(got, CommunityNoExport) {
		t.Errorf("recorded communities %v after the second announce, want graceful-shutdown and not no-export", got)
	}
}

// next_hop_v4 must be an address routers forward to: 0.0.0.0/8 ("this
// network") and 240.0.0.0/4 (reserved, with the broadcast address) are
// refused as the unspecified address is; the routers would install a
// route to the VIP that they cannot forward on (blackholed traffic).
func TestEdgeNextHopV4ReservedRangesRefused(t *testing.T) {
	for _, a := range []string{"0.1.2.3", "240.0.0.1", "255.255.255.254"} {
		c := validConfig()
		c.NextHopV4 = a
		if err := c.Validate(); err == nil {
			t.Errorf("next_hop_v4 %s accepted", a)
		}
	}
	for _, a := range []string{"1.0.0.1", "239.255.255.255"} {
		c := validConfig()
		c.NextHopV4 = a
		err := c.Validate()
		if a == "1.0.0.1" && err != nil {
			t.Errorf("next_hop_v4 %s refused: %v", a, err)
		}
		if a == "239.255.255.255" && err == nil {
			t.Errorf("next_hop_v4 %s (multicast) accepted", a)
		}
	}
}

// A neighbor's port is 1-65535: 65536 does not fit TCP's 16 bits (it
// would wrap to port 0 in GoBGP's uint16, and the session never come up).
func TestEdgeNeighborPortAbove65535Refused(t *testing.T) {
	c := validConfig()
	c.Neighbors[0].Port = 65536
	if err := c.Validate(); err == nil {
		t.Error("neighbor port 65536 accepted")
	}
}
