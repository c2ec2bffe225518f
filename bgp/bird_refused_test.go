package bgp

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// BIRD configured with the wrong remote AS for the LB (65199, the LB is
// 65100) refuses its OPEN: the session's LastError names the LB's asn as
// the AS to check, not peer_asn (which is right). GoBGP drops the
// NOTIFICATION unlogged in OpenConfirm, so before the speaker explained
// the failure, LastError stayed empty while the session cycled.
func TestSpeakerWithBirdRefusingLocalAS(t *testing.T) {
	conf := birdHead + birdPeer("lb4", labRouterV4, labSpeakerV4, 65199, "", importV4)
	inLab(t, conf, func(t *testing.T, l *lab) {
		s, err := New(Config{
			ASN:       65100,
			RouterID:  labSpeakerV4,
			Neighbors: []Neighbor{{Address: labRouterV4, PeerASN: 65001}},
		}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, labWait, "LastError naming asn 65100", func() (bool, string) {
			p := peerByAddr(t, s, labRouterV4)
			return p.State != StateEstablished && strings.Contains(p.LastError, "65100") &&
				!strings.Contains(p.LastError, "peer_asn"), fmt.Sprintf("%+v", p)
		})
	})
}
