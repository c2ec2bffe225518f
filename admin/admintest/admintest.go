// Package admintest runs a real control plane for tests of the admin API
// and its clients: a control.Plane over one pure-Go dataplane worker that a
// goroutine drives as an lcore would (it forwards the frames it is given
// and, between them, serves counter snapshots and posted operations). No
// DPDK, no mocks: packets sent with Send go through the real fast path and
// show up in the plane's counters and conntrack.
package admintest

import (
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/flow"
)

// Config is a test configuration with two VIPs:
//
//   - "web", 203.0.113.7:80/tcp, backends be1..be4 (10.0.1.1-4, weight 1,
//     be4 weight 2), no health checks: all usable;
//   - "dns", 203.0.113.8:53/udp, backends ns1, ns2 with TCP health checks.
//     Nothing runs the checks, so both stay "unknown" ("not checked yet"),
//     routed like up, and the plane is converging until Verdict (or
//     SetHealth) gives each a first verdict. Both down puts the VIP in
//     panic mode (fail open); one down of two does not.
var Config = configtest.New().
	Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
	Section("conntrack", "capacity = 65536").
	Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
	Web(3).
	Backend("be4", "10.0.1.4", "weight = 2").
	VIP("dns", "203.0.113.8", 53, `protocol = "udp"`).
	Sub("[vip.health]", `kind = "tcp"`).
	Backend("ns1", "10.0.2.1").
	Backend("ns2", "10.0.2.2").
	String()

// Plane is a running control plane with one worker.
type Plane struct {
	*control.Plane
	// File is the configuration file the plane was loaded from; rewrite it
	// to test reloads.
	File   string
	Worker *dataplane.Worker

	lc *dptest.Lcore
}

// New writes toml to a file in a temporary directory, loads it and starts
// the plane (with its rebuild loop) and the worker's lcore goroutine. Both
// stop when the test ends.
func New(t testing.TB, toml string) *Plane {
	t.Helper()
	file := filepath.Join(t.TempDir(), "fulcrum.toml")
	if err := os.WriteFile(file, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	shared := &dataplane.Shared{}
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	lc := dptest.NewLcore(t, shared, cfg.Conntrack, key)
	log := slog.New(slog.DiscardHandler)
	plane, err := control.New(cfg, shared, []*dataplane.Worker{lc.Worker}, log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() { defer close(stopped); plane.Run(done) }()
	t.Cleanup(func() { close(done); <-stopped })
	return &Plane{Plane: plane, File: file, Worker: lc.Worker, lc: lc}
}

// Result is what the worker did with a frame.
type Result = dptest.Result

// Client, TCP and UDP build test frames (see package dptest).
var (
	Client = dptest.Client
	TCP    = dptest.TCP
	UDP    = dptest.UDP
)

// Send runs one frame through the worker's fast path.
func (p *Plane) Send(frame []byte) Result { return p.lc.Send(frame) }

// Backend is the address of a backend in the running configuration.
func (p *Plane) Backend(t testing.TB, vip, name string) netip.Addr {
	t.Helper()
	for _, v := range p.Config().VIPs {
		for _, b := range v.Backends {
			if v.Name == vip && b.Name == name {
				return b.Address.Addr
			}
		}
	}
	t.Fatalf("no backend %s/%s", vip, name)
	return netip.Addr{}
}

// Verdict records a health check verdict for a backend, as a health
// checker would, and waits until a snapshot built after it is published,
// so the dataplane, Status and Panicked all reflect it.
func (p *Plane) Verdict(t testing.TB, vip, name string, up bool) {
	t.Helper()
	reason := "test: check failed"
	if up {
		reason = "test: check passed"
	}
	if err := p.SetHealth(vip, name, up, reason); err != nil {
		t.Fatal(err)
	}
	// A rebuild holds the plane's lock throughout, so one counted after
	// this read started after the verdict; the Kick makes sure one comes
	// (SetHealth kicks only when the verdict changes something).
	n, _ := p.RebuildStats()
	p.Kick()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if m, _ := p.RebuildStats(); m > n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: no rebuild within 5s of the verdict (up=%v)", vip, name, up)
		}
	}
}
