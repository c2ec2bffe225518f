package admin

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/flow"
)

// heldLcore drives a worker as an lcore would (frames, then idle turns
// that serve counter snapshots) until hold, which stops it answering as a
// stuck lcore does, and release.
type heldLcore struct {
	w     *dataplane.Worker
	do    chan func()
	held  chan chan struct{}
	start time.Time
}

func newHeldLcore(t *testing.T, shared *dataplane.Shared, cfg *config.Config, id int) *heldLcore {
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dataplane.NewWorker(id, shared, cfg.Conntrack, key, [6]byte{2, 0, 0, 0, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	l := &heldLcore{w: w, do: make(chan func()), held: make(chan chan struct{}), start: time.Now()}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case f := <-l.do:
				f()
			case release := <-l.held:
				<-release
			default:
				w.Idle(l.now())
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return l
}

func (l *heldLcore) now() conntrack.Time {
	return conntrack.Time(time.Since(l.start) / time.Millisecond)
}

// send runs one frame through the worker and returns its verdict.
func (l *heldLcore) send(frame []byte) dataplane.Verdict {
	ch := make(chan dataplane.Verdict)
	l.do <- func() {
		buf := make([]byte, 4096)
		copy(buf[128:], frame)
		pkts := []dataplane.Pkt{{Buf: buf, Off: 128, Len: len(frame)}}
		l.w.ProcessCaptured(pkts, l.now())
		ch <- l.w.Verdicts[0]
	}
	return <-ch
}

// hold makes the lcore stop answering until the returned func is called.
func (l *heldLcore) hold() (release func()) {
	r := make(chan struct{})
	l.held <- r
	return func() { close(r) }
}

// TestProbeRateAfterStaleWorker: a look at the VIPs while one worker does
// not answer its counter snapshot (stuck for more than 2 s) reads that
// worker's counters as 0, so the VIP's totals fall; rates takes the fall
// for a counter reset and starts over from the lower totals, and the next
// look, with the worker back, reports the worker's whole history since
// start as one window's traffic. Here 200 packets were forwarded in all,
// none of them in the last window: the rate shown must not be 200 packets
// a second (or anything above 0).
func TestRateAfterStaleWorker(t *testing.T) {
	cfg, err := config.Parse([]byte(admintest.Config), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	shared := &dataplane.Shared{}
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	lc0 := dptest.NewLcore(t, shared, cfg.Conntrack, key)
	lc1 := newHeldLcore(t, shared, cfg, 1)
	plane, err := control.New(cfg, shared, []*dataplane.Worker{lc0.Worker, lc1.w}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s := New(plane, config.Admin{}, "", nil)
	web := netip.MustParseAddrPort("203.0.113.7:80")
	for i := range 100 { // 200 packets, all on worker 1
		for _, fl := range []string{"S", "A"} {
			if v := lc1.send(dptest.TCP(t, uint16(2000+i), web, fl)); v != dataplane.Tx {
				t.Fatalf("flow %d %s: %v", i, fl, v)
			}
		}
	}
	// Looks through the API's code path (vipsNow), minRateWindow apart so
	// that each measures a window.
	look := func() (packets uint64, pps float64) {
		for _, v := range s.vipsNow(false) {
			if v.Name == "web" {
				return v.Packets, v.PacketRate
			}
		}
		t.Fatal("no web VIP")
		return
	}
	if p, _ := look(); p != 200 {
		t.Fatalf("first look: %d packets; want 200", p)
	}
	time.Sleep(minRateWindow) // a window passes (not a synchronisation)
	if _, pps := look(); pps != 0 {
		t.Fatalf("no traffic, rate %v", pps)
	}
	release := lc1.hold()
	p, pps := look() // waits out the snapshot's 2 s: worker 1 is stale
	release()
	t.Logf("look with worker 1 stuck: %d packets, %v pps", p, pps)
	time.Sleep(minRateWindow)
	p, pps = look()
	t.Logf("next look, worker 1 back: %d packets, %v pps", p, pps)
	if p != 200 {
		t.Fatalf("worker back: %d packets", p)
	}
	if pps != 0 {
		t.Errorf("no packet forwarded since the first look, yet the VIP's rate is %v packets/s: the stale look's missing counts came back as traffic", pps)
	}
}
