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

// manualLcore is a worker the test drives itself, burst by burst, so it
// decides when the worker serves the operations the plane posts.
type manualLcore struct {
	w   *dataplane.Worker
	buf []byte
	now conntrack.Time
}

func (l *manualLcore) send(frame []byte) (dataplane.Verdict, netip.Addr) {
	l.now++
	copy(l.buf[128:], frame)
	pkts := []dataplane.Pkt{{Buf: l.buf, Off: 128, Len: len(frame)}}
	l.w.Process(pkts, l.now)
	var dst netip.Addr
	if l.w.Verdicts[0] == dataplane.Tx {
		dst, _ = netip.AddrFromSlice(l.buf[pkts[0].Off+30 : pkts[0].Off+34])
	}
	return l.w.Verdicts[0], dst
}

// entriesOf counts the worker's conntrack entries of VIP id vip.
func (l *manualLcore) entriesOf(vip uint16) int {
	n := 0
	l.w.Conntrack().ForEach(func(e *conntrack.Entry) {
		if e.VIP() == vip {
			n++
		}
	})
	return n
}

// A reload that removes a VIP clears its conntrack entries in the
// background (clearRemovedVIPs: a DropOp by VIP id, posted to each worker
// in turn, each waiting for the worker). The very next reload may give
// that id to a VIP it adds (NewServices keeps only the ids of the
// snapshot before it out of reach), here the same VIP put back (a
// reverted reload, A -> B -> A). If the worker had not run the clearing
// yet (busy with another operation: a flow count for the admin API or
// the metrics, another removed VIP's clearing, another worker's turn
// first), the drop runs afterwards and removes the entries of the
// connections the re-added VIP took since: under a load-based scheduler
// their next packets are placed by the Maglev table instead, and move to
// another backend mid-connection.
func TestRemovedVIPClearingSparesTheVIPThatTookItsID(t *testing.T) {
	base := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "0s"`).
		Web(2)
	a := base.String() + configtest.New().VIP("x", "203.0.113.9", 81, `scheduler = "round-robin"`).
		Backend("x1", "10.0.3.1").Backend("x2", "10.0.3.2").Backend("x3", "10.0.3.3").String()
	cfgA, err := config.Parse([]byte(a), "a.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfgB, err := config.Parse([]byte(base.String()), "b.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfgA2, err := config.Parse([]byte(a), "a.toml")
	if err != nil {
		t.Fatal(err)
	}
	key, err := flow.ParseKey(cfgA.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	shared := &dataplane.Shared{}
	w, err := dataplane.NewWorker(0, shared, cfgA.Conntrack, key, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	l := &manualLcore{w: w, buf: make([]byte, 4096)}
	p, err := newPlane(cfgA, shared, []*dataplane.Worker{w}, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	vipX := netip.MustParseAddrPort("203.0.113.9:81")
	xid := shared.Services.Load().LookupVIP(vipX.Addr(), vipX.Port(), 6).ID

	// The worker is busy with a flow count (the admin API's or the
	// metrics') when the operator removes x and puts it back.
	busy := dataplane.CountFlowsOp()
	if err := w.Post(busy); err != nil {
		t.Fatal(err)
	}
	goroutines := runtime.NumGoroutine()
	if err := p.Apply(cfgB); err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(cfgA2); err != nil {
		t.Fatal(err)
	}
	x := shared.Services.Load().LookupVIP(vipX.Addr(), vipX.Port(), 6)
	if x.ID != xid {
		t.Fatalf("re-added VIP got id %d, not its old %d: the test needs the reuse", x.ID, xid)
	}

	// Clients connect to the re-added VIP.
	const n = 30
	first := make([]netip.Addr, n)
	for i := range n {
		sp := uint16(40000 + i)
		if v, dst := l.send(dptest.TCP(t, sp, vipX, "S")); v != dataplane.Tx {
			t.Fatalf("SYN %d: verdict %v", i, v)
		} else {
			first[i] = dst
		}
		l.send(dptest.TCP(t, sp, vipX, "A"))
	}
	if got := l.entriesOf(x.ID); got != n {
		t.Fatalf("%d entries of the re-added VIP, want %d", got, n)
	}

	// The worker goes on; the clearing of the first reload gets its turn.
	deadline := time.Now().Add(20 * time.Second)
	for busy.Wait(0) != nil || runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			t.Fatal("the clearing of the removed VIP did not end")
		}
		l.now++
		w.Idle(l.now)
		time.Sleep(50 * time.Microsecond) // an idle lcore's poll
	}

	if got := l.entriesOf(x.ID); got != n {
		t.Errorf("%d of the re-added VIP's %d connections still tracked after the removed VIP's clearing ran", got, n)
	}
	moved := 0
	for i := range n {
		if _, dst := l.send(dptest.TCP(t, uint16(40000+i), vipX, "A")); dst != first[i] {
			moved++
		}
	}
	if moved > 0 {
		t.Errorf("%d of %d established connections of the re-added VIP moved to another backend mid-connection", moved, n)
	}
}
