package control

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/health"
)

// stormConfigs: A is web be1..be4 (checked, 10 ms), B removes be2 and adds
// a VIP "extra"; neither changes be3 or be4.
func stormConfigs(t *testing.T) (a, b string) {
	base := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 4096").
		Section("control", `slow_start = "2s"`, `drain_timeout = "0s"`).
		Section("health", `kind = "tcp"`, `interval = "10ms"`, `timeout = "5ms"`, `rise = 1`, `fall = 1`).
		Web(4).String()
	a = base
	b = strings.Replace(base, "  [[vip.backend]]\n  name = \"be2\"\n  address = \"10.0.1.2\"\n", "", 1)
	if a == b {
		t.Fatal("variant not built")
	}
	b += configtest.New().VIP("extra", "203.0.113.9", 80).Backend("ex1", "10.0.3.1").String()
	return a, b
}

func stormStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestStormEverythingAtOnce: reloads, drains, weights, flushes,
// status reads with and without flows, a metrics reader reusing its
// StatusBuf, the signals fold, active health verdicts from a flapping
// prober, the clock moving (slow start, passive windows), the rebuild loop
// and a worker forwarding, all at once. Race detector, deadlock (deadline
// with stacks), and the operator's last word on be3/be4 must hold.
func TestStormEverythingAtOnce(t *testing.T) {
	a, b := stormConfigs(t)
	f := newFixture(t, a)
	parse := func(s string) *config.Config {
		c, err := config.Parse([]byte(s), "test.toml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var flap atomic.Uint64
	be1, be2 := netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.1.2")
	if err := f.plane.StartHealth(ctx, health.ManagerOptions{NewProber: func(string, health.Target) (health.Prober, error) {
		return probeFunc(func(ap netip.AddrPort) error {
			if (ap.Addr() == be1 || ap.Addr() == be2) && flap.Add(1)%3 == 0 {
				return errors.New("refused")
			}
			return nil
		}), nil
	}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	runStopped := make(chan struct{})
	go func() { defer close(runStopped); f.plane.Run(done) }()

	const rounds = 60
	var wg sync.WaitGroup
	errc := make(chan string, 1000)
	report := func(format string, args ...any) {
		select {
		case errc <- fmt.Sprintf(format, args...):
		default:
		}
	}
	status := func(name string) (BackendStatus, bool) {
		for _, v := range f.plane.Status(false).VIPs {
			for _, bs := range v.Backends {
				if v.Name == "web" && bs.Name == name {
					return bs, true
				}
			}
		}
		return BackendStatus{}, false
	}
	// Reloads.
	for src := range 2 {
		wg.Go(func() {
			for i := range rounds {
				c := a
				if (i+src)%2 == 0 {
					c = b
				}
				if err := f.plane.Apply(parse(c)); err != nil {
					report("apply %d/%d: %v", src, i, err)
				}
			}
		})
	}
	// be3's operator.
	wg.Go(func() {
		for i := range 3 * rounds {
			switch i % 3 {
			case 0:
				if err := f.plane.Drain("web", "be3"); err != nil {
					report("drain: %v", err)
				} else if s, ok := status("be3"); !ok || !s.Drained || s.Effective != 0 {
					report("drained be3, then %+v", s)
				}
			case 1:
				w := 1 + i%7
				if err := f.plane.SetWeight("web", "be3", w); err != nil {
					report("weight: %v", err)
				} else if s, ok := status("be3"); !ok || s.Weight != w {
					report("weight be3=%d, then %+v", w, s)
				}
			default:
				if err := f.plane.Undrain("web", "be3"); err != nil {
					report("undrain: %v", err)
				} else if s, ok := status("be3"); !ok || s.Drained || s.Effective == 0 {
					report("undrained be3, then %+v", s)
				}
			}
		}
	})
	// be2 (comes and goes): drain, undrain, flush.
	wg.Go(func() {
		for i := range 2 * rounds {
			var err error
			switch i % 3 {
			case 0:
				err = f.plane.Drain("web", "be2")
			case 1:
				err = f.plane.Undrain("web", "be2")
			default:
				_, err = f.plane.Flush("web", "be2")
			}
			if err != nil && !errors.Is(err, ErrNotFound) {
				report("be2 op %d: %v", i, err)
			}
		}
	})
	// Flushes of be1, conns, table, lookups.
	wg.Go(func() {
		for range rounds {
			if _, err := f.plane.Flush("web", "be1"); err != nil {
				report("flush be1: %v", err)
			}
			if _, _, _, err := f.plane.Conns(ConnQuery{VIP: "web", Limit: 64}); err != nil {
				report("conns: %v", err)
			}
			if _, err := f.plane.Table("web"); err != nil {
				report("table: %v", err)
			}
		}
	})
	// Status with flows, and a metrics reader reusing its buffer.
	wg.Go(func() {
		for range rounds {
			_ = f.plane.Status(true)
		}
	})
	wg.Go(func() {
		var buf StatusBuf
		for range rounds {
			st := f.plane.StatusInto(true, &buf)
			_ = f.plane.OpsStats()
			_ = f.plane.Panicked()
			_, _ = f.plane.RebuildStats()
			for _, v := range st.VIPs {
				for _, bs := range v.Backends {
					_, _ = f.plane.HealthStatus(v.Name, bs.Name)
				}
			}
		}
	})
	// The signals fold, as RunSignals does it, faster.
	wg.Go(func() {
		counters := make([]dataplane.Counters, 1)
		for range 2 * rounds {
			f.plane.signalStep(counters)
		}
	})
	// Health verdicts through the API beside the checker's.
	wg.Go(func() {
		for i := range 4 * rounds {
			_ = f.plane.SetHealth("web", []string{"be1", "be2"}[i%2], i%3 != 0, "probe")
			_ = f.plane.SetHealth("extra", "ex1", i%2 == 0, "probe")
		}
	})
	// The clock.
	wg.Go(func() {
		for range 4 * rounds {
			f.advance(50 * time.Millisecond)
			f.plane.Kick()
			time.Sleep(100 * time.Microsecond) // pacing only
		}
	})
	// Traffic.
	wg.Go(func() {
		for i := range 6 * rounds {
			sp := uint16(20000 + i%200)
			fl := "S"
			if i%2 == 1 {
				fl = "A"
			}
			f.lc.send(syn(t, sp, fl))
		}
	})

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(120 * time.Second):
		t.Fatalf("storm did not finish within 120s (deadlock?):\n%s", stormStacks())
	}
	close(errc)
	for e := range errc {
		t.Error(e)
	}
	// The last word, then reloads that do not mention be3/be4.
	if err := f.plane.Drain("web", "be3"); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.SetWeight("web", "be3", 5); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.SetWeight("web", "be4", 7); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{a, b, a} {
		if err := f.plane.Apply(parse(c)); err != nil {
			t.Fatal(err)
		}
	}
	if s, _ := status("be3"); !s.Drained || s.Effective != 0 || s.Weight != 5 {
		t.Errorf("be3: %+v; want drained, effective 0, weight 5", s)
	}
	if s, _ := status("be4"); s.Drained || s.Weight != 7 {
		t.Errorf("be4: %+v; want weight 7", s)
	}
	close(done)
	<-runStopped
}
