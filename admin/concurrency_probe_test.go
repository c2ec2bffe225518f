package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
)

// probeRig is a control plane, its admin API on loopback and one worker
// driven in bursts by its own goroutine, as an lcore would: everything a
// test starts it stops in stop(), so a goroutine count taken before
// newProbeRig can be compared after stop().
type probeRig struct {
	t      *testing.T
	file   string
	plane  *control.Plane
	w      *dataplane.Worker
	base   string
	hc     *http.Client
	frames [][]byte

	sent, tx, punt, drop atomic.Uint64 // the lcore's own tally of verdicts
	lcStop, lcDone       chan struct{}
	runDone, runStopped  chan struct{}
	cancel               context.CancelFunc
	served               chan error
}

// Config A: admintest.Config (web be1..be4, dns ns1/ns2 checked).
// Config B: be2 removed from web, a VIP "extra" added.
func probeConfigs(t *testing.T) (a, b string) {
	a = admintest.Config
	b = strings.Replace(a, "  [[vip.backend]]\n  name = \"be2\"\n  address = \"10.0.1.2\"\n", "", 1)
	if b == a {
		t.Fatal("variant config not built")
	}
	b += configtest.New().VIP("extra", "203.0.113.9", 80).Backend("ex1", "10.0.3.1").String()
	return a, b
}

func writeAtomic(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "cfg-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func newProbeRig(t *testing.T, toml string) *probeRig {
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
	w, err := dataplane.NewWorker(0, shared, cfg.Conntrack, key, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	plane, err := control.New(cfg, shared, []*dataplane.Worker{w}, log)
	if err != nil {
		t.Fatal(err)
	}
	r := &probeRig{t: t, file: file, plane: plane, w: w,
		lcStop: make(chan struct{}), lcDone: make(chan struct{}),
		runDone: make(chan struct{}), runStopped: make(chan struct{}), served: make(chan error, 1)}
	// Frames: SYNs and ACKs to web, UDP to dns, TCP to extra (a VIP only
	// in config B: no-service otherwise), a cut frame.
	extra := netip.MustParseAddrPort("203.0.113.9:80")
	for i := range 64 {
		sp := uint16(10000 + i)
		r.frames = append(r.frames,
			dptest.TCP(t, sp, webVIP, "S"), dptest.TCP(t, sp, webVIP, "A"),
			dptest.UDP(t, sp, dnsVIP), dptest.TCP(t, sp, extra, "S"))
	}
	cut := dptest.TCP(t, 9999, webVIP, "S")
	r.frames = append(r.frames, cut[:20])

	go func() { defer close(r.runStopped); plane.Run(r.runDone) }()
	go r.lcore()

	srv := admin.New(plane, config.Admin{Listen: "127.0.0.1:0"}, file, log)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.served <- srv.Serve(ctx, ln) }()
	r.base = "http://" + ln.Addr().String()
	r.hc = &http.Client{Timeout: 20 * time.Second}
	return r
}

// lcore forwards bursts of 1..32 frames until lcStop, serving snapshots
// and operations between them and when idle.
func (r *probeRig) lcore() {
	defer close(r.lcDone)
	start := time.Now()
	const headroom = 128
	bufs := make([][]byte, dataplane.MaxBurst)
	for i := range bufs {
		bufs[i] = make([]byte, 4096)
	}
	pkts := make([]dataplane.Pkt, dataplane.MaxBurst)
	k := 0
	for b := 0; ; b++ {
		select {
		case <-r.lcStop:
			return
		default:
		}
		now := conntrack.Time(time.Since(start) / time.Millisecond)
		if b%4 == 3 { // an empty poll
			r.w.Local().IdlePolls++
			r.w.Idle(now)
			time.Sleep(20 * time.Microsecond) // pacing only, not synchronisation
			continue
		}
		n := 1 + b%dataplane.MaxBurst
		for i := range n {
			f := r.frames[k%len(r.frames)]
			k += 7
			copy(bufs[i][headroom:], f)
			pkts[i] = dataplane.Pkt{Buf: bufs[i], Off: headroom, Len: len(f)}
		}
		r.w.ProcessCaptured(pkts[:n], now)
		r.w.Local().Bursts++
		for i := range n {
			switch r.w.Verdicts[i] {
			case dataplane.Tx:
				r.tx.Add(1)
			case dataplane.Punt:
				r.punt.Add(1)
			default:
				r.drop.Add(1)
			}
		}
		r.sent.Add(uint64(n))
	}
}

// call is env.call without t.Fatal, for goroutines: a transport error is
// status -1.
func (r *probeRig) call(method, path, body string) (int, string) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	if err != nil {
		return -1, err.Error()
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1, err.Error()
	}
	return resp.StatusCode, string(b)
}

func (r *probeRig) status(vip, name string) (control.BackendStatus, bool) {
	for _, v := range r.plane.Status(false).VIPs {
		for _, b := range v.Backends {
			if v.Name == vip && b.Name == name {
				return b, true
			}
		}
	}
	return control.BackendStatus{}, false
}

// stop ends the lcore, the rebuild loop and the server, in that order
// reversed: the server first (no more calls), then the plane, then the
// lcore.
func (r *probeRig) stop() {
	r.cancel()
	select {
	case err := <-r.served:
		if err != nil {
			r.t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		r.t.Error("Serve did not return within 15s of its context's end")
	}
	r.hc.CloseIdleConnections()
	close(r.runDone)
	<-r.runStopped
	close(r.lcStop)
	<-r.lcDone
}

// waitGoroutines polls until at most n goroutines run, up to d.
func waitGoroutines(n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		g := runtime.NumGoroutine()
		if g <= n || time.Now().After(deadline) {
			return g
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestProbeConcurrentChangesFromEverySource: traffic bursts, reloads
// alternating between two configurations (a backend and a VIP come and
// go), reloads from a signal-like path (Plane.Reload) and the API at once,
// operator drains/undrains/weights checked right after each success,
// flushes, captures, every read endpoint, health flaps and worker
// operations, all at once under a deadline. Afterwards: the operator's
// last drain and weight hold across reloads that do not mention them (the
// README: a drain lasts until undrained; a weight "until a reload changes
// it"), counters conserve, and nothing is left running.
func TestProbeConcurrentChangesFromEverySource(t *testing.T) {
	before := runtime.NumGoroutine()
	a, b := probeConfigs(t)
	r := newProbeRig(t, a)

	const rounds = 40
	var ops, fails atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan string, 1000)
	report := func(format string, args ...any) {
		fails.Add(1)
		select {
		case errc <- fmt.Sprintf(format, args...):
		default:
		}
	}

	// Reloads through the API and Plane.Reload (SIGHUP) at once.
	var cfgMu sync.Mutex // serialises writing the file with the choice of content
	for src := range 2 {
		wg.Go(func() {
			for i := range rounds {
				cfg := a
				if (i+src)%2 == 0 {
					cfg = b
				}
				cfgMu.Lock()
				err := writeAtomic(r.file, cfg)
				cfgMu.Unlock()
				if err != nil {
					report("write: %v", err)
					return
				}
				ops.Add(1)
				if src == 0 {
					if code, body := r.call("POST", api.ReloadPath, ""); code != 200 {
						report("API reload %d: %d %s", i, code, body)
					}
				} else if err := r.plane.Reload(r.file); err != nil {
					report("Plane.Reload %d: %v", i, err)
				}
			}
		})
	}
	// The operator of be3 (in both configs): after each success, the
	// state must be what it asked for, whatever reloads ran meanwhile
	// (only this goroutine changes be3's drain and weight).
	wg.Go(func() {
		for i := range 3 * rounds {
			ops.Add(1)
			switch i % 3 {
			case 0:
				if code, body := r.call("POST", api.ActionPath("web", "be3", api.ActionDrain), ""); code != 200 {
					report("drain be3: %d %s", code, body)
				} else if s, ok := r.status("web", "be3"); !ok || !s.Drained || s.Effective != 0 {
					report("drain be3 acknowledged, then status %+v", s)
				}
			case 1:
				wgt := 1 + i%7
				if code, body := r.call("POST", api.ActionPath("web", "be3", api.ActionWeight), fmt.Sprintf(`{"weight": %d}`, wgt)); code != 200 {
					report("weight be3: %d %s", code, body)
				} else if s, ok := r.status("web", "be3"); !ok || s.Weight != wgt || !s.Drained {
					report("weight be3=%d acknowledged (drained), then status %+v", wgt, s)
				}
			default:
				if code, body := r.call("POST", api.ActionPath("web", "be3", api.ActionUndrain), ""); code != 200 {
					report("undrain be3: %d %s", code, body)
				} else if s, ok := r.status("web", "be3"); !ok || s.Drained || s.Effective == 0 {
					report("undrain be3 acknowledged, then status %+v", s)
				}
			}
		}
	})
	// The operator of be2, which reloads remove and add back: 200 or 404.
	wg.Go(func() {
		for i := range 2 * rounds {
			ops.Add(1)
			act := []string{api.ActionDrain, api.ActionUndrain, api.ActionFlush}[i%3]
			if code, body := r.call("POST", api.ActionPath("web", "be2", act), ""); code != 200 && code != 404 {
				report("%s be2: %d %s", act, code, body)
			}
		}
	})
	// Flushes of be1, captures, and every read.
	wg.Go(func() {
		for range rounds {
			ops.Add(2)
			if code, body := r.call("POST", api.ActionPath("web", "be1", api.ActionFlush), ""); code != 200 {
				report("flush be1: %d %s", code, body)
			}
			if code, body := r.call("POST", api.CaptureQuery("", "", false, "", 20, 100*time.Millisecond), ""); code != 200 && code != 409 {
				report("capture: %d %.200s", code, body)
			}
		}
	})
	wg.Go(func() {
		for range rounds {
			ops.Add(1)
			if code, body := r.call("POST", api.CaptureQuery("web", "be1", false, "", 5, 50*time.Millisecond), ""); code != 200 && code != 409 && code != 404 {
				report("capture web/be1: %d %.200s", code, body)
			}
		}
	})
	reads := []string{api.StatusPath, api.MetricsPath, api.VIPsPath + "?backends=true", api.ConnsQuery("web", "", 50, ""),
		api.ConnsQuery("", "", 0, ""), api.LookupQuery(dptest.Client.String(), webVIP.Addr().String(), 10001, 80, "tcp"),
		api.TablePath("web"), api.VIPPath("extra"), api.BackendPath("web", "be2")}
	for _, p := range reads {
		wg.Go(func() {
			for range rounds {
				ops.Add(1)
				code, body := r.call("GET", p, "")
				ok := code == 200 || code == 404 && (strings.Contains(p, "extra") || strings.Contains(p, "be2"))
				if !ok {
					report("GET %s: %d %.200s", p, code, body)
				}
			}
		})
	}
	// Health flaps on dns (in both configs) and on ex1 (only in B).
	wg.Go(func() {
		for i := range 4 * rounds {
			ops.Add(1)
			if err := r.plane.SetHealth("dns", []string{"ns1", "ns2"}[i%2], i%3 != 0, "probe flap"); err != nil {
				report("SetHealth: %v", err)
			}
			_ = r.plane.SetHealth("extra", "ex1", i%2 == 0, "probe flap") // not found under A
		}
	})
	// Worker operations posted directly, beside the plane's own.
	var opErrs atomic.Int64
	wg.Go(func() {
		for i := range 2 * rounds {
			ops.Add(1)
			var op *dataplane.Op
			switch i % 3 {
			case 0:
				op = dataplane.CountFlowsOp()
			case 1:
				op = dataplane.ListOp(0, 64, -1, -1)
			default:
				op = dataplane.LookupOp(flow.Tuple{})
			}
			if err := r.w.Run(op, 5*time.Second); err != nil {
				opErrs.Add(1)
				report("worker op %d: %v", i, err)
			}
		}
	})

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(90 * time.Second):
		t.Fatalf("concurrent phase did not finish within 90s (deadlock?):\n%s", allStacks())
	}
	close(errc)
	for e := range errc {
		t.Error(e)
	}

	// The last word: be3 drained and weighted 5, be4 weighted 7; then
	// reloads that do not mention either (A, B, A).
	for _, c := range []struct{ path, body string }{
		{api.ActionPath("web", "be3", api.ActionDrain), ""},
		{api.ActionPath("web", "be3", api.ActionWeight), `{"weight": 5}`},
		{api.ActionPath("web", "be4", api.ActionWeight), `{"weight": 7}`},
	} {
		if code, body := r.call("POST", c.path, c.body); code != 200 {
			t.Fatalf("POST %s: %d %s", c.path, code, body)
		}
	}
	for i, cfg := range []string{a, b, a} {
		if err := writeAtomic(r.file, cfg); err != nil {
			t.Fatal(err)
		}
		if code, body := r.call("POST", api.ReloadPath, ""); code != 200 {
			t.Fatalf("final reload %d: %d %s", i, code, body)
		}
	}
	if s, _ := r.status("web", "be3"); !s.Drained || s.Effective != 0 || s.Weight != 5 {
		t.Errorf("be3 after reloads that did not mention it: %+v; want drained, effective 0, weight 5", s)
	}
	if s, _ := r.status("web", "be4"); s.Drained || s.Weight != 7 || s.Effective != 700 {
		t.Errorf("be4 after reloads that did not mention it: %+v; want weight 7, effective 700", s)
	}
	if s, ok := r.status("web", "be2"); !ok || s.Drained {
		t.Errorf("be2, re-added by the last reload: %+v (present %v); want a fresh, undrained backend", s, ok)
	}

	// Counters: the API's copy catches up with the lcore's, then the
	// identity holds on the worker's own counters once it stopped.
	r.stop()
	c := r.w.Local()
	fwd := c.Encap[encap.Forward] + c.Encap[encap.ICMPReply] + c.EchoReplies
	var drops uint64
	dataplane.ForEachDrop(c, func(_ string, n uint64) { drops += n })
	sent := r.sent.Load()
	if c.RxPackets != sent || c.RxPackets != fwd+c.Punted+drops {
		t.Errorf("conservation: sent %d, rx %d = fwd %d + punted %d + drops %d (%d)", sent, c.RxPackets, fwd, c.Punted, drops, fwd+c.Punted+drops)
	}
	if r.tx.Load() != fwd || r.punt.Load() != c.Punted || r.drop.Load() != drops {
		t.Errorf("verdicts tx %d punt %d drop %d; counters fwd %d punted %d drops %d", r.tx.Load(), r.punt.Load(), r.drop.Load(), fwd, c.Punted, drops)
	}

	after := waitGoroutines(before, 15*time.Second)
	if after > before {
		t.Errorf("goroutines: %d before, %d after shutdown\n%s", before, after, allStacks())
	}
	t.Logf("ops %d (failed %d, worker-op errors %d), packets %d (tx %d punt %d drop %d), goroutines %d before, %d after",
		ops.Load(), fails.Load(), opErrs.Load(), sent, r.tx.Load(), r.punt.Load(), r.drop.Load(), before, after)
}
