package sim

import (
	"bytes"
	"strings"
	"testing"
)

// TestSlow checks fulcrum-sim slow's default run for what the seeds say,
// not for their rig's figures: round robin sends the slow servers exactly
// their quarter (section 4.2), distinct draws send them clearly less than
// draws with replacement (seed 002), and the latency-aware and load-aware
// rules keep the slow servers' share small.
func TestSlow(t *testing.T) {
	c := DefaultSlowConfig()
	res, err := Slow(c)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range Farms {
		got := map[string]SlowResult{}
		for _, r := range res[i] {
			got[r.Rule.Name] = r
			sum := 0
			for _, n := range r.Sent {
				sum += n
			}
			if sum != c.Requests {
				t.Errorf("%s %s: %d requests counted, want %d", f.Name, r.Rule.Name, sum, c.Requests)
			}
			if r.P50 != 2 {
				t.Errorf("%s %s: p50 %.2f ms, want the fast servers' 2 ms", f.Name, r.Rule.Name, r.P50)
			}
			t.Logf("%s | %-18s %6.2f%% p50 %.2f p99 %.2f rps %.0f", f.Name, r.Rule.Name, r.SlowShare, r.P50, r.P99, r.RPS)
		}
		rr, lc := got["round robin"], got["least connections"]
		rep, dis, pe := got["random(2) replace"], got["random(2) distinct"], got["peak EWMA"]
		if rr.SlowShare < 24.99 || rr.SlowShare > 25.01 || rr.P99 != 50 {
			t.Errorf("%s: round robin sent %.2f%% to the slow servers (p99 %.2f ms), want 25%% and 50 ms", f.Name, rr.SlowShare, rr.P99)
		}
		// With replacement both draws land on a slow server in
		// (slow/servers)² = 1/16 of the choices in both farms, and the
		// slow server then has no competitor.
		if rep.SlowShare < 5.5 || rep.SlowShare > 12 {
			t.Errorf("%s: random(2) with replacement sent %.2f%%, want about 6-9%%", f.Name, rep.SlowShare)
		}
		if !(dis.SlowShare < rep.SlowShare-1) {
			t.Errorf("%s: distinct draws sent %.2f%%, not clearly below with replacement's %.2f%%", f.Name, dis.SlowShare, rep.SlowShare)
		}
		if !(dis.Mean < rep.Mean && rep.RPS < dis.RPS) {
			t.Errorf("%s: distinct draws' mean %.2f ms / %.0f rps do not beat with replacement's %.2f ms / %.0f rps",
				f.Name, dis.Mean, dis.RPS, rep.Mean, rep.RPS)
		}
		if lc.SlowShare > 5 || pe.SlowShare > dis.SlowShare {
			t.Errorf("%s: least connections %.2f%%, peak EWMA %.2f%% (distinct p2c %.2f%%)", f.Name, lc.SlowShare, pe.SlowShare, dis.SlowShare)
		}
	}
	// Section 4.2's single slow server: peak EWMA learns it is 25 times
	// slower and, with two distinct candidates, always has a fast one to
	// prefer, so the tail is the fast servers'.
	for _, r := range res[0] {
		if r.Rule.Name == "peak EWMA" && (r.SlowShare > 0.1 || r.P99 != 2) {
			t.Errorf("section 4.2 peak EWMA: %.2f%% to s4, p99 %.2f ms", r.SlowShare, r.P99)
		}
	}
	var b bytes.Buffer
	if err := WriteSlow(&b, c, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"section 4.2: 4 servers, s1-s3 at 2 ms, s4 at 50 ms\nrule                   to slow       mean       p50       p90       p99     rps\nround robin             25.00%   14.00 ms   2.00 ms  50.00 ms  50.00 ms    2",
		"(HAProxy's own measurement for the change: 8.73% -> 5.16%)",
		"(HAProxy's own measurement for the change: 7.5% -> 6.80%)",
		"32 clients in a closed loop, 30000 requests measured after 3000, seed 3",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSlowSmall(t *testing.T) {
	// One client, no warm-up: round robin is strictly sequential, so the
	// time is the sum of the delays.
	c := SlowConfig{Clients: 1, Requests: 8, Warmup: 0, Seed: 1}
	r := RunSlow(c, Farms[0], SlowRules[0])
	if r.SlowShare != 25 || r.Mean != 14 || r.Sent[3] != 2 {
		t.Errorf("one client, round robin: %+v", r)
	}
	for _, bad := range []SlowConfig{{Clients: 0, Requests: 1}, {Clients: 1, Requests: 0}, {Clients: 1, Requests: 1, Warmup: -1}} {
		if _, err := Slow(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
