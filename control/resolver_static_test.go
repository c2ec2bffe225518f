package control

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/exception"
)

// TestResolverStaticNextHopPublishesOnce: with a static next_hop_mac the
// plane has no gateway to resolve (Gateways is empty), and the resolver's
// one answer (nothing resolved for no gateway) is the right one. The
// resolver, wired to the plane as fulcrum run wires it, must not give that
// answer again every round (each one an Info "next hop changed" line and a
// SetNextHop under the plane's lock, every second for the daemon's life).
func TestResolverStaticNextHopPublishesOnce(t *testing.T) {
	f := newFixture(t, baseConfig) // next_hop_mac = "02:00:00:00:00:fe"
	var rounds, pubs atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &exception.Resolver{Interval: time.Millisecond}
	go func() {
		defer close(done)
		r.Run(ctx, func() exception.Gateways {
			rounds.Add(1)
			v4, v6 := f.plane.Gateways()
			return exception.Gateways{IPv4: v4, IPv6: v6}
		}, f.plane.GatewaysChanged(), func(g exception.Gateways, nh dataplane.NextHop) bool {
			pubs.Add(1)
			return f.plane.SetNextHop(g.IPv4, g.IPv6, nh)
		})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for rounds.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if n := rounds.Load(); n < 20 {
		t.Fatalf("only %d resolver rounds", n)
	}
	if n := pubs.Load(); n > 1 {
		t.Errorf("static next hop: the resolver published %d times in %d rounds, want once", n, rounds.Load())
	}
}
