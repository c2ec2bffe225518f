package exception

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// warnCount is a slog handler that counts the records at Warn or above.
type warnCount struct{ n *atomic.Int64 }

func (h warnCount) Enabled(context.Context, slog.Level) bool { return true }
func (h warnCount) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.n.Add(1)
	}
	return nil
}
func (h warnCount) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h warnCount) WithGroup(string) slog.Handler      { return h }

// TestResolverClaimWarningBounded: a station on the LAN that
// claims the gateway's address in turn at two MACs (one gratuitous ARP
// request each, any rate over the kernel's locktime) gets a "gateway
// claimed at another MAC" warning written for every claim the resolver
// sees (one a second per family with the daemon's 1 s rounds, for as
// long as the attack lasts): the de-duplication keeps only the last
// claimed MAC, which alternation defeats. The log's volume then grows
// with the attacker's packets, without bound, where one warning (and a
// count) would do.
// claimedLAN is a LAN whose gateway entry claims override at once
// (locktime 0; the default, 1 s, only slows an attacker to one claim a
// second), a resolver on it at 10 ms rounds that counts its warnings, and
// the gateway's first answer published.
func claimedLAN(t *testing.T, name string) (*lan, *atomic.Int64) {
	t.Helper()
	l := newLAN(t, name)
	in(t, l.lbNSh, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/neigh/"+l.lbIf+"/locktime", []byte("0"), 0o644)
	})
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, [6]byte{2, 0, 0, 0, 0, 0xaa}, netlink.NUD_REACHABLE)
	warns := new(atomic.Int64)
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: 10 * time.Millisecond, Log: slog.New(warnCount{warns})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	first := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: l.gwAddr} }, nil, func(Gateways, dataplane.NextHop) bool {
			once.Do(func() { close(first) })
			return true
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-first
	return l, warns
}

func TestResolverClaimWarningBounded(t *testing.T) {
	l, warns := claimedLAN(t, "rcl")
	claim := func(t *testing.T, mac [6]byte) {
		t.Helper()
		l.send(t, arp(1, mac, mac, l.gwAddr, l.lbAddr))
		// The resolver saw the claim once it poked the STALE entry
		// (the kernel moves it to DELAY).
		deadline := time.Now().Add(5 * time.Second)
		for {
			if m, st, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr); ok && m == mac && st&netlink.NUD_STALE == 0 {
				return
			}
			if time.Now().After(deadline) {
				m, st, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
				t.Fatalf("claim at %x not seen by the resolver within 5s (entry %x state %#x)", mac, m, st)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	macs := [2][6]byte{{2, 0, 0, 0, 0, 0x61}, {2, 0, 0, 0, 0, 0x62}}
	for i := range 4 {
		claim(t, macs[i%2])
	}
	n4 := warns.Load()
	for i := range 40 {
		claim(t, macs[i%2])
	}
	n44 := warns.Load()
	if n4 == 0 {
		t.Fatalf("no warning after 4 claims (precondition)")
	}
	if n44 > n4+1 {
		t.Fatalf("%d warnings after 4 alternating claims, %d after 44: the log grows with the attacker's packets", n4, n44)
	}
}
