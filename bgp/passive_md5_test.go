package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
)

// A passive neighbour with a TCP MD5 password: BIRD dials the speaker's
// listener, both sides sign; the VIP arrives.
func TestPassiveMD5WithBird(t *testing.T) {
	conf := birdHead + `protocol bgp lb4 {
	local 10.200.0.2 as 65001;
	neighbor 10.200.0.1 port 1179 as 65100;
	password "pa ss w0rd";
	connect retry time 1;
	ipv4 { import all; export none; };
}
protocol bgp lb6 {
	local fd00:200::2 as 65001;
	neighbor fd00:200::1 port 1179 as 65100;
	password "v6-secret";
	connect retry time 1;
	ipv6 { import all; export none; };
}
`
	inLab(t, conf, func(t *testing.T, l *lab) {
		s, err := New(Config{ASN: 65100, RouterID: labSpeakerV4, ListenPort: 1179,
			Neighbors: []Neighbor{
				{Address: labRouterV4, PeerASN: 65001, Passive: true, Password: "pa ss w0rd"},
				{Address: labRouterV6, PeerASN: 65001, Passive: true, Password: "v6-secret"},
			}}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		s.Announce(netip.MustParsePrefix("203.0.113.7/32"), VIPAttrs{})
		s.Announce(netip.MustParsePrefix("2001:db8::7/128"), VIPAttrs{})
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, labWait, "both established", func() (bool, string) {
			a, b := l.protocolInfo(t, "lb4"), l.protocolInfo(t, "lb6")
			return a == "Established" && b == "Established", fmt.Sprint(a, " ", b, s.Peers())
		})
		waitRoute(t, l, "203.0.113.7/32", "v4", want("lb4", labSpeakerV4, labSpeakerV4, ""))
		waitRoute(t, l, "2001:db8::7/128", "v6", want("lb6", labSpeakerV6, labSpeakerV6, ""))
	})
}
