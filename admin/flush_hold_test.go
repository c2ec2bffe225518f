package admin_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/flow"
)

// A flush waits for every worker (up to 10 s each: connsOpTimeout). Since
// backend actions run under Plane.HoldReloads, a reload that arrives
// meanwhile (SIGHUP: the daemon's main loop, which also serves SIGTERM;
// or fulcrumctl reload) waits for the whole flush, and a worker that is
// busy until the reload is through fails the flush. Here the second
// worker serves its operations only once the reload is done: the flush
// must still succeed (the look-up is what needs the hold, not the
// workers' operation on an incarnation already found).
func TestFlushDoesNotHoldReloadsWhileWorkersWork(t *testing.T) {
	cfg, lc, late, plane := handDrivenWorkerPlane(t, slog.New(slog.DiscardHandler))
	file := cfg.File
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() { defer close(stopped); plane.Run(done) }()
	t.Cleanup(func() { close(done); <-stopped })

	// The second worker starts polling once the reload is through.
	reloaded := make(chan error, 1)
	polling := make(chan struct{})
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		err := <-reloaded
		reloaded <- err
		for {
			select {
			case <-polling:
				return
			default:
			}
			late.Idle(conntrack.Time(0))
			time.Sleep(100 * time.Microsecond)
		}
	}()
	t.Cleanup(func() { close(polling); <-pollDone })

	p := &admintest.Plane{Plane: plane, File: file, Worker: lc.Worker}
	e := serve(t, p, loopback(), file, func(s *admin.Server) {
		s.SetAfterResolve(func() {
			go func() { reloaded <- plane.Reload(file) }()
			s.SetAfterResolve(nil)
		})
	})
	code, out := e.call("POST", api.ActionPath("web", "be1", api.ActionFlush), "")
	var fl api.Flush
	if code != 200 || json.Unmarshal(out, &fl) != nil {
		t.Errorf("flush: %d %s, want 200: the reload waited for the flush, and the flush for a worker busy until the reload was through", code, out)
	}
	select {
	case err := <-reloaded:
		reloaded <- err
		if err != nil {
			t.Errorf("reload: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no reload within 30 s")
	}
}

// handDrivenWorkerPlane is a plane on admintest.Config's file (returned)
// with two workers: an lcore that polls, and worker 1, which nothing
// drives but the test (it serves snapshots and operations only when the
// test calls its Idle or Process).
func handDrivenWorkerPlane(t *testing.T, log *slog.Logger) (*config.Config, *dptest.Lcore, *dataplane.Worker, *control.Plane) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "fulcrum.toml")
	if err := os.WriteFile(file, []byte(admintest.Config), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	shared := &dataplane.Shared{}
	lc := dptest.NewLcore(t, shared, cfg.Conntrack, key)
	w1, err := dataplane.NewWorker(1, shared, cfg.Conntrack, key, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	plane, err := control.New(cfg, shared, []*dataplane.Worker{lc.Worker, w1}, log)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, lc, w1, plane
}
