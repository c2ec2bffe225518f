package bgp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSpeakerBeforeStart: the wanted set is kept before Start, with the
// same idempotence and reconciliation as after.
func TestSpeakerBeforeStart(t *testing.T) {
	s, err := New(validConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParsePrefix("203.0.113.7/32")
	b := netip.MustParsePrefix("2001:db8::7/128")
	c := netip.MustParsePrefix("203.0.113.8/32")
	for _, p := range []netip.Prefix{a, b, a} {
		if err := s.Announce(p, VIPAttrs{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Announced(); !slices.Equal(got, []netip.Prefix{a, b}) {
		t.Errorf("Announced() = %v", got)
	}
	if err := s.Withdraw(c); err != nil {
		t.Errorf("withdraw of an unannounced prefix: %v", err)
	}
	bad := netip.MustParsePrefix("203.0.113.7/24")
	if err := s.Announce(bad, VIPAttrs{}); !errors.Is(err, ErrInvalidPrefix) {
		t.Errorf("host bits: %v, want ErrInvalidPrefix", err)
	}
	err = s.SetAnnounced(map[netip.Prefix]VIPAttrs{b: {}, c: {}, bad: {}})
	if !errors.Is(err, ErrInvalidPrefix) {
		t.Errorf("SetAnnounced with a bad prefix: %v", err)
	}
	if got := s.Announced(); !slices.Equal(got, []netip.Prefix{c, b}) {
		t.Errorf("after SetAnnounced: %v, want the good prefixes applied", got)
	}
	if err := s.WithdrawAll(); err != nil || len(s.Announced()) != 0 {
		t.Errorf("WithdrawAll: %v, %v", err, s.Announced())
	}
	ps := s.Peers()
	if len(ps) != 1 || ps[0].State != StateIdle || ps[0].Address != netip.MustParseAddr("192.0.2.254") || ps[0].ASN != 65001 {
		t.Errorf("Peers() before Start = %+v", ps)
	}
	s.Stop()
	if err := s.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop: %v", err)
	}
	if err := s.SetAnnounced(nil); !errors.Is(err, ErrStopped) {
		t.Errorf("SetAnnounced after Stop: %v", err)
	}
}

// TestSpeakerNoPeer runs the speaker on loopback toward a closed port:
// the session never comes up, and Peers says why. No root needed.
func TestSpeakerNoPeer(t *testing.T) {
	// A port that was free a moment ago, so nothing listens on it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	cfg := Config{
		ASN:       65100,
		RouterID:  "127.0.0.1",
		Neighbors: []Neighbor{{Address: "127.0.0.1", PeerASN: 65001, Port: port, ConnectRetry: time.Second}},
	}
	s, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	v := netip.MustParsePrefix("203.0.113.7/32")
	if err := s.Announce(v, VIPAttrs{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("second Start: %v", err)
	}
	waitFor(t, 10*time.Second, "a connection error in LastError", func() (bool, string) {
		p := s.Peers()[0]
		return strings.Contains(p.LastError, "connection refused"), strconv.Quote(p.LastError)
	})
	p := s.Peers()[0]
	if p.State == StateEstablished || p.Uptime != 0 || p.PrefixesSent != 0 {
		t.Errorf("peer %+v", p)
	}
	// Announcing works without any session; it is sent when one comes up.
	if err := s.Withdraw(v); err != nil {
		t.Fatal(err)
	}
	if err := s.Announce(v, VIPAttrs{MED: u32(1)}); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if p := s.Peers()[0]; p.State != StateIdle || p.LastError == "" {
		t.Errorf("after Stop: %+v, want idle with the last error kept", p)
	}
}
