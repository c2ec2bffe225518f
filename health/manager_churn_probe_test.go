package health

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Churn probe: a Manager followed by thousands of Sets (backends renamed,
// moved between real loopback servers, their checks changed) and checks
// of flapping servers, as a daemon reloaded every 10 s for months would.

func probeFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func probeHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

type mgrFigures struct {
	goroutines, fds, checkers, pending, order, orderCap int
	heap                                                uint64
	lastID                                              uint64
}

func (m *Manager) probeFigures(t *testing.T) mgrFigures {
	f := mgrFigures{goroutines: runtime.NumGoroutine(), fds: probeFDs(t), heap: probeHeap()}
	m.mu.Lock()
	f.checkers, f.lastID = len(m.checkers), m.lastID
	m.mu.Unlock()
	m.events.mu.Lock()
	f.pending, f.order, f.orderCap = len(m.events.pending), len(m.events.order), cap(m.events.order)
	m.events.mu.Unlock()
	return f
}

// flappy is an HTTP server whose answer alternates between 200 and 503
// request by request, and which hangs on one request in seven (the check
// times out).
func flappy(t *testing.T) (netip.AddrPort, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		switch {
		case k%7 == 0:
			select {
			case <-r.Context().Done():
			case <-time.After(200 * time.Millisecond):
			}
			return
		case k%2 == 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.Write([]byte("ok"))
		}
	}))
	t.Cleanup(srv.Close)
	return netip.MustParseAddrPort(srv.Listener.Addr().String()), &n
}

// TestProbeManagerChurnBounded: N and 10N Sets, each renaming one backend,
// moving one to another server, changing one's check and leaving the rest;
// all checks hit real loopback servers (HTTP, TCP, a closed port) every
// 10 ms, and a consumer reads the events as the control plane does.
func TestProbeManagerChurnBounded(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 40
	}
	var addrs []netip.AddrPort
	for range 3 {
		a, _ := flappy(t)
		addrs = append(addrs, a)
	}
	for range 3 {
		addrs = append(addrs, listener(t))
	}
	// A port nobody listens on (refused at once).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	addrs = append(addrs, closed)

	base := runtime.NumGoroutine()
	m := NewManager(ManagerOptions{})
	var events atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range m.Events() {
			events.Add(1)
		}
	}()
	httpCfg := fastConfig(KindHTTP)
	httpCfg.Interval, httpCfg.Timeout = 10*time.Millisecond, 9*time.Millisecond
	tcpCfg := fastConfig(KindTCP)
	tcpCfg.Interval, tcpCfg.Timeout = 10*time.Millisecond, 9*time.Millisecond
	targets := func(i int) map[string]Target {
		out := map[string]Target{}
		for j := range 6 {
			cfg := tcpCfg
			if j < 3 {
				cfg = httpCfg
			}
			out[fmt.Sprintf("web/s%d", j)] = Target{Addr: addrs[j], Config: cfg}
		}
		// Renamed every Set (a generated name).
		out[fmt.Sprintf("gen/x%d", i)] = Target{Addr: addrs[i%3], Config: httpCfg}
		// Moved between servers every Set.
		out["web/mover"] = Target{Addr: addrs[i%len(addrs)], Config: tcpCfg}
		// Its check changed every Set (rise 2/3), same address.
		c := httpCfg
		c.Rise = 2 + i%2
		out["web/retuned"] = Target{Addr: addrs[1], Config: c}
		return out
	}
	set := func(i int) {
		if err := m.Set(targets(i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond) // let some checks run between Sets
	}
	i := 0
	for ; i < 20; i++ {
		set(i)
	}
	f0 := m.probeFigures(t)
	for end := i + n; i < end; i++ {
		set(i)
	}
	f1 := m.probeFigures(t)
	for end := i + 9*n; i < end; i++ {
		set(i)
	}
	f2 := m.probeFigures(t)
	t.Logf("warm-up: %+v", f0)
	t.Logf("N=%d:    %+v", n, f1)
	t.Logf("10N=%d: %+v; %d events read", 10*n, f2, events.Load())
	if f2.checkers != 9 {
		t.Errorf("%d checkers for 9 targets", f2.checkers)
	}
	// Each of the 9 checkers may be in a check (its goroutine, a dial, an
	// HTTP transport's) at either measure: a leak over 9N cycles shows as
	// hundreds, in-flight checks as a few a checker.
	if f2.goroutines > f1.goroutines+3*9 {
		t.Errorf("goroutines: %d after N, %d after 10N", f1.goroutines, f2.goroutines)
	}
	if f2.fds > f1.fds+2*9 {
		t.Errorf("fds: %d after N, %d after 10N", f1.fds, f2.fds)
	}
	if f2.pending > 9 || f2.order > 9 || f2.orderCap > 256 {
		t.Errorf("coalescer: %d pending, order %d (cap %d)", f2.pending, f2.order, f2.orderCap)
	}
	if d := int64(f2.heap) - int64(f1.heap); d > 1<<20 {
		t.Errorf("heap after GC grew %d B from N to 10N", d)
	}
	m.Close()
	wg.Wait()
	poll(t, "goroutines back to the start", func() bool { return runtime.NumGoroutine() <= base+2 })
}

// TestProbeFlappingChecksBounded: checkers of servers that flap (HTTP
// 200/503 alternating, a hang in seven; a TCP listener closed and opened
// again on the same port) at 10 ms for a while: fds, goroutines and heap
// after about N checks and 10N checks each.
func TestProbeFlappingChecksBounded(t *testing.T) {
	dur := 4 * time.Second
	if testing.Short() {
		dur = time.Second
	}
	var addrs []netip.AddrPort
	var hits []*atomic.Int64
	for range 4 {
		a, h := flappy(t)
		addrs, hits = append(addrs, a), append(hits, h)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpAddr := netip.MustParseAddrPort(ln.Addr().String())
	stopFlip := make(chan struct{})
	flipDone := make(chan struct{})
	go func() { // the TCP backend goes away and comes back every 30 ms
		defer close(flipDone)
		l := ln
		for {
			select {
			case <-stopFlip:
				if l != nil {
					l.Close()
				}
				return
			case <-time.After(30 * time.Millisecond):
			}
			if l != nil {
				l.Close()
				l = nil
			} else if nl, err := net.Listen("tcp", tcpAddr.String()); err == nil {
				l = nl
			}
		}
	}()
	defer func() { close(stopFlip); <-flipDone }()

	m := NewManager(ManagerOptions{})
	defer m.Close()
	var events atomic.Int64
	go func() {
		for range m.Events() {
			events.Add(1)
		}
	}()
	cfg := fastConfig(KindHTTP)
	cfg.Interval, cfg.Timeout, cfg.Rise, cfg.Fall = 10*time.Millisecond, 9*time.Millisecond, 1, 1
	tcpCfg := cfg
	tcpCfg.Kind = KindTCP
	targets := map[string]Target{"v/t": {Addr: tcpAddr, Config: tcpCfg}}
	for j, a := range addrs {
		targets[fmt.Sprintf("v/h%d", j)] = Target{Addr: a, Config: cfg}
	}
	if err := m.Set(targets); err != nil {
		t.Fatal(err)
	}
	checks := func() (n uint64) {
		for _, s := range m.States() {
			n += s.Checks
		}
		return n
	}
	time.Sleep(dur / 10)
	f1, c1, e1 := m.probeFigures(t), checks(), events.Load()
	time.Sleep(dur - dur/10)
	f2, c2, e2 := m.probeFigures(t), checks(), events.Load()
	t.Logf("after %d checks (%d events): %+v", c1, e1, f1)
	t.Logf("after %d checks (%d events): %+v", c2, e2, f2)
	if c2 < 5*c1 {
		t.Logf("checks did not scale as planned (%d then %d)", c1, c2)
	}
	for k, s := range m.States() {
		if len(s.LastError) > 2*maxErrText {
			t.Errorf("%s: last error %d bytes", k, len(s.LastError))
		}
	}
	if f2.goroutines > f1.goroutines+24 { // in-flight checks, not a leak (above)
		t.Errorf("goroutines: %d then %d", f1.goroutines, f2.goroutines)
	}
	if f2.fds > f1.fds+16 {
		t.Errorf("fds: %d then %d", f1.fds, f2.fds)
	}
	if d := int64(f2.heap) - int64(f1.heap); d > 1<<20 {
		t.Errorf("heap after GC grew %d B", d)
	}
}
