package dataplane

import (
	"fmt"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/punt"
)

// checkedConfig is the "web" VIP with n backends (10.1.x.y) checked over
// TCP every 2 s, with the [vip.health] keys given (jitter).
func checkedConfig(n int, keys ...string) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		VIP("web", configtest.Web, 80).
		Sub("[vip.health]", append([]string{`kind = "tcp"`, `interval = "2s"`}, keys...)...)
	for i := 0; i < n; i++ {
		b.Backend(fmt.Sprintf("be%d", i), fmt.Sprintf("10.1.%d.%d", i/250, 1+i%250))
	}
	return b.String()
}

// A round of health checks: every checked backend answers a TCP check with
// a SYN-ACK, then its FIN and ACK (health.AnswersPerCheck: 3), the checks'
// starts spread evenly over spreadMs milliseconds (the best case for a
// token bucket: random starts bunch more). It returns how many SYN-ACKs
// (the answers a check passes or fails on) were not punted.
func checkRound(t *testing.T, r *rig, n, spreadMs int) (lostSYNACK int) {
	t.Helper()
	started := 0
	for ms := 0; ms < max(spreadMs, 1); ms++ {
		upto := n * (ms + 1) / max(spreadMs, 1)
		var fs [][]byte
		synack := map[int]bool{}
		for ; started < upto; started++ {
			src := fmt.Sprintf("10.1.%d.%d", started/250, 1+started%250)
			port := uint16(40000 + started)
			synack[len(fs)] = true
			fs = append(fs,
				frame(t, src, lb4, 80, port, layers.IPProtocolTCP, "SA", 0, true),
				frame(t, src, lb4, 80, port, layers.IPProtocolTCP, "FA", 0, true),
				frame(t, src, lb4, 80, port, layers.IPProtocolTCP, "A", 0, true))
		}
		for off := 0; off < len(fs); off += MaxBurst {
			v := r.runAt(fs[off:min(off+MaxBurst, len(fs))]...)
			for i, x := range v {
				if synack[off+i] && x != Punt {
					lostSYNACK++
				}
			}
		}
		r.now++
	}
	return lostSYNACK
}

// [dataplane.punt] health left out is sized by the checks ("at least twice
// the packets a second their answers bring ... written lower than that, it
// is refused, since the checks' own answers would be dropped"), assuming
// all may reach one lcore. That is the average over an interval; but a
// freshly loaded configuration starts every check within jitter×interval
// (health.firstDelay: 10% of the interval by default), and with jitter = 0
// every check of every round starts at once. The health class's budget
// (a tenth of a second's worth, then the rate) then drops most of the
// round's answers on the lcore the config says may get them all: healthy
// backends fail their checks (fall = 3 of them in a row calls one down,
// and a fresh instance then announces a table the fleet does not have).
func TestPuntHealthBudgetHoldsACheckRound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		jitter   []string
		spreadMs int
	}{
		// Defaults: interval 2 s, jitter 0.1: the first round of 2000
		// backends starts within 200 ms.
		{"first round, default jitter", 2000, nil, 200},
		{"first round, default jitter, sized rate", 4000, nil, 200},
		// jitter = 0 (README: "turns jitter off"): every round starts
		// together; the answers of 500 backends arrive within 10 ms.
		{"every round, jitter 0", 500, []string{"jitter = 0.0"}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, checkedConfig(tc.n, tc.jitter...))
			rate := r.cfg.Dataplane.Punt.Health
			lost := checkRound(t, r, tc.n, tc.spreadMs)
			if lost != 0 || r.w.c.PuntLimited[punt.Health] != 0 {
				t.Errorf("health rate %d (burst %d) for %d TCP-checked backends: %d of %d checks lost their SYN-ACK; %d answers punt-rate-limited",
					rate, punt.Burst(rate), tc.n, lost, tc.n, r.w.c.PuntLimited[punt.Health])
			}
			wantBalance(t, r)
		})
	}
}
