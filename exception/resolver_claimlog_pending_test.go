package exception

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestResolverSuppressedClaimReported: a claim at another MAC within a minute
// of the last warning is counted, but the count is written only with the
// next claim after the minute: a station that claims the gateway once,
// 30 s after a router's MAC change was warned of, is never in the log.
// (The minute is 2 s here.)
func TestResolverSuppressedClaimReported(t *testing.T) {
	was := claimLogEvery
	claimLogEvery = 2 * time.Second // the minute, shortened
	t.Cleanup(func() { claimLogEvery = was })
	l := newLAN(t, "y9cl")
	in(t, l.lbNSh, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/neigh/"+l.lbIf+"/locktime", []byte("0"), 0o644)
	})
	real := [6]byte{2, 0, 0, 0, 0, 0xaa}
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, real, netlink.NUD_REACHABLE)
	var warns atomic.Int64
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: 10 * time.Millisecond, Log: slog.New(warnCount{&warns})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	first := make(chan struct{}, 1)
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: l.gwAddr} }, nil, func(Gateways, dataplane.NextHop) bool {
			select {
			case first <- struct{}{}:
			default:
			}
			return true
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-first
	wait := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	a, b := [6]byte{2, 0, 0, 0, 0, 0x61}, [6]byte{2, 0, 0, 0, 0, 0x62}
	l.send(t, arp(1, a, a, l.gwAddr, l.lbAddr))
	wait("first claim warned", func() bool { return warns.Load() == 1 })
	l.send(t, arp(1, b, b, l.gwAddr, l.lbAddr))
	wait("second claim seen", func() bool {
		m, st, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
		return ok && m == b && st&netlink.NUD_STALE == 0
	})
	deadline := time.Now().Add(claimLogEvery + 5*time.Second)
	for warns.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the claim at %x, %v after the last warning, never written (%d warnings)", b, claimLogEvery+5*time.Second, warns.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
