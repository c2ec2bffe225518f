package control

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
)

// rttByAddr is a prober whose checks pass in a round trip per backend.
type rttByAddr map[netip.Addr]time.Duration

func (p rttByAddr) Probe(_ context.Context, a netip.AddrPort) (time.Duration, error) {
	return p[a.Addr()], nil
}

// A UDP VIP under peak-ewma has no handshakes: its backends' only latency
// samples are their checks' round trips, all of the same kind, so they
// compare fairly (the cold-start trap the penalty floor fixes is a
// check's round trip ranked against handshakes). The floor is applied
// while a backend has no handshake folded since it became usable, which
// for a UDP backend is for ever: every backend of a UDP VIP is charged
// max(check, ewma_penalty), and below 30 ms the latency signal is gone.
// be1 answers its checks in 0.2 ms, be2 in 20 ms; both serve 10 flows.
// Before the floor be1 was published at ~0.2 ms and be2 at ~20 ms, and
// be1 took most new flows; now both are 30 ms and they split evenly.
func TestPeakEWMAUDPKeepsCheckLatencySignal(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
		Section("health", `kind = "tcp"`, `port = 8080`, `interval = "100ms"`, `timeout = "80ms"`, `rise = 1`, `fall = 3`).
		VIP("dns", configtest.Web, 53, `protocol = "udp"`, `scheduler = "peak-ewma"`).
		Backend("be1", "10.0.1.1").
		Backend("be2", "10.0.1.2").
		String()
	f := newFixture(t, toml)
	ids, fold := checkedEWMA(t, f, "dns", rttByAddr{f.addr("be1"): 200 * time.Microsecond, f.addr("be2"): 20 * time.Millisecond})
	fold(10, func(_ string, bc *dataplane.PacketBytes) { bc.Active = 10 }) // ten seconds of serving, 10 flows each
	l := f.shared.Loads.Load()
	us1, _ := l.Latency[ids["be1"]].Micros()
	us2, _ := l.Latency[ids["be2"]].Micros()
	to := map[netip.Addr]int{}
	for i := range 100 {
		r := f.lc.send(dptest.UDP(t, uint16(30000+i), netip.MustParseAddrPort("203.0.113.7:53")))
		if r.verdict != dataplane.Tx {
			t.Fatalf("datagram %d: verdict %v", i, r.verdict)
		}
		to[r.dst]++
	}
	t.Logf("published latency: be1 %d µs, be2 %d µs; new flows be1 %d, be2 %d", us1, us2, to[f.addr("be1")], to[f.addr("be2")])
	if us1 >= us2 {
		t.Errorf("be1 (checks 0.2 ms) published at %d µs, be2 (checks 20 ms) at %d µs: a UDP VIP's only latency signal is floored to ewma_penalty for ever", us1, us2)
	}
	if n1 := to[f.addr("be1")]; n1 < 75 {
		t.Errorf("be1 (0.2 ms) got %d of 100 new flows, be2 (20 ms) %d, with equal loads: peak-ewma on a UDP VIP ignores latency below ewma_penalty", n1, to[f.addr("be2")])
	}
}
