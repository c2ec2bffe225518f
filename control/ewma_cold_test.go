package control

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/health"
)

// fixedRTT is a prober whose every check passes in rtt: a backend on the
// LB's own network, checked with a TCP connect.
type fixedRTT struct{ rtt time.Duration }

func (p fixedRTT) Probe(context.Context, netip.AddrPort) (time.Duration, error) { return p.rtt, nil }

// peak-ewma's README: "A backend with no sample yet costs ewma_penalty
// (30 ms), never 0: a cold backend that looks infinitely fast would take
// every new flow (the EWMA exercise's trap)." The two samples folded into
// one peak EWMA are of different things: a handshake is a round trip to
// the client (tens of ms on the Internet), a check's round trip is the
// LB's to the backend (a fraction of a ms). A checked backend that serves
// no flows (just added, given its weight back, back from down) had only
// check round trips, so it was ranked at 0.2 ms against its serving
// peers' tens of ms and took every new flow until the next fold.
//
// be1 serves: 100 handshakes a second of 40 ms, 10 connections held. be2
// is at weight 0 meanwhile (never served, or served and then set to 0 for
// a while), then the operator gives it back its weight. Both answer
// checks in 200 µs. With 2 backends peak-ewma compares both: be2 won
// while 0.2 ms × (a+1) < ~28 ms × 11, for its first ~1500 new flows on
// this lcore. Charged the penalty (30 ms), it shares with be1.
func TestPeakEWMACheckedColdBackendStartsAtPenalty(t *testing.T) {
	for _, servedFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "never served", true: "served, then weight 0"}[servedFirst], func(t *testing.T) {
			testColdBackend(t, servedFirst)
		})
	}
}

func testColdBackend(t *testing.T, servedFirst bool) {
	f := newFixture(t, ewmaPair)
	ids, fold := checkedEWMA(t, f, "web", fixedRTT{200 * time.Microsecond})
	serve := func(bc *dataplane.PacketBytes) {
		bc.SYNs += 100
		bc.Established += 100
		bc.HandshakeMs += 100 * 40
		bc.Active = 10
	}
	var be2 *dataplane.PacketBytes
	if servedFirst {
		fold(3, func(name string, bc *dataplane.PacketBytes) {
			serve(bc)
			if name == "be2" {
				be2 = bc
			}
		})
		be2.Active = 0
	}
	if err := f.plane.SetWeight("web", "be2", 0); err != nil {
		t.Fatal(err)
	}
	fold(10, func(name string, bc *dataplane.PacketBytes) { // long enough for be2's estimate to fall toward its checks'
		if name == "be1" {
			serve(bc)
		}
	})
	if err := f.plane.SetWeight("web", "be2", 1); err != nil {
		t.Fatal(err)
	}
	l := f.shared.Loads.Load()
	us1, _ := l.Latency[ids["be1"]].Micros()
	us2, ok2 := l.Latency[ids["be2"]].Micros()
	t.Logf("published latency: be1 %d µs, be2 %d µs (sampled %v)", us1, us2, ok2)

	to := map[netip.Addr]int{}
	for i := range 100 {
		r := f.lc.send(syn(t, uint16(30000+i), "S"))
		if r.verdict != dataplane.Tx {
			t.Fatalf("SYN %d: verdict %v", i, r.verdict)
		}
		to[r.dst]++
	}
	if n1 := to[f.addr("be1")]; n1 < 25 {
		t.Errorf("be1, holding 10 connections, got %d of 100 new flows and be2, which served none since its weight came back, %d: "+
			"be2 is ranked at its health check's round trip (%d µs) against be1's handshakes (%d µs) "+
			"(the cold-start trap ewma_penalty is there to prevent)",
			n1, to[f.addr("be2")], us2, us1)
	}
}

// checkedEWMA starts the health checks of f's VIP vip, whose backends
// are be1 and be2, with prober, and waits until both are up with a check
// round trip. It returns the backends' ids and fold, which runs seconds
// of the signals fold over cumulative counters as the workers keep them,
// calling each second serve with each backend's counters to update.
func checkedEWMA(t *testing.T, f *fixture, vip string, prober health.Prober) (ids map[string]uint32, fold func(seconds int, serve func(name string, bc *dataplane.PacketBytes))) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := f.plane.StartHealth(ctx, health.ManagerOptions{NewProber: func(string, health.Target) (health.Prober, error) {
		return prober, nil
	}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both backends up with a check round trip", func() bool {
		for _, n := range []string{"be1", "be2"} {
			hs, ok := f.plane.HealthStatus(vip, n)
			if !ok || hs.RTTEWMA == 0 || f.backend(n).Health != "up" {
				return false
			}
		}
		return true
	})
	c := []dataplane.Counters{{VIPs: make([]dataplane.PacketBytes, dataplane.MaxVIPs), Backends: make([]dataplane.PacketBytes, dataplane.MaxBackends)}}
	ids = map[string]uint32{}
	svc := f.shared.Services.Load()
	for _, id := range f.vipByName(vip).Members {
		ids[svc.Backends[id].Name] = id
	}
	fold = func(seconds int, serve func(name string, bc *dataplane.PacketBytes)) {
		for range seconds {
			svc := f.shared.Services.Load()
			for _, name := range []string{"be1", "be2"} {
				bc := &c[0].Backends[ids[name]]
				bc.Gen = svc.Backends[ids[name]].Gen
				serve(name, bc)
			}
			f.advance(time.Second)
			f.plane.mu.Lock()
			if f.plane.foldSignals(c, f.plane.now()) {
				f.plane.rebuildLocked()
			}
			f.plane.mu.Unlock()
		}
	}
	return ids, fold
}

// ewmaPair is a peak-ewma VIP "web" of two checked backends, be1 and be2
// (checks every 100 ms, rise 1), without slow start.
var ewmaPair = configtest.New().
	Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
	Section("conntrack", "capacity = 65536").
	Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
	Section("health", `kind = "tcp"`, `interval = "100ms"`, `timeout = "80ms"`, `rise = 1`, `fall = 3`).
	VIP("web", configtest.Web, 80, `scheduler = "peak-ewma"`).
	Backend("be1", "10.0.1.1").
	Backend("be2", "10.0.1.2").
	String()

// served40ms adds 100 completed handshakes of 40 ms to bc.
func served40ms(bc *dataplane.PacketBytes) {
	bc.SYNs += 100
	bc.Established += 100
	bc.HandshakeMs += 100 * 40
}
