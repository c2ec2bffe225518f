package bgp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// birdPrefixes lists the prefixes bird has from protocol proto.
func birdPrefixes(t *testing.T, l *lab, table, proto string) []string {
	t.Helper()
	out := l.birdc(t, "show", "route", "table", table, "protocol", proto)
	var ps []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[1] == "unicast" {
			ps = append(ps, f[0])
		}
	}
	slices.Sort(ps)
	return ps
}

// Churn of the announced set while the router restarts the session, is
// disabled and enabled, and flaps quickly: at the end the router has
// exactly the last set, and the speaker's PrefixesSent says so.
func TestChurnWhileRouterFlapsWithBird(t *testing.T) {
	conf := birdHead +
		birdPeer("lb4", labRouterV4, labSpeakerV4, 65100, "", importV4) +
		birdPeer("lb6", labRouterV6, labSpeakerV6, 65100, "", importV6)
	inLab(t, conf, func(t *testing.T, l *lab) {
		s, err := New(Config{ASN: 65100, RouterID: labSpeakerV4,
			Neighbors: []Neighbor{{Address: labRouterV4, PeerASN: 65001, ConnectRetry: 1e9},
				{Address: labRouterV6, PeerASN: 65001, ConnectRetry: 1e9}}}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, l, s, labRouterV4, "lb4")
		waitEstablished(t, l, s, labRouterV6, "lb6")
		var pool []netip.Prefix
		for i := 1; i <= 6; i++ {
			pool = append(pool, netip.MustParsePrefix(fmt.Sprintf("203.0.113.%d/32", i)),
				netip.MustParsePrefix(fmt.Sprintf("2001:db8::%d/128", i)))
		}
		r := rand.New(rand.NewPCG(1, 2))
		var set map[netip.Prefix]VIPAttrs
		for step := 0; step < 40; step++ {
			set = map[netip.Prefix]VIPAttrs{}
			for _, p := range pool {
				if r.IntN(2) == 0 {
					set[p] = VIPAttrs{}
				}
			}
			if err := s.SetAnnounced(set); err != nil {
				t.Fatal(err)
			}
			switch r.IntN(5) {
			case 0:
				l.birdc(t, "restart", "lb4")
			case 1:
				l.birdc(t, "restart", "lb6")
			case 2:
				l.birdc(t, "disable", "lb4")
				l.birdc(t, "enable", "lb4")
			}
		}
		var want4, want6 []string
		for p := range set {
			if p.Addr().Is4() {
				want4 = append(want4, p.String())
			} else {
				want6 = append(want6, p.String())
			}
		}
		slices.Sort(want4)
		slices.Sort(want6)
		waitFor(t, 4*labWait, "bird has exactly the last set", func() (bool, string) {
			g4, g6 := birdPrefixes(t, l, "master4", "lb4"), birdPrefixes(t, l, "master6", "lb6")
			p4, p6 := peerByAddr(t, s, labRouterV4), peerByAddr(t, s, labRouterV6)
			return slices.Equal(g4, want4) && slices.Equal(g6, want6) &&
					p4.PrefixesSent == uint64(len(want4)) && p6.PrefixesSent == uint64(len(want6)),
				fmt.Sprintf("bird v4 %v v6 %v; want %v %v; speaker %+v %+v", g4, g6, want4, want6, p4, p6)
		})
	})
}
