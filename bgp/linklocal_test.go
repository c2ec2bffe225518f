package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
)

// linkLocalLab gives both lab ends one fixed link-local address each
// (fe80::1 the speaker, fe80::2 the router) and no other.
var linkLocalLab = [][]string{
	{"-n", "SP", "addr", "flush", "dev", "lb0", "scope", "link"},
	{"-n", "RT", "addr", "flush", "dev", "rt0", "scope", "link"},
	{"-n", "SP", "addr", "add", "fe80::1/64", "dev", "lb0", "nodad"},
	{"-n", "RT", "addr", "add", "fe80::2/64", "dev", "rt0", "nodad"},
}

// The README accepts a link-local neighbour with its interface
// (fe80::2%lb0). The session must come up, its state must be reported,
// and an IPv6 VIP must reach the router with a next hop it can use.
func TestLinkLocalNeighborWithBird(t *testing.T) {
	conf := birdHead + `protocol bgp lbll {
	local fe80::2 as 65001;
	neighbor fe80::1 as 65100;
	interface "rt0";
	passive on;
	ipv6 { import all; export none; };
}
`
	inLabExtra(t, conf, linkLocalLab, func(t *testing.T, l *lab) {
		cfg := Config{
			ASN: 65100, RouterID: labSpeakerV4,
			Neighbors: []Neighbor{{Address: "fe80::2%lb0", PeerASN: 65001}},
		}
		s, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		if err := s.Announce(netip.MustParsePrefix("2001:db8::7/128"), VIPAttrs{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, labWait, "bird's session established", func() (bool, string) {
			info := l.protocolInfo(t, "lbll")
			return info == "Established", info + " " + fmt.Sprint(s.Peers())
		})
		t.Logf("peers: %+v", s.Peers())
		t.Logf("bird: %s", l.birdc(t, "show", "route", "all"))
		waitFor(t, labWait, "speaker reports the session established", func() (bool, string) {
			p := s.Peers()[0]
			return p.State == StateEstablished && p.PrefixesSent == 1, fmt.Sprintf("%+v", p)
		})
		waitRoute(t, l, "2001:db8::7/128", "a route bird can use", func(rs []birdRoute) bool {
			return len(rs) == 1 && rs[0].Via != ""
		})
	})
}
