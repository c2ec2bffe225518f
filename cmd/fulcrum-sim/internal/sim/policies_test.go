package sim

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// The chapter's table (seed 000, section 1.1), printed by its lb.py with
// Python's generator seeded 3.
var chapterPolicies = []struct {
	rule      string
	mean, p99 float64
}{
	{"random", 5.12, 23.85},
	{"round robin", 2.91, 13.20},
	{"two random choices", 1.75, 6.21},
	{"least loaded", 1.21, 4.93},
}

// Python's random.Random methods the chapter's script calls, on pyRandom
// (CPython 3.11, Lib/random.py and Modules/_randommodule.c).

func (r *pyRandom) random() float64 {
	a, b := r.uint32()>>5, r.uint32()>>6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

func (r *pyRandom) expovariate(lambd float64) float64 { return -math.Log(1.0-r.random()) / lambd }

// randbelow is _randbelow_with_getrandbits for 0 < n < 2^32.
func (r *pyRandom) randbelow(n int) int {
	k := 0
	for n>>k != 0 {
		k++
	}
	for {
		if v := int(r.uint32() >> (32 - k)); v < n {
			return v
		}
	}
}

// pyPolicy is the chapter's choice for its four rules, drawing from the
// same generator as the arrivals, as the script does.
type pyPolicy struct {
	rule string
	rng  *pyRandom
}

func (p pyPolicy) choose(i int, _ float64, freeAt []float64) int {
	n := len(freeAt)
	switch p.rule {
	case "random":
		return p.rng.randbelow(n) // randrange(servers)
	case "round robin":
		return i % n
	case "two random choices":
		// sample(range(servers), 2) for n <= 21: a partial shuffle.
		a := p.rng.randbelow(n)
		b := p.rng.randbelow(n - 1)
		if b == a {
			b = n - 1
		}
		if freeAt[a] <= freeAt[b] {
			return a
		}
		return b
	}
	s := 0 // least loaded: min(range(servers), key=free_at.__getitem__)
	for j := range freeAt {
		if freeAt[j] < freeAt[s] {
			s = j
		}
	}
	return s
}

func (pyPolicy) admitted(int, float64, float64) {}

// TestSimulateIsTheChaptersScript drives simulate with Python's generator
// and the chapter's choices: it prints the chapter's table to the digit,
// so the queueing model (arrivals, FIFO, time in system, percentile) is the
// chapter's, and only the generator differs in fulcrum-sim policies.
func TestSimulateIsTheChaptersScript(t *testing.T) {
	c := DefaultPolicyConfig()
	for _, row := range chapterPolicies {
		rng := newPyRandom(c.Seed)
		mean, p99 := simulate(c, rng.expovariate, pyPolicy{row.rule, rng})
		got := fmt.Sprintf("%7.2f ms%8.2f ms", mean, p99)
		want := fmt.Sprintf("%7.2f ms%8.2f ms", row.mean, row.p99)
		if got != want {
			t.Errorf("%s: %s, chapter %s", row.rule, got, want)
		}
	}
}

// TestPoliciesNearTheChapter runs fulcrum-sim policies' default setup (the
// chapter's, seed 3, sched's pickers and generator): the chapter's four
// rules land within 12% of its figures and in its order, and the extra
// rows keep the order the seeds predict.
func TestPoliciesNearTheChapter(t *testing.T) {
	res, err := Policies(DefaultPolicyConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]PolicyResult{}
	for _, r := range res {
		got[r.Rule.Name] = r
		t.Logf("%-20s%7.2f ms%8.2f ms", r.Rule.Name, r.Mean, r.P99)
	}
	for i, row := range chapterPolicies {
		r := got[row.rule]
		if math.Abs(r.Mean/row.mean-1) > 0.12 || math.Abs(r.P99/row.p99-1) > 0.12 {
			t.Errorf("%s: mean %.2f p99 %.2f, chapter %.2f %.2f (more than 12%% off)", row.rule, r.Mean, r.P99, row.mean, row.p99)
		}
		if i > 0 {
			prev := got[chapterPolicies[i-1].rule]
			if !(r.Mean < prev.Mean && r.P99 < prev.P99) {
				t.Errorf("%s (%.2f/%.2f) is not better than %s (%.2f/%.2f), unlike the chapter",
					row.rule, r.Mean, r.P99, chapterPolicies[i-1].rule, prev.Mean, prev.P99)
			}
		}
	}
	better := func(a, b string) {
		t.Helper()
		if !(got[a].Mean < got[b].Mean && got[a].P99 < got[b].P99) {
			t.Errorf("%s (%.2f/%.2f) should beat %s (%.2f/%.2f)", a, got[a].Mean, got[a].P99, b, got[b].Mean, got[b].P99)
		}
	}
	better("random(2) distinct", "random(2) replace") // seed 002: no wasted draws
	better("least connections", "random(2) distinct") // all servers' counts, not two
	better("least loaded", "least connections")       // queued work, not counts
	better("random(2) replace", "round robin")
}

func TestPoliciesSmall(t *testing.T) {
	c := PolicyConfig{Servers: 3, Load: 0.5, Requests: 2000, Seed: 1}
	res, err := Policies(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(PolicyRules) {
		t.Fatalf("%d results", len(res))
	}
	var b bytes.Buffer
	if err := WritePolicies(&b, c, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if lines[0] != "policy                   mean       p99" {
		t.Errorf("header %q", lines[0])
	}
	for i, r := range PolicyRules {
		if !strings.HasPrefix(lines[i+1], fmt.Sprintf("%-20s", r.Name)) || !strings.HasSuffix(lines[i+1], " ms") || len(lines[i+1]) != 41 {
			t.Errorf("row %q", lines[i+1])
		}
	}
	if !strings.Contains(b.String(), "3 servers at 50% load, 2000 requests, seed 1") {
		t.Errorf("no setup line:\n%s", b.String())
	}
	// A single server: every rule is the same queue.
	one, err := Policies(PolicyConfig{Servers: 1, Load: 0.5, Requests: 1000, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range one[1:] {
		if r.Mean != one[0].Mean {
			t.Errorf("one server: %s mean %v, random %v", r.Rule.Name, r.Mean, one[0].Mean)
		}
	}
}

func TestPolicyConfigCheck(t *testing.T) {
	for _, c := range []PolicyConfig{
		{Servers: 0, Load: 0.5, Requests: 1},
		{Servers: 10001, Load: 0.5, Requests: 1},
		{Servers: 1, Load: 0, Requests: 1},
		{Servers: 1, Load: 1, Requests: 1},
		{Servers: 1, Load: math.NaN(), Requests: 1},
		{Servers: 1, Load: 0.5, Requests: 0},
		{Servers: 1, Load: 0.5, Requests: 10_000_001},
	} {
		if _, err := Policies(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
