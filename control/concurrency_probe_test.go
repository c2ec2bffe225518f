package control

import (
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// A reload that removes VIPs starts a goroutine (clearRemovedVIPs) that
// posts a DropOp per removed VIP id to every worker, one after another,
// each waiting up to 10 s. It belongs to no lifetime: when the workers
// have stopped (shutdown, or a stuck lcore) it outlives Plane.Run by
// 10 s × removed VIPs × workers. After Run returned and the lcores
// stopped, nothing the plane started should still run.
func TestProbeRemovedVIPClearingOutlivesShutdown(t *testing.T) {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 4096").
		Web(2)
	withExtra := b.String()
	for i := range 3 {
		withExtra += configtest.New().VIP("x"+string(rune('a'+i)), "203.0.113.9", 81+i).Backend("x1", "10.0.3.1").String()
	}
	cfg, err := config.Parse([]byte(withExtra), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	shared := &dataplane.Shared{}
	// A worker nobody polls: an lcore that has stopped (shutdown).
	w, err := dataplane.NewWorker(0, shared, cfg.Conntrack, flow.Key{}, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	p, err := New(cfg, shared, []*dataplane.Worker{w}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() { defer close(stopped); p.Run(done) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) { // Run has started
		p.mu.Lock()
		started := p.runDone != nil
		p.mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not start within 5s")
		}
	}
	next, err := config.Parse([]byte(b.String()), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(next); err != nil { // removes three VIPs
		t.Fatal(err)
	}
	close(done)
	<-stopped
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("2s after Run returned, its worker stopped: %d goroutines, want at most %d (the removed VIPs' clearing still waits on a stopped worker)", g, before)
	}
}
