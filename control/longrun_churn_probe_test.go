package control

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/health"
)

// Long-running churn probes: what the control plane accumulates over
// thousands of reloads (new backend and VIP names and addresses), operator
// loops (drain, undrain, weight) and real health checks on loopback.

func lrFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func lrHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

type lrCount struct {
	mu           sync.Mutex
	lines, bytes int
}

func (c *lrCount) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines += bytes.Count(p, []byte{'\n'})
	c.bytes += len(p)
	return len(p), nil
}

func (c *lrCount) get() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines, c.bytes
}

type lrFigures struct {
	goroutines, fds                                int
	heap                                           uint64
	backends, panicked, wasAnnounced, hopWithdrawn int
	onConfig, reloadKeys                           int
	vipIDs, backendIDs, checkers                   int
	workerVIPs, workerBackends                     int
	logLines, logBytes                             int
	maxGen                                         uint32
}

func (f *fixture) lrFigures(t *testing.T, sink *lrCount) lrFigures {
	var x lrFigures
	x.goroutines, x.fds, x.heap = runtime.NumGoroutine(), lrFDs(t), lrHeap()
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
	for _, b := range svc.Backends {
		if b != nil {
			x.maxGen = max(x.maxGen, b.Gen)
		}
	}
	w := f.lc.w.Local()
	x.workerVIPs, x.workerBackends = len(w.VIPs), len(w.Backends)
	if sink != nil {
		x.logLines, x.logBytes = sink.get()
	}
	return x
}

// lrConfig: web with be1..be3 fixed and one backend renamed and moved on
// every reload; every other reload a VIP (new name, address and port)
// with a backend; all checked over HTTP at 20 ms.
func lrConfig(i int) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 4096").
		Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
		Section("health", `kind = "http"`, `path = "/healthz"`, `interval = "20ms"`, `timeout = "15ms"`, `rise = 1`, `fall = 1`).
		VIP("web", configtest.Web, 80, "table_size = 251").
		Backend("be1", "10.0.1.1").
		Backend("be2", "10.0.1.2").
		Backend("be3", "10.0.1.3").
		Backend(fmt.Sprintf("lrx%d", i), fmt.Sprintf("10.%d.%d.%d", 10+i>>16&127, i>>8&255, i&255|1))
	if i%2 == 0 {
		b.VIP(fmt.Sprintf("v%d", i), fmt.Sprintf("203.0.%d.%d", 114+i>>8&15, i&255|1), 80+i%1000, "table_size = 251").
			Backend("o1", fmt.Sprintf("10.200.%d.%d", i>>8&255, i&255|1))
	}
	return b.String()
}

// lrServer is a loopback HTTP health endpoint; flap makes it answer 503
// on every other request.
func lrServer(t *testing.T, flap bool) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if flap && n.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return netip.MustParseAddrPort(ln.Addr().String())
}

// TestProbeReloadOperatorHealthChurnBounded: a plane running its loop
// with real HTTP checks of loopback servers (one of them flapping),
// reloaded N and 10N times with new names and addresses, and between
// reloads an operator drains, undrains and reweighs. Goroutines, fds,
// heap after GC, every map of the plane and of the snapshot, the
// worker's counter arrays and the log volume per cycle.
func TestProbeReloadOperatorHealthChurnBounded(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 50
	}
	sink := &lrCount{}
	f := newFixture(t, lrConfig(0))
	f.plane.log = slog.New(slog.NewJSONHandler(sink, nil))
	f.plane.now = time.Now
	steady, flappy := lrServer(t, false), lrServer(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); f.plane.Run(ctx.Done()) }()
	defer func() { cancel(); <-runDone }()
	if err := f.plane.StartHealth(ctx, health.ManagerOptions{NewProber: func(key string, tg health.Target) (health.Prober, error) {
		inner, err := health.NewProber(tg.Config)
		if err != nil {
			return nil, err
		}
		to := steady
		if strings.Contains(key, "/lrx") {
			to = flappy // the churned backend's endpoint flaps
		}
		return redirect{inner, func(netip.AddrPort) netip.AddrPort { return to }}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	cycle := func(i int) {
		if err := f.plane.Apply(mustParse(t, lrConfig(i))); err != nil {
			t.Fatal(err)
		}
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(f.plane.Drain("web", "be1"))
		must(f.plane.Undrain("web", "be1"))
		must(f.plane.SetWeight("web", "be2", 1+i%7))
		if i%2 == 0 {
			must(f.plane.Drain(fmt.Sprintf("v%d", i), "o1"))
		}
		if i%50 == 0 {
			f.lc.send(syn(t, uint16(1000+i%5000), "S"))
			f.plane.Status(true)
			time.Sleep(25 * time.Millisecond) // a check round or so
		}
	}
	i := 1
	for ; i <= 20; i++ {
		cycle(i)
	}
	f0 := f.lrFigures(t, sink)
	for end := i + n; i < end; i++ {
		cycle(i)
	}
	f1 := f.lrFigures(t, sink)
	for end := i + 9*n; i < end; i++ {
		cycle(i)
	}
	f2 := f.lrFigures(t, sink)
	t.Logf("warm-up:  %+v", f0)
	t.Logf("N=%d:    %+v", n, f1)
	t.Logf("10N=%d: %+v", 10*n, f2)
	t.Logf("log a cycle: N: %.1f records %.0f B; N..10N: %.1f records %.0f B",
		float64(f1.logLines-f0.logLines)/float64(n), float64(f1.logBytes-f0.logBytes)/float64(n),
		float64(f2.logLines-f1.logLines)/float64(9*n), float64(f2.logBytes-f1.logBytes)/float64(9*n))
	bad := func(what string, a, b int, slack int) {
		if b > a+slack {
			t.Errorf("%s: %d after N, %d after 10N", what, a, b)
		}
	}
	// In-flight checks (5 checkers, each a goroutine, a dial and an HTTP
	// transport's at any moment) move these by a few each; a leak over 9N
	// cycles would show as hundreds.
	bad("goroutines", f1.goroutines, f2.goroutines, 3*5+2)
	bad("fds", f1.fds, f2.fds, 2*5+2)
	bad("backend states", f1.backends, f2.backends, 0)
	bad("panicked", f1.panicked, f2.panicked, 0)
	bad("wasAnnounced", f1.wasAnnounced, f2.wasAnnounced, 0)
	bad("hopWithdrawn", f1.hopWithdrawn, f2.hopWithdrawn, 0)
	bad("OnConfig hooks", f1.onConfig, f2.onConfig, 0)
	bad("VIP ids", f1.vipIDs, f2.vipIDs, 0)
	bad("backend ids", f1.backendIDs, f2.backendIDs, 0)
	bad("checkers", f1.checkers, f2.checkers, 0)
	bad("worker VIP counters", f1.workerVIPs, f2.workerVIPs, 0)
	bad("worker backend counters", f1.workerBackends, f2.workerBackends, 0)
	if d := int64(f2.heap) - int64(f1.heap); d > 2<<20 {
		t.Errorf("heap after GC grew %d B from N to 10N (%d B a cycle)", d, d/int64(9*n))
	}
	if l := float64(f2.logLines-f1.logLines) / float64(9*n); l > 12 {
		t.Errorf("%.1f log records a cycle", l)
	}
}

// TestProbeApplyHeapFlat: heap after GC over many reloads that replace a
// backend and a VIP, without health or loop: the growth from N to 10N
// reloads, per reload. It failed by about one config text a reload (see
// TestProbeReloadRetainsConfigText). What remains is maglev's cache of
// the new names' hashes (about 100 B a name, bounded at keyHashesMax).
func TestProbeApplyHeapFlat(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 100
	}
	f := newFixture(t, lrConfig(0))
	i := 1
	apply := func() {
		if err := f.plane.Apply(mustParse(t, lrConfig(i))); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for range 100 {
		apply()
	}
	h0 := lrHeap()
	for range n {
		apply()
	}
	h1 := lrHeap()
	for range 9 * n {
		apply()
	}
	h2 := lrHeap()
	per := float64(int64(h2)-int64(h1)) / float64(9*n)
	t.Logf("heap after GC: %d B after warm-up, %d after N=%d, %d after 10N (%.1f B a reload from N to 10N; the config text is %d B)", h0, h1, n, h2, per, len(lrConfig(i)))
	if per > 200 {
		t.Errorf("heap grows %.1f B a reload (a cache entry is about 100)", per)
	}
}

// bigConfig is a configuration of about 20 KB (web with 200 fixed
// backends, each with a comment, as generated files have) in which one
// backend's name changes with i.
func bigConfig(i int) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 4096").
		VIP("web", configtest.Web, 80, "table_size = 4099")
	for j := range 200 {
		b.Backend(fmt.Sprintf("fixed-backend-%03d", j), fmt.Sprintf("10.1.%d.%d", j/250, j%250+1), "weight = 1")
	}
	b.Backend(fmt.Sprintf("churned-%d", i), fmt.Sprintf("10.%d.%d.%d", 10+i>>16&127, i>>8&255, i&255|1))
	return b.String()
}

// TestProbeReloadRetainsConfigText: a configuration-management tool that
// renames (or replaces) one backend per reload. Every configuration
// parsed is garbage once the next is in force, so the heap after GC
// should not grow with the reloads. It grew by about the size of the
// whole configuration file per reload (fixed: the cache copies its keys):
// maglev's package-level keyHashes
// cache (maglev.go, makeTurns) keeps each new backend name as a map key,
// and the name is a substring of the file's text as the TOML decoder
// read it (toml parses string(data) and its strings share that memory),
// so the cache pins one whole file text per new name, up to
// keyHashesMax (65,536) of them.
func TestProbeReloadRetainsConfigText(t *testing.T) {
	n := 30 // a kept text shows as 20 KB a reload; the cache entry as 100 B
	if testing.Short() {
		n = 10
	}
	f := newFixture(t, bigConfig(0))
	size := len(bigConfig(1))
	i := 1
	apply := func(k int) {
		for range k {
			if err := f.plane.Apply(mustParse(t, bigConfig(i))); err != nil {
				t.Fatal(err)
			}
			i++
		}
	}
	apply(10)
	h0 := lrHeap()
	apply(n)
	h1 := lrHeap()
	apply(9 * n)
	h2 := lrHeap()
	runtime.KeepAlive(f)
	per := float64(int64(h2)-int64(h1)) / float64(9*n)
	t.Logf("config text %d B; heap after GC: %d B after warm-up, %d after N=%d (+%d), %d after 10N=%d (+%d from N: %.0f B a reload, %.2f config texts)",
		size, h0, h1, n, int64(h1)-int64(h0), h2, 10*n, int64(h2)-int64(h1), per, per/float64(size))
	if per > float64(size)/10 {
		t.Errorf("heap grows %.0f B a reload (the config text is %d B): each reload's text is kept", per, size)
	}
}
