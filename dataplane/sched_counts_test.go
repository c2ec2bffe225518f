package dataplane

import (
	"net/netip"
	"time"

	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/sched"
)

// Round robin rotates over a VIP's backends whatever the rate of new
// flows: a new snapshot that changes nothing for the VIP (the control
// plane rebuilds one every second while any backend of any VIP slow-starts,
// and on every health verdict) must not restart the rotation at the first
// backend. Here each new flow is followed by such a snapshot; 6 flows over
// web's 3 equal backends give each 2.
func TestRoundRobinSurvivesUnrelatedSnapshots(t *testing.T) {
	r := newRig(t, withScheduler(sched.RoundRobin))
	got := map[string]int{}
	for i := range 6 {
		out, v := r.run(frame(t, "198.51.100.20", "203.0.113.7", uint16(20000+i), 80, layers.IPProtocolTCP, "S", 0, true))
		if v[0] != Tx {
			t.Fatalf("flow %d: verdict %v, want Tx", i, v[0])
		}
		dst, _, _ := decodeTunnel(t, out[0])
		got[dst.String()]++
		r.publish(nil) // the same configuration, republished
	}
	for _, a := range []string{"10.0.1.1", "10.0.1.2", "2001:db8:1::3"} {
		if got[a] != 2 {
			t.Errorf("new flows per backend %v; want 2 each on 10.0.1.1, 10.0.1.2, 2001:db8:1::3", got)
			break
		}
	}
}

// snapshotActive is the Active of every backend id as the control plane
// reads it once a second (Worker.Snapshot, served between bursts).
func snapshotActive(t *testing.T, r *rig) []int64 {
	t.Helper()
	var snap Counters
	done := make(chan bool)
	go func() { done <- r.w.Snapshot(&snap, 5*time.Second) }()
	for {
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("no snapshot")
			}
			out := make([]int64, len(snap.Backends))
			for id := range snap.Backends {
				out[id] = snap.Backends[id].Active
			}
			return out
		default:
			r.w.Idle(r.now)
		}
	}
}

// least-conn ranks by active flows (README, "Choosing a scheduler"): a
// connection the client closed (FIN, then the ACK of the server's FIN) is
// not active, and the status's flow count (CountFlowsOp) already leaves it
// out. The scheduler's load signal, Counters.Backends[].Active, still
// counts it for tcp_closing (120 s): a backend that just served many short
// connections looks loaded and least-conn keeps new flows off it.
func TestLeastConnActiveLeavesClosedConnections(t *testing.T) {
	r := newRig(t, withScheduler(sched.LeastConn))
	be1 := backendAddr(r, "web", "be1")
	// Only be1 takes new flows while 20 connections open and close.
	r.publish(Overrides{{"web", "be2"}: {Weight: 0}, {"web", "be3"}: {Weight: 0}})
	for i := range 20 {
		sp := uint16(30000 + i)
		for _, fl := range []string{"S", "A", "PA", "FA", "A"} {
			out, v := r.run(frame(t, "198.51.100.21", "203.0.113.7", sp, 80, layers.IPProtocolTCP, fl, 0, true))
			if d, _, _ := decodeTunnel(t, out[0]); v[0] != Tx || d != be1 {
				t.Fatalf("conn %d %s: verdict %v to %v, want Tx to be1", i, fl, v[0], d)
			}
		}
	}
	r.publish(nil)
	svc := r.shared.Services.Load()
	count := CountFlowsOp()
	serve(t, r, count)
	id := svc.LookupVIP(netip.MustParseAddr("203.0.113.7"), 80, 6).Members[0]
	if svc.Backends[id].Name != "be1" {
		t.Fatalf("member 0 is %s", svc.Backends[id].Name)
	}
	active := snapshotActive(t, r)
	if count.Flows[id] != 0 || active[id] != 0 {
		t.Errorf("be1 after its 20 connections closed: %d flows in use (status), active %d for the scheduler; want 0 and 0", count.Flows[id], active[id])
	}
}
