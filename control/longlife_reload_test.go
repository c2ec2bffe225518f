package control

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/health"
)

// llConfig alternates two configurations, as a tool that flips between a
// blue and a green set does: every feature that keeps state across
// reloads is on (checks through the tunnel, passive checks, QUIC routing,
// source-address affinity, second chance, slow start, a load-based
// scheduler), and each flip replaces a backend, reweighs one, removes a
// VIP and adds another.
func llConfig(i int) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 4096").
		Section("control", `slow_start = "5s"`, `drain_timeout = "30s"`).
		Section("health", `kind = "tcp"`, `interval = "50ms"`, `timeout = "40ms"`, `rise = 1`, `fall = 1`).
		VIP("web", configtest.Web, 80, "table_size = 251").
		Sub("[vip.health]", `kind = "http"`, `through = "tunnel"`).
		Backend("be1", "10.0.1.1").
		Backend("be2", "10.0.1.2", fmt.Sprintf("weight = %d", 1+i%2))
	if i%2 == 0 {
		b.Backend("blue", "10.0.1.9")
		b.VIP("q", "203.0.113.11", 443, `protocol = "udp"`, "quic = true", "table_size = 251").
			Backend("qa", "10.0.4.1", "quic_id = 1").
			Backend("qb", "10.0.4.2", "quic_id = 2")
	} else {
		b.Backend("green", "10.0.1.10")
		b.VIP("aff", "203.0.113.12", 8080, `hash = "src-ip"`, "table_size = 251").
			Backend("a1", "10.0.5.1").
			Backend("a2", "10.0.5.2")
		b.VIP("lc", "203.0.113.13", 80, `scheduler = "least-conn"`).
			Backend("l1", "10.0.6.1")
	}
	return b.String()
}

type llFigures struct {
	goroutines                                     int
	heap                                           uint64
	backends, panicked, wasAnnounced, hopWithdrawn int
	onConfig, reloadKeys, checkers                 int
	vipIDs, backendIDs, gens, vipGens, ids, vipMap int
	healthIdents, healthSlots                      int
	workerVIPs, workerBackends, ctLen              int
	rateVIPs                                       int
}

func (f *fixture) llFigures() llFigures {
	var x llFigures
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	x.goroutines, x.heap = runtime.NumGoroutine(), m.HeapAlloc
	p := f.plane
	p.mu.Lock()
	x.backends, x.panicked, x.wasAnnounced, x.hopWithdrawn = len(p.backends), len(p.panicked), len(p.wasAnnounced), len(p.hopWithdrawn)
	x.onConfig, x.reloadKeys = len(p.onConfig), len(p.ops.reloads)
	if p.checks != nil {
		x.checkers = len(p.checks.States())
	}
	p.mu.Unlock()
	svc := f.shared.Services.Load()
	x.vipIDs, x.backendIDs = len(svc.VIPs), len(svc.Backends)
	sv := reflect.ValueOf(svc).Elem()
	x.gens, x.vipGens, x.ids, x.vipMap = sv.FieldByName("gens").Len(), sv.FieldByName("vipGens").Len(), sv.FieldByName("ids").Len(), sv.FieldByName("vipIDs").Len()
	hv := sv.FieldByName("health")
	x.healthIdents, x.healthSlots = hv.FieldByName("byIdent").Len(), hv.FieldByName("backend").Len()
	w := f.lc.w.Local()
	x.workerVIPs, x.workerBackends = len(w.VIPs), len(w.Backends)
	return x
}

// TestProbeAlternatingReloadsBounded: 2,000 reloads flipping between two
// configurations, with traffic, signal folds, status reads and the
// clock moving between them, and health checks running (a prober that
// always passes). Nothing the process keeps may grow with the number of
// reloads: goroutines, heap after GC, every map of the plane and of the
// snapshot (ids, generations, check slots), the worker's counters.
func TestAlternatingReloadsBounded(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 400
	}
	f := newFixture(t, llConfig(0))
	var announced int
	f.plane.SetAnnouncer(func(set []netip.Prefix) { announced = len(set) }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.plane.StartHealth(ctx, health.ManagerOptions{NewProber: func(key string, tg health.Target) (health.Prober, error) {
		return passProber{}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	cycle := func(i int) {
		f.apply(llConfig(i))
		f.advance(700 * time.Millisecond)
		if i%3 == 0 {
			f.lc.send(syn(t, uint16(1000+i%20000), "S"))
			f.lc.send(syn(t, uint16(1000+i%20000), "A"))
		}
		st := f.plane.Status(true)
		f.plane.mu.Lock()
		f.plane.foldSignals(st.Workers, f.plane.now())
		f.plane.mu.Unlock()
		f.rebuild()
	}
	i := 1
	for ; i <= 100; i++ {
		cycle(i)
	}
	f0 := f.llFigures()
	for end := i + n/10; i < end; i++ {
		cycle(i)
	}
	f1 := f.llFigures()
	for end := i + n - n/10; i < end; i++ {
		cycle(i)
	}
	f2 := f.llFigures()
	t.Logf("warm-up: %+v", f0)
	t.Logf("N/10:    %+v", f1)
	t.Logf("N=%d:  %+v (announced %d)", n, f2, announced)
	bad := func(what string, a, b, slack int) {
		if b > a+slack {
			t.Errorf("%s: at most %d after the warm-up and N/10 reloads, %d after N", what, a, b)
		}
	}
	bad("goroutines", max(f0.goroutines, f1.goroutines), f2.goroutines, 10)
	bad("backend states", max(f0.backends, f1.backends), f2.backends, 0)
	bad("panicked", max(f0.panicked, f1.panicked), f2.panicked, 1)                 // per VIP, and a VIP comes and goes with the reloads
	bad("wasAnnounced", max(f0.wasAnnounced, f1.wasAnnounced), f2.wasAnnounced, 1) // per VIP, and a VIP comes and goes with the reloads
	bad("hopWithdrawn", max(f0.hopWithdrawn, f1.hopWithdrawn), f2.hopWithdrawn, 1) // per VIP, and a VIP comes and goes with the reloads
	bad("OnConfig hooks", max(f0.onConfig, f1.onConfig), f2.onConfig, 0)
	bad("reload result keys", max(f0.reloadKeys, f1.reloadKeys), f2.reloadKeys, 0)
	bad("checkers", max(f0.checkers, f1.checkers), f2.checkers, 0)
	bad("VIP ids", max(f0.vipIDs, f1.vipIDs), f2.vipIDs, 0)
	bad("backend ids", max(f0.backendIDs, f1.backendIDs), f2.backendIDs, 0)
	bad("backend generations", max(f0.gens, f1.gens), f2.gens, 0)
	bad("VIP generations", max(f0.vipGens, f1.vipGens), f2.vipGens, 0)
	bad("backend id map", max(f0.ids, f1.ids), f2.ids, 0)
	bad("VIP id map", max(f0.vipMap, f1.vipMap), f2.vipMap, 0)
	bad("check slots (idents)", max(f0.healthIdents, f1.healthIdents), f2.healthIdents, 0)
	bad("check slots (table)", max(f0.healthSlots, f1.healthSlots), f2.healthSlots, 0)
	bad("worker VIP counters", max(f0.workerVIPs, f1.workerVIPs), f2.workerVIPs, 0)
	bad("worker backend counters", max(f0.workerBackends, f1.workerBackends), f2.workerBackends, 0)
	// 100 B a reload (maglev's bounded name cache) is noise; a snapshot
	// or a table kept per reload is kilobytes.
	if d := int64(f2.heap) - int64(f1.heap); d > int64(n)*200 {
		t.Errorf("heap after GC grew %d B over %d reloads (%d B a reload)", d, n-n/10, d/int64(n-n/10))
	}
	if !strings.Contains(llConfig(0), "through") {
		t.Fatal("config lost its tunnel checks")
	}
}

type passProber struct{}

func (passProber) Probe(ctx context.Context, _ netip.AddrPort) (time.Duration, error) {
	return time.Millisecond, nil
}
