package admin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/flow"
)

// Churn probe: what a long-running daemon's admin side accumulates when a
// configuration-management tool reloads with new VIP and backend names,
// and an operator script drains, undrains and sets weights in a loop,
// all over a real loopback listener.

type churnSink struct {
	mu           sync.Mutex
	lines, bytes int
	keep         bool
	kept         bytes.Buffer
}

func (c *churnSink) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines += bytes.Count(p, []byte{'\n'})
	c.bytes += len(p)
	if c.keep {
		c.kept.Write(p)
	}
	return len(p), nil
}

func (c *churnSink) get() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines, c.bytes
}

func churnOpenFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func churnHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// churnCfg: web (be1..be3 fixed) and a VIP and a backend whose names and
// addresses change with i (a tool that generates names).
func churnCfg(i int) string {
	// A key of its own: the examples' published key is warned of at every
	// reload, a record of its own (TestShippedHashKeyWarns).
	return strings.Replace(churnBuilder(i), configtest.HashKey, "5be1c3e6a07f42d9b81c0e2f6a4d3917", 1)
}

func churnBuilder(i int) string {
	return configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 4096").
		Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
		Web(3).
		Backend(fmt.Sprintf("x%d", i), fmt.Sprintf("10.%d.%d.1", 10+i>>8&127, i&255)).
		VIP(fmt.Sprintf("v%d", i), fmt.Sprintf("203.0.%d.%d", 114+i>>8&15, i&255|1), 80+i%1000).
		Backend(fmt.Sprintf("o%d", i), fmt.Sprintf("10.200.%d.%d", i>>8&255, i&255)).
		String()
}

type churnRig struct {
	t                *testing.T
	file             string
	plane            *control.Plane
	srv              *Server
	base             string
	hc               *http.Client
	sink             *churnSink
	cancel           context.CancelFunc
	served           chan error
	stopRun, runDone chan struct{}
}

func newChurnRig(t *testing.T) *churnRig {
	t.Helper()
	file := filepath.Join(t.TempDir(), "fulcrum.toml")
	if err := os.WriteFile(file, []byte(churnCfg(0)), 0o644); err != nil {
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
	sink := &churnSink{}
	log := slog.New(slog.NewJSONHandler(sink, nil)) // Info and up, as the daemon logs
	plane, err := control.New(cfg, shared, []*dataplane.Worker{lc.Worker}, log)
	if err != nil {
		t.Fatal(err)
	}
	r := &churnRig{t: t, file: file, plane: plane, sink: sink, served: make(chan error, 1),
		stopRun: make(chan struct{}), runDone: make(chan struct{})}
	go func() { defer close(r.runDone); plane.Run(r.stopRun) }()
	r.srv = New(plane, config.Admin{Listen: "127.0.0.1:0"}, file, log)
	ln, err := r.srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.served <- r.srv.Serve(ctx, ln) }()
	r.base = "http://" + ln.Addr().String()
	r.hc = &http.Client{Timeout: 20 * time.Second}
	t.Cleanup(r.stop)
	return r
}

func (r *churnRig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.served
	close(r.stopRun)
	<-r.runDone
	r.hc.CloseIdleConnections()
	r.cancel = nil
}

func (r *churnRig) do(method, path, body string) (int, string) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *churnRig) must(method, path, body string) string {
	r.t.Helper()
	code, b := r.do(method, path, body)
	if code != http.StatusOK {
		r.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	return b
}

type churnFigures struct {
	goroutines, fds int
	heap            uint64
	metricsLines    int
	removedSeries   int // series naming a VIP the configuration no longer has
	rateSamples     int
	logLines        int
	logBytes        int
}

func (r *churnRig) figures(i int) churnFigures {
	m := r.must("GET", "/metrics", "")
	f := churnFigures{goroutines: runtime.NumGoroutine(), fds: churnOpenFDs(r.t), heap: churnHeap()}
	cur := fmt.Sprintf(`vip="v%d"`, i)
	for _, l := range strings.Split(m, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		f.metricsLines++
		if strings.Contains(l, `vip="v`) && !strings.Contains(l, cur) {
			f.removedSeries++
		}
	}
	r.srv.rates.mu.Lock()
	f.rateSamples = len(r.srv.rates.samples)
	r.srv.rates.mu.Unlock()
	f.logLines, f.logBytes = r.sink.get()
	return f
}

// TestProbeAdminChurnBounded: each cycle rewrites the file with a new VIP
// and backend names, reloads through the API, reads the status (rates),
// scrapes /metrics, and drains, undrains and reweighs be1. After N and
// 10N cycles: goroutines, fds, heap, /metrics series, rate samples and
// the log per cycle.
func TestProbeAdminChurnBounded(t *testing.T) {
	n := 15
	if testing.Short() {
		n = 10
	}
	r := newChurnRig(t)
	cycle := func(i int) {
		if err := os.WriteFile(r.file, []byte(churnCfg(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		r.must("POST", "/api/v1/reload", "")
		r.must("GET", "/api/v1/vips?backends=true", "")
		r.must("GET", "/metrics", "")
		r.must("POST", "/api/v1/vips/web/backends/be1/drain", "")
		r.must("POST", "/api/v1/vips/web/backends/be1/undrain", "")
		r.must("POST", "/api/v1/vips/web/backends/be1/weight", fmt.Sprintf(`{"weight": %d}`, 1+i%5))
		r.must("POST", fmt.Sprintf("/api/v1/vips/v%d/backends/o%d/drain", i, i), "")
	}
	i := 1
	for ; i <= 10; i++ { // warm up: pools, first-use allocations
		cycle(i)
	}
	f0 := r.figures(i - 1)
	for end := i + n; i < end; i++ {
		cycle(i)
	}
	f1 := r.figures(i - 1)
	for end := i + 9*n; i < end; i++ {
		cycle(i)
	}
	f2 := r.figures(i - 1)
	r.sink.mu.Lock()
	r.sink.keep = true
	r.sink.mu.Unlock()
	cycle(i)
	r.sink.mu.Lock()
	t.Logf("one cycle's log:\n%s", r.sink.kept.String())
	r.sink.mu.Unlock()
	perCycle := func(a, b churnFigures, cycles int) (float64, float64) {
		return float64(b.logLines-a.logLines) / float64(cycles), float64(b.logBytes-a.logBytes) / float64(cycles)
	}
	l1, b1 := perCycle(f0, f1, n)
	l2, b2 := perCycle(f1, f2, 9*n)
	t.Logf("after warm-up: %+v", f0)
	t.Logf("after N=%d:    %+v (log %.1f records, %.0f B a cycle)", n, f1, l1, b1)
	t.Logf("after 10N=%d: %+v (log %.1f records, %.0f B a cycle)", 10*n, f2, l2, b2)
	// Connections in flight (the client's keep-alive pool, the plane's
	// checks) move these by a few; a leak over 9N cycles shows as 9N.
	if f2.goroutines > f1.goroutines+10 {
		t.Errorf("goroutines %d after N, %d after 10N", f1.goroutines, f2.goroutines)
	}
	if f2.fds > f1.fds+10 {
		t.Errorf("fds %d after N, %d after 10N", f1.fds, f2.fds)
	}
	if f2.metricsLines > f1.metricsLines+5 || f2.removedSeries > 0 {
		t.Errorf("/metrics: %d series after N, %d after 10N; %d series of removed VIPs", f1.metricsLines, f2.metricsLines, f2.removedSeries)
	}
	if d := int64(f2.heap) - int64(f1.heap); d > 2<<20 {
		t.Errorf("heap after GC grew %d B from N to 10N (%d B a cycle)", d, d/int64(9*n))
	}
	// Each cycle has 7 operations; one record each is plenty.
	if l2 > 10 || b2 > 4096 {
		t.Errorf("log: %.1f records, %.0f B a cycle", l2, b2)
	}
	r.stop()
	// Rates of removed VIPs are kept rateSampleTTL; report, not judge.
	t.Logf("rate samples kept: %d after N, %d after 10N (pruned after %v without a look)", f1.rateSamples, f2.rateSamples, rateSampleTTL)
}

// TestProbeRateSamplesPruned: the rate samples of VIPs and backends that a
// reload removed are forgotten once rateSampleTTL passes, for a viewer
// that keeps looking (the status page every few seconds for months).
func TestProbeRateSamplesPruned(t *testing.T) {
	var r rates
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	maxLen := 0
	// One look every 5 s for 30 simulated days; the VIP's name changes
	// every 10 s (a tool that renames on each reload).
	for k := 0; k < 30*24*720; k++ {
		now = now.Add(5 * time.Second)
		name := fmt.Sprintf("v%d", k/2)
		r.rate(name, uint64(k), uint64(k), now)
		r.rate(name+"\x00b", uint64(k), uint64(k), now)
		if k%1000 == 0 {
			r.mu.Lock()
			maxLen = max(maxLen, len(r.samples))
			r.mu.Unlock()
		}
	}
	t.Logf("30 days of looks, renamed every 10 s: at most %d samples kept, %d at the end", maxLen, len(r.samples))
	if maxLen > 2*2*int(2*rateSampleTTL/(10*time.Second))+8 {
		t.Errorf("rate samples grew to %d", maxLen)
	}
}
