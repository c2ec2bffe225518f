package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// iBGP (the LB in the router's AS) on both families, the global MED at
// its maximum and MaxCommunities communities: the router gets each VIP,
// next hop self, the MED and every community.
func TestIBGPLimitsWithBird(t *testing.T) {
	conf := birdHead +
		birdPeer("lb4", labRouterV4, labSpeakerV4, 65001, "direct;", "ipv4 { gateway direct; import all; export none; };") +
		birdPeer("lb6", labRouterV6, labSpeakerV6, 65001, "direct;", "ipv6 { gateway direct; import all; export none; };")
	inLab(t, conf, func(t *testing.T, l *lab) {
		comms := communityStrings(1, MaxCommunities)
		s, err := New(Config{ASN: 65001, RouterID: labSpeakerV4, MED: u32(4294967295), Communities: comms,
			Neighbors: []Neighbor{{Address: labRouterV4, PeerASN: 65001}, {Address: labRouterV6, PeerASN: 65001}}}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		s.Announce(netip.MustParsePrefix("203.0.113.7/32"), VIPAttrs{})
		s.Announce(netip.MustParsePrefix("2001:db8:ffff:ffff:ffff:ffff:ffff:fff7/128"), VIPAttrs{})
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, l, s, labRouterV4, "lb4")
		waitEstablished(t, l, s, labRouterV6, "lb6")
		for _, c := range []struct{ p, proto, nh string }{
			{"203.0.113.7/32", "lb4", labSpeakerV4},
			{"2001:db8:ffff:ffff:ffff:ffff:ffff:fff7/128", "lb6", labSpeakerV6},
		} {
			waitRoute(t, l, c.p, "with MED and every community", func(rs []birdRoute) bool {
				return len(rs) == 1 && rs[0].Protocol == c.proto && rs[0].MED == "4294967295" &&
					len(rs[0].NextHop) >= len(c.nh) && rs[0].NextHop[:len(c.nh)] == c.nh
			})
			out, _ := l.birdcErr("show", "route", c.p, "where", fmt.Sprintf("bgp_community.len = %d", MaxCommunities))
			if !strings.Contains(out, c.p) {
				t.Errorf("%s: bird does not have %d communities:\n%s", c.p, MaxCommunities, out)
			}
		}
		for _, p := range s.Peers() {
			if p.State != StateEstablished || p.PrefixesSent != 1 {
				t.Errorf("%+v", p)
			}
		}
		t.Log(fmt.Sprint(s.Peers()))
	})
}
