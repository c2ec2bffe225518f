package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/internal/syncbuf"
)

const labWait = 15 * time.Second // a session comes up in 1-3 s here

// birdPeer is a BIRD protocol toward the speaker. BIRD is passive: the
// speaker dials (it does not listen by default).
func birdPeer(name, local, neighbor string, peerAS int, extra, channels string) string {
	return fmt.Sprintf(`protocol bgp %s {
	local %s as 65001;
	neighbor %s as %d;
	passive on;
	%s
	%s
}
`, name, local, neighbor, peerAS, extra, channels)
}

const (
	birdHead = "router id " + labRouterV4 + ";\nprotocol device {}\n"
	importV4 = "ipv4 { import all; export none; };"
	importV6 = "ipv6 { import all; export none; };"
)

// testLogger collects the speaker's log and shows it if the test fails.
// It never calls t.Log itself: GoBGP's goroutines may outlive the test.
func testLogger(t *testing.T) *slog.Logger {
	w := &syncbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("speaker log:\n%s", w.String())
		}
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func u32(v uint32) *uint32 { return &v }

func peerByAddr(t *testing.T, s *Speaker, addr string) PeerStatus {
	t.Helper()
	a := netip.MustParseAddr(addr)
	for _, p := range s.Peers() {
		if p.Address == a {
			return p
		}
	}
	t.Fatalf("no peer %s in Peers()", addr)
	return PeerStatus{}
}

// waitEstablished waits until both the speaker and BIRD see the session
// up.
func waitEstablished(t *testing.T, l *lab, s *Speaker, addr, proto string) {
	t.Helper()
	waitFor(t, labWait, "session "+proto+" established", func() (bool, string) {
		p := peerByAddr(t, s, addr)
		info := l.protocolInfo(t, proto)
		return p.State == StateEstablished && info == "Established",
			fmt.Sprintf("speaker: %+v; bird: %q", p, info)
	})
}

// waitRoute waits until BIRD's routes for prefix satisfy ok.
func waitRoute(t *testing.T, l *lab, prefix, what string, ok func([]birdRoute) bool) []birdRoute {
	t.Helper()
	var rs []birdRoute
	waitFor(t, labWait, prefix+": "+what, func() (bool, string) {
		rs = l.routes(t, prefix)
		text, _ := l.birdcErr("show", "route", prefix, "all")
		return ok(rs), fmt.Sprintf("%+v\n%s", rs, text)
	})
	return rs
}

func absent(rs []birdRoute) bool { return len(rs) == 0 }

func want(proto, via, nextHop, med string, comms ...string) func([]birdRoute) bool {
	return func(rs []birdRoute) bool {
		return len(rs) == 1 && rs[0].Protocol == proto && rs[0].Via == via &&
			strings.HasPrefix(rs[0].NextHop, nextHop) && rs[0].MED == med &&
			slices.Equal(rs[0].Communities, comms)
	}
}

// TestSpeakerWithBird: one IPv4 and one IPv6 session with next-hop self;
// announce, per-VIP and caller's attributes, withdraw, reconcile, stop.
func TestSpeakerWithBird(t *testing.T) {
	conf := birdHead +
		birdPeer("lb4", labRouterV4, labSpeakerV4, 65100, "", importV4) +
		birdPeer("lb6", labRouterV6, labSpeakerV6, 65100, "", importV6)
	inLab(t, conf, func(t *testing.T, l *lab) {
		cfg := Config{
			ASN:      65100,
			RouterID: labSpeakerV4,
			Neighbors: []Neighbor{
				{Address: labRouterV4, PeerASN: 65001},
				{Address: labRouterV6, PeerASN: 65001},
			},
			Communities: []string{"65000:100"},
			MED:         u32(10),
			VIPs:        []VIPConfig{{Prefix: "203.0.113.7", Communities: []string{"65000:7"}, MED: u32(50)}},
		}
		s, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		v4 := netip.MustParsePrefix("203.0.113.7/32")
		v4b := netip.MustParsePrefix("203.0.113.8/32")
		v6 := netip.MustParsePrefix("2001:db8::7/128")

		// Announced before Start: sent once the sessions come up.
		if err := s.Announce(v4, VIPAttrs{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, l, s, labRouterV4, "lb4")
		waitEstablished(t, l, s, labRouterV6, "lb6")

		// Our 9 s hold time wins over BIRD's 240 s: the smaller one is
		// negotiated (RFC 4271 §4.2).
		if all := l.birdc(t, "show", "protocols", "all", "lb4"); !regexp9(all) {
			t.Errorf("negotiated hold time is not 9 s:\n%s", all)
		}

		if err := s.Announce(v6, VIPAttrs{Communities: []Community{mustCommunity(t, "65000:200")}}); err != nil {
			t.Fatal(err)
		}
		// Per-VIP config: its own MED and community on top of the global.
		waitRoute(t, l, "203.0.113.7/32", "via lb4, next hop self, MED 50",
			want("lb4", labSpeakerV4, labSpeakerV4, "50", "65000:7", "65000:100"))
		// Global MED; the caller's community added to the global one.
		waitRoute(t, l, "2001:db8::7/128", "via lb6, next hop self, MED 10",
			want("lb6", labSpeakerV6, labSpeakerV6, "10", "65000:100", "65000:200"))

		// Each session carries its own family only.
		p4, p6 := peerByAddr(t, s, labRouterV4), peerByAddr(t, s, labRouterV6)
		if p4.PrefixesSent != 1 || p6.PrefixesSent != 1 || p4.PrefixesReceived != 0 {
			t.Errorf("prefix counts: v4 %+v, v6 %+v; want 1 sent each, 0 received", p4, p6)
		}
		if p4.ASN != 65001 || p4.Uptime < 0 || p4.Uptime > time.Minute {
			t.Errorf("peer status %+v", p4)
		}

		// Idempotent: the same announcement again changes nothing.
		if err := s.Announce(v4, VIPAttrs{}); err != nil {
			t.Fatal(err)
		}
		// New attributes replace the announcement in place.
		if err := s.Announce(v4, VIPAttrs{MED: u32(70)}); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, l, "203.0.113.7/32", "MED 70 from the caller",
			want("lb4", labSpeakerV4, labSpeakerV4, "70", "65000:7", "65000:100"))

		if err := s.Withdraw(v4); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, l, "203.0.113.7/32", "withdrawn", absent)
		if err := s.Withdraw(v4); err != nil {
			t.Fatalf("second withdraw: %v", err)
		}

		// Reconcile: v4b new, v6 kept with a new MED, v4 stays away.
		if err := s.SetAnnounced(map[netip.Prefix]VIPAttrs{v4b: {}, v6: {MED: u32(5)}}); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, l, "203.0.113.8/32", "announced by SetAnnounced",
			want("lb4", labSpeakerV4, labSpeakerV4, "10", "65000:100"))
		waitRoute(t, l, "2001:db8::7/128", "MED 5 from SetAnnounced",
			want("lb6", labSpeakerV6, labSpeakerV6, "5", "65000:100"))
		if got := s.Announced(); !slices.Equal(got, []netip.Prefix{v4b, v6}) {
			t.Errorf("Announced() = %v", got)
		}
		if err := s.SetAnnounced(map[netip.Prefix]VIPAttrs{v6: {MED: u32(5)}}); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, l, "203.0.113.8/32", "withdrawn by SetAnnounced", absent)

		// WithdrawAll keeps the sessions.
		if err := s.WithdrawAll(); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, l, "2001:db8::7/128", "withdrawn by WithdrawAll", absent)
		if info := l.protocolInfo(t, "lb6"); info != "Established" {
			t.Errorf("after WithdrawAll lb6 is %q, want Established", info)
		}

		// Stop: BIRD sees the sessions drop at once (a Cease NOTIFICATION,
		// not a hold timer expiry: within one hold time) and the routes go
		// with them.
		if err := s.Announce(v4, VIPAttrs{}); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, l, "203.0.113.7/32", "announced again", func(rs []birdRoute) bool { return len(rs) == 1 })
		s.Stop()
		waitFor(t, DefaultHoldTime-time.Second, "bird to see both sessions down", func() (bool, string) {
			a, b := l.protocolInfo(t, "lb4"), l.protocolInfo(t, "lb6")
			return a != "Established" && b != "Established", a + " " + b
		})
		if log, _ := os.ReadFile(filepath.Join(l.Dir, "bird.log")); !strings.Contains(string(log), "Received: Peer de-configured") {
			t.Errorf("bird did not log the Cease (peer de-configured):\n%s", log)
		}
		waitRoute(t, l, "203.0.113.7/32", "gone after Stop", absent)
		if err := s.Announce(v4, VIPAttrs{}); err != ErrStopped {
			t.Errorf("Announce after Stop: %v, want ErrStopped", err)
		}
		for _, p := range s.Peers() {
			if p.State != StateIdle {
				t.Errorf("after Stop: %+v", p)
			}
		}
		s.Stop() // idempotent
	})
}

func regexp9(showProtocolsAll string) bool {
	for _, line := range strings.Split(showProtocolsAll, "\n") {
		// "    Hold timer:       7.421/9"
		if f := strings.Fields(line); len(f) == 3 && f[0] == "Hold" && f[1] == "timer:" {
			return strings.HasSuffix(f[2], "/9")
		}
	}
	return false
}

func mustCommunity(t *testing.T, s string) Community {
	t.Helper()
	c, err := ParseCommunity(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSpeakerWithBirdNextHopPasswordErrors: explicit next hops, IPv6 over
// an IPv4 session, a TCP MD5 password, and a session that fails on a
// wrong peer AS with the reason in LastError.
func TestSpeakerWithBirdNextHopPasswordErrors(t *testing.T) {
	conf := birdHead +
		birdPeer("lb4", labRouterV4, labSpeakerV4, 65100, `password "s3cret-key";`, importV4+"\n\t"+importV6) +
		birdPeer("lb6", labRouterV6, labSpeakerV6, 65100, "", importV6)
	inLab(t, conf, func(t *testing.T, l *lab) {
		cfg := Config{
			ASN:       65100,
			RouterID:  labSpeakerV4,
			NextHopV4: "10.200.0.99",
			NextHopV6: "fd00:200::99",
			Neighbors: []Neighbor{
				{Address: labRouterV4, PeerASN: 65001, Password: "s3cret-key", HoldTime: 6 * time.Second},
				{Address: labRouterV6, PeerASN: 65002}, // BIRD is AS 65001
			},
		}
		s, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, l, s, labRouterV4, "lb4")
		if err := s.SetAnnounced(map[netip.Prefix]VIPAttrs{
			netip.MustParsePrefix("203.0.113.9/32"):  {},
			netip.MustParsePrefix("2001:db8::9/128"): {},
		}); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, l, "203.0.113.9/32", "explicit next hop", want("lb4", "10.200.0.99", "10.200.0.99", ""))
		waitRoute(t, l, "2001:db8::9/128", "IPv6 over the IPv4 session, explicit next hop",
			want("lb4", "fd00:200::99", "fd00:200::99", ""))

		waitFor(t, labWait, "the reason the IPv6 session fails", func() (bool, string) {
			p := peerByAddr(t, s, labRouterV6)
			// GoBGP v4 no longer says which AS the router sent (65001),
			// only that it is not the configured one.
			return p.State != StateEstablished && strings.Contains(p.LastError, "bad peer as") &&
				strings.Contains(p.LastError, "65002"), fmt.Sprintf("%+v", p)
		})
		t.Logf("lb6 last error: %s", peerByAddr(t, s, labRouterV6).LastError)
	})
}
