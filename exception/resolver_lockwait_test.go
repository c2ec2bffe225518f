package exception

import (
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestResolverLockWaitIsNoPause: gateways() (control.Plane.Gateways)
// takes the control plane's lock, which a rebuild holds for seconds at a
// large configuration (docs/benchmarks.md: 0.47 s to 20.7 s). A round
// that waited that long for the lock is no pause of the process: the
// rest of it ran, the exception tap was read, and the kernel's probes of
// the gateway went out and were answered if it was there. An entry that
// failed meanwhile says the gateway is gone, as in any round: it must be
// published unresolved at once, not held again as after a SIGSTOP (which
// republishes a dead gateway's MAC and, repeated within NextHopGrace,
// keeps the VIPs announced while everything is sent to it).
func TestResolverLockWaitIsNoPause(t *testing.T) {
	var gate atomic.Pointer[chan struct{}]
	blocked := make(chan struct{}, 1)
	var after atomic.Int32 // gateways() calls since the lock was released
	second := make(chan struct{}, 1)
	var released atomic.Bool
	l := dualGatewayLAN(t, "lkw")
	gws := func() Gateways {
		if c := gate.Load(); c != nil {
			select {
			case blocked <- struct{}{}:
			default:
			}
			<-*c // the plane's lock, held by a rebuild
		}
		if released.Load() && after.Add(1) == 2 {
			select {
			case second <- struct{}{}:
			default:
			}
		}
		return Gateways{IPv4: l.gwAddr}
	}
	in(t, l.lbNSh, func() error {
		for k, v := range map[string]string{"delay_first_probe_time": "1", "retrans_time_ms": "100"} {
			if err := os.WriteFile("/proc/sys/net/ipv4/neigh/"+l.lbIf+"/"+k, []byte(v), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	pubs := startResolver(t, l, 50*time.Millisecond, gws)
	if nh := <-pubs; !nh.Has4 || nh.MAC4 != l.peerMAC {
		t.Fatalf("first publication %+v", nh)
	}
	g := make(chan struct{})
	gate.Store(&g)
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the resolver did not reach its next round")
	}
	// The gateway leaves while the resolver waits for the lock; the
	// kernel verifies its entry (its own traffic) and, with no answer,
	// fails it. The process runs: that failure is the gateway's.
	gatewayLeaves(t, l)
	released.Store(true)
	gate.Store(nil)
	close(g)
	// The round that waited for the lock saw the entry FAILED: by the
	// time the next round asks for the gateways, it has published the
	// gateway unresolved.
	select {
	case <-second:
	case <-time.After(15 * time.Second):
		t.Fatal("the resolver ran no second round after the lock was released")
	}
	for {
		select {
		case nh := <-pubs:
			if !nh.Has4 {
				return
			}
			t.Fatalf("published %+v for a gateway whose entry failed", nh)
		default:
			t.Fatalf("the round after a 1 s+ wait for the plane's lock held the FAILED gateway %v at %v (published nothing): a lock wait was taken for a pause of the process",
				l.gwAddr, net.HardwareAddr(l.peerMAC[:]))
		}
	}
}
