package dataplane

import (
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/sched"
)

// Least connections compares the connections each backend holds at the
// moment of the choice: one that closed no longer counts, as fulcrum-sim
// models it (internal/sim, schedPolicy.choose and RunSlow). Counting only
// the picks since the once-a-second published loads, a worker spread
// short connections as round robin does.
//
// The same case in the dataplane: two backends, X holding one long
// connection, then ten short connections, each closed by the client (FIN,
// then the ACK of the server's FIN) before the next opens, all within one
// second of the last published Loads. At every one of the ten choices X
// holds 1 active flow and the other backend 0, so least-conn's
// (active+1)/weight is 2 against 1: the simulator sends all ten to the
// other backend, none to X.
func TestLeastConnSeesClosedFlows(t *testing.T) {
	r := newRig(t, withScheduler(sched.LeastConn))
	r.publish(Overrides{{"web", "be3"}: {Weight: 0}}) // two backends: be1, be2
	const vip = "203.0.113.7"
	out, v := r.run(frame(t, "198.51.100.30", vip, 40000, 80, layers.IPProtocolTCP, "S", 0, true))
	if v[0] != Tx {
		t.Fatalf("long flow SYN: verdict %v", v[0])
	}
	x, _, _ := decodeTunnel(t, out[0])
	r.run(frame(t, "198.51.100.30", vip, 40000, 80, layers.IPProtocolTCP, "A", 0, true))
	// The control plane's once-a-second view, taken now: X holds 1.
	active := snapshotActive(t, r)
	r.shared.Loads.Store(&Loads{Active: active, Latency: make([]sched.EWMA, len(active))})

	toX := 0
	for i := range 10 {
		sp := uint16(41000 + i)
		var dst = x
		for k, fl := range []string{"S", "A", "PA", "FA", "A"} {
			out, v := r.run(frame(t, "198.51.100.31", vip, sp, 80, layers.IPProtocolTCP, fl, 0, true))
			if v[0] != Tx {
				t.Fatalf("short flow %d %s: verdict %v", i, fl, v[0])
			}
			if k == 0 {
				dst, _, _ = decodeTunnel(t, out[0])
			}
		}
		if dst == x {
			toX++
		}
	}
	if toX != 0 {
		t.Errorf("least-conn sent %d of 10 short connections to %v, which held the only active flow at each choice; "+
			"fulcrum-sim's least connections (a completed request no longer counts) sends it 0", toX, x)
	}
}

// The latency peak-ewma learns from traffic is the handshake: SYN to the
// client's first ACK (Counters HandshakeMs). A connection whose server
// takes 50 ms to answer (data from the client for 50 ms, then its FIN)
// adds 10 ms here, the handshake's time, not 60: an L4 DSR balancer never
// sees a response (README, the simulator).
func TestHandshakeLatencyLeavesOutResponseTime(t *testing.T) {
	r := newRig(t, withScheduler(sched.PeakEWMA))
	const vip = "203.0.113.7"
	for _, fl := range []string{"S", "A", "PA", "PA", "PA", "PA", "PA", "FA", "A"} { // 10 ms a step
		if _, v := r.run(frame(t, "198.51.100.32", vip, 42000, 80, layers.IPProtocolTCP, fl, 0, true)); v[0] != Tx {
			t.Fatalf("%s: verdict %v", fl, v[0])
		}
	}
	var snap Counters
	done := make(chan bool)
	go func() { done <- r.w.Snapshot(&snap, 5*time.Second) }()
	for ok := false; !ok; {
		select {
		case ok = <-done:
		default:
			r.w.Idle(r.now)
		}
	}
	var est, ms uint64
	for _, b := range snap.Backends {
		est += b.Established
		ms += b.HandshakeMs
	}
	if est != 1 || ms != 10 {
		t.Errorf("established %d, handshake ms %d; want 1 and 10", est, ms)
	}
}
