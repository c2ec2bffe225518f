package dataplane

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
)

// idleLoop runs r's worker as its lcore would between bursts (idle polls)
// until stop is closed, so that Snapshot gets served.
func idleLoop(r *rig, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			r.w.Idle(r.now)
			runtime.Gosched() // more lcores than CPUs here
		}
	}()
	return done
}

func snapshotOrFail(t *testing.T, r *rig, dst *Counters) {
	t.Helper()
	if !r.w.Snapshot(dst, 5*time.Second) {
		t.Fatal("snapshot timed out")
	}
}

// The counts are the whole process's (runtime.MemStats): the Go runtime
// itself sometimes makes a small allocation while goroutines sleep and
// yield (one of 16 or 32 bytes in a 20 ms span with no snapshot at all),
// and goroutines other tests left behind (the DPDK build's log reader,
// quic-go's timers winding down) add a few more. The test looks for what
// a regression costs, an allocation in every snapshot (a fresh Counters is
// kilobytes, 5 MB before round 3), so it tolerates one allocation in
// every 25 snapshots and 64 bytes per snapshot over a long run.
const (
	snapshotCycles     = 1000
	runtimeNoiseAllocs = snapshotCycles / 25
	runtimeNoiseBytes  = snapshotCycles * 64
)

func TestSnapshotReusesItsMemory(t *testing.T) {
	r := newRig(t, testConfig)
	r.run(frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true))
	stop := make(chan struct{})
	done := idleLoop(r, stop)
	defer func() { close(stop); <-done }()

	var dst Counters
	for i := 0; i < 50; i++ { // warm-up: the first snapshot sizes dst; the runtime starts its threads
		snapshotOrFail(t, r, &dst)
	}
	var before, after runtime.MemStats
	// Finish any GC cycle the package's earlier tests started: one that
	// ends during the loop would be counted against the snapshots.
	runtime.GC()
	runtime.ReadMemStats(&before)
	const cycles = snapshotCycles
	for i := 0; i < cycles; i++ {
		snapshotOrFail(t, r, &dst)
	}
	runtime.ReadMemStats(&after)
	if n, b := after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc; (n > runtimeNoiseAllocs || b > runtimeNoiseBytes) && !raceEnabled {
		t.Errorf("%d snapshots allocated %d times (%d bytes)", cycles, n, b)
	}
	if n := after.NumGC - before.NumGC; n != 0 {
		t.Errorf("%d GC cycles during %d snapshots", n, cycles)
	}
	if dst.RxPackets != 1 || dst.Flows != 1 {
		t.Errorf("snapshot: rx %d flows %d, want 1 and 1", dst.RxPackets, dst.Flows)
	}
}

// The counters hold the ids of the Services snapshot, not MaxBackends, and
// grow when a reload adds backends: at the worker's next burst, not
// before (until then a reader sees the old ids, and zero for the new).
func TestCountersFollowTheSnapshot(t *testing.T) {
	r := newRig(t, testConfig)
	r.run(frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true))
	stop := make(chan struct{})
	done := idleLoop(r, stop)
	var snap Counters
	snapshotOrFail(t, r, &snap)
	svc := r.shared.Services.Load()
	if len(snap.VIPs) != len(svc.VIPs) || len(snap.Backends) != svc.NumBackendIDs() || len(snap.Backends) != 5 {
		t.Fatalf("snapshot holds %d VIPs and %d backends, want %d and %d (5)", len(snap.VIPs), len(snap.Backends), len(svc.VIPs), svc.NumBackendIDs())
	}
	var pkts uint64
	for id := range snap.Backends {
		pkts += snap.Backends[id].Packets
	}
	if pkts != 1 || snap.VIP(svc.VIPs[0].ID).Packets+snap.VIP(svc.VIPs[1].ID).Packets != 1 {
		t.Errorf("backend packets %d, want 1", pkts)
	}

	// A reload with 40 more backends in the first VIP.
	var more strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&more, "  [[vip.backend]]\n  name = \"x%d\"\n  address = \"10.0.2.%d\"\n", i, i+1)
	}
	cfg := strings.Replace(testConfig, "\n[[vip]]\nname = \"web6\"", more.String()+"\n[[vip]]\nname = \"web6\"", 1)
	r2 := newRig(t, cfg)
	r.cfg = r2.cfg
	svc = r.publish(nil)
	if svc.NumBackendIDs() != 45 {
		t.Fatalf("reloaded snapshot has %d backend ids, want 45", svc.NumBackendIDs())
	}
	// The worker has not seen it (idle polls only): the old ids.
	snapshotOrFail(t, r, &snap)
	if len(snap.Backends) != 5 || snap.Backend(44) != (PacketBytes{}) {
		t.Errorf("before the worker's next burst: %d backends, id 44 %+v; want 5 and zero", len(snap.Backends), snap.Backend(44))
	}
	close(stop)
	<-done

	// New flows after the reload reach the new backends' counters.
	var frames [][]byte
	for i := 0; i < 400; i++ {
		frames = append(frames, frame(t, "198.51.100.11", "203.0.113.7", uint16(1000+i), 80, layers.IPProtocolTCP, "S", 0, true))
	}
	for i := 0; i < len(frames); i += MaxBurst {
		r.run(frames[i:min(i+MaxBurst, len(frames))]...)
	}
	stop = make(chan struct{})
	done = idleLoop(r, stop)
	defer func() { close(stop); <-done }()
	snapshotOrFail(t, r, &snap)
	if len(snap.Backends) != 45 {
		t.Fatalf("after a burst: %d backends, want 45", len(snap.Backends))
	}
	var newIDs, all uint64
	for id := range snap.Backends {
		all += snap.Backends[id].Packets
		if id >= 5 {
			newIDs += snap.Backends[id].Packets
		}
	}
	if all != 401 || newIDs == 0 {
		t.Errorf("backend packets: %d in all (want 401), %d to the new backends (want some)", all, newIDs)
	}
	if snap.Backend(45) != (PacketBytes{}) || snap.VIP(4000) != (PacketBytes{}) {
		t.Error("an id beyond the snapshot does not read zero")
	}
}

// BenchmarkSnapshot is one stats reading of one worker, its memory reused
// (bytes/op is what a periodic reader allocates per snapshot).
func BenchmarkSnapshot(b *testing.B) {
	r := newRig(&testing.T{}, testConfig)
	stop := make(chan struct{})
	done := idleLoop(r, stop)
	defer func() { close(stop); <-done }()
	var dst Counters
	b.ReportAllocs()
	for b.Loop() {
		r.w.Snapshot(&dst, 5*time.Second)
	}
}

// BenchmarkSnapshotFresh is one reading into a new Counters each time, as
// the daemon's stats and admin paths did before they kept theirs.
func BenchmarkSnapshotFresh(b *testing.B) {
	r := newRig(&testing.T{}, testConfig)
	stop := make(chan struct{})
	done := idleLoop(r, stop)
	defer func() { close(stop); <-done }()
	b.ReportAllocs()
	for b.Loop() {
		var dst Counters
		r.w.Snapshot(&dst, 5*time.Second)
	}
}
