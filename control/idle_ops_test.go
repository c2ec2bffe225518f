package control

import (
	"log/slog"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/flow"
)

// idleLcore drives a worker as dataplane.Engine.loop does (engine_dpdk.go):
// a poll with packets resets the back-off; an idle poll serves snapshots
// and operations (Worker.Idle), then after 64 idle polls sleeps, doubling
// the sleep up to idle_max_sleep.
type idleLcore struct {
	w    *dataplane.Worker
	in   chan []byte
	out  chan dataplane.Verdict
	stop chan struct{}
	done chan struct{}
}

func newIdleLcore(t *testing.T, w *dataplane.Worker, maxSleep time.Duration) *idleLcore {
	l := &idleLcore{w: w, in: make(chan []byte), out: make(chan dataplane.Verdict), stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(l.done)
		buf := make([]byte, 4096)
		pkts := make([]dataplane.Pkt, 1)
		idle, sleep := 0, time.Microsecond
		for {
			now := conntrack.Time(time.Since(start) / conntrack.Resolution)
			select {
			case <-l.stop:
				return
			case f := <-l.in:
				idle, sleep = 0, time.Microsecond
				copy(buf[128:], f)
				pkts[0] = dataplane.Pkt{Buf: buf, Off: 128, Len: len(f)}
				w.Process(pkts, now)
				l.out <- w.Verdicts[0]
				continue
			default:
			}
			w.Idle(now)
			w.Conntrack().Sweep(now, 8)
			idle++
			if idle > 64 {
				// The engine's back-off; a frame waits for it as it
				// waits in the rx ring.
				select {
				case <-l.stop:
					return
				case <-time.After(sleep):
				}
				sleep = min(2*sleep, maxSleep)
			} else if idle > 16 {
				runtime.Gosched()
			}
		}
	}()
	t.Cleanup(func() { close(l.stop); <-l.done })
	return l
}

func (l *idleLcore) send(f []byte) dataplane.Verdict { l.in <- f; return <-l.out }

// A lightly loaded instance with idle_max_sleep = "200ms" (0..1s is
// valid): its idle worker polls about five times a second. The idle
// sweep was scaled with the sleep (engine.go idleSweep), but a worker
// operation still gets one step of opBudget (256 buckets) per poll: a
// count of the flows of a 2^18-entry table (32768 buckets, 128 steps)
// takes about 26 s, of a table of the default 2^20 entries over 100 s.
// Status(true) gives each worker 5 s: the count times out, and Status
// leaves the worker's flows out without a word (the worker is not in
// Stale: it answered the counter snapshot). `fulcrumctl backends`, the
// status page and fulcrum_backend_active_flows show 0 flows for a drained
// backend that still holds connections ("safe to stop when they reach
// 0", README), and the op stays posted for the next 20 s, so flushes,
// listings and look-ups fail with "worker busy" meanwhile.
func TestFlowCountOnIdleWorkerWithLongSleep(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, `idle_max_sleep = "200ms"`).
		Section("conntrack", "capacity = 262144").
		Web(2).String()
	p, w, cfg := onePlane(t, toml)
	l := newIdleLcore(t, w, cfg.Dataplane.IdleMaxSleep)
	web := netip.MustParseAddrPort(configtest.Web + ":80")
	const conns = 6
	for i := range conns {
		sp := uint16(30000 + i)
		if v := l.send(dptest.TCP(t, sp, web, "S")); v != dataplane.Tx {
			t.Fatalf("SYN %d: %v", i, v)
		}
		if v := l.send(dptest.TCP(t, sp, web, "A")); v != dataplane.Tx {
			t.Fatalf("ACK %d: %v", i, v)
		}
	}
	// Six established connections, then the instance is quiet (the
	// connections are idle, as long-lived sessions often are).
	st := p.Status(true)
	var flows uint64
	for _, v := range st.VIPs {
		if v.Name != "web" {
			continue
		}
		for _, b := range v.Backends {
			flows += b.Flows
		}
		t.Logf("web: VIP flows %d, backends' flows %d, stale workers %v", v.Flows, flows, st.Stale)
	}
	if flows != conns {
		t.Errorf("Status(true) on an idle worker (idle_max_sleep 200ms, 2^18 entries): web's backends hold %d flows, want %d (stale %v, flows missing %v)", flows, conns, st.Stale, st.FlowsMissing)
	}
	// Meanwhile the count is still posted: an operator's flush fails.
	if _, err := p.Flush("web", "be1"); err != nil {
		t.Errorf("flush right after the status read: %v", err)
	}
}

// A worker whose flow count does not finish in time (here: no lcore
// serves it at all) is named in FlowsMissing, so a flow count too low is
// never shown as if it were whole: before, Status left its flows out
// without a word unless the counter snapshot failed too.
func TestStatusNamesWorkersWhoseFlowsAreMissing(t *testing.T) {
	p, _, _ := onePlane(t, configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Web(2).String())
	if st := p.Status(false); len(st.FlowsMissing) != 0 {
		t.Errorf("Status without flows: FlowsMissing %v, want none (nothing was counted)", st.FlowsMissing)
	}
	if st := p.Status(true); len(st.FlowsMissing) != 1 || st.FlowsMissing[0] != 0 {
		t.Errorf("Status(true) with worker 0 not counting: FlowsMissing %v, want [0]", st.FlowsMissing)
	}
}

// onePlane is a plane on the configuration toml with one worker that
// nothing drives: the caller serves it (newIdleLcore) or leaves it idle.
func onePlane(t *testing.T, toml string) (*Plane, *dataplane.Worker, *config.Config) {
	t.Helper()
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	shared := &dataplane.Shared{}
	w, err := dataplane.NewWorker(0, shared, cfg.Conntrack, key, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, shared, []*dataplane.Worker{w}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return p, w, cfg
}
