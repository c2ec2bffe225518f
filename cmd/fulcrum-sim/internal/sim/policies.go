// The seed chapter's section 1.1 experiment: the same fleet and the same
// traffic under different rules for choosing a server.

package sim

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/fulcrumlb/fulcrum/sched"
)

// The chapter's parameters (section 1.1's simulate()).
const (
	DefaultServers  = 10
	DefaultLoad     = 0.8
	DefaultRequests = 200_000
	DefaultRunSeed  = 3 // the seed of policies and slow; the chapter's

	// MinLoad is the lowest load policies accepts. The clock is a float64
	// of milliseconds; at load L a run ends near requests / (L × servers)
	// ms, and below 0.01% with 10 million requests on one server that is
	// past 1e11 ms, where a float64 no longer keeps the thousandths of a
	// millisecond of a 1 ms service time (and a subnormal load makes the
	// clock +Inf, and every latency NaN).
	MinLoad = 0.0001
)

// Signal is what a load-aware rule compares, turned into sched.Load.Active
// at each choice.
type Signal uint8

const (
	// NoSignal: the rule reads no load (random, round robin).
	NoSignal Signal = iota
	// Backlog is the server's queued work, free_at - t in nanoseconds:
	// what the chapter's two random choices and least loaded compare ("the
	// one that will be free sooner"). Only a simulation can see it.
	Backlog
	// InSystem is the number of requests at the server, waiting or in
	// service: what an LB counts (its active flows), and what HAProxy's
	// leastconn and random(<draws>) compare.
	InSystem
)

// Rule is one way of choosing a server: a sched picker fed a signal.
type Rule struct {
	Name   string
	Kind   sched.Kind
	Opts   sched.Options
	Signal Signal
}

// PolicyRules are the rows of fulcrum-sim policies: the chapter's four,
// then the load signal an LB really has, with the pickers Fulcrum offers
// (every one of sched.Kinds, see withEveryPicker).
var PolicyRules = withEveryPicker([]Rule{
	{"random", sched.Random, sched.Options{}, NoSignal},
	{"round robin", sched.RoundRobin, sched.Options{}, NoSignal},
	{"two random choices", sched.P2C, sched.Options{}, Backlog},
	{"least loaded", sched.LeastConn, sched.Options{}, Backlog},
	{"least connections", sched.LeastConn, sched.Options{}, InSystem},
	{"peak EWMA", sched.PeakEWMA, sched.Options{}, InSystem},
	{"random(2) replace", sched.P2C, sched.Options{WithReplacement: true}, InSystem},
	{"random(2) distinct", sched.P2C, sched.Options{}, InSystem},
})

// withEveryPicker appends to rules, under its configuration name and on
// the InSystem signal, each picker of sched.Kinds that no rule runs, so a
// new scheduler shows up in the simulator without an edit here.
func withEveryPicker(rules []Rule) []Rule {
	for _, k := range sched.Kinds() {
		if k.IsPicker() && !slices.ContainsFunc(rules, func(r Rule) bool { return r.Kind == k }) {
			rules = append(rules, Rule{k.String(), k, sched.Options{}, InSystem})
		}
	}
	return rules
}

// PolicyConfig is the experiment's setup: Servers servers, each serving
// one request at a time in exponential time with mean 1 ms, FIFO;
// exponential arrivals at Load × Servers per ms; Requests requests.
type PolicyConfig struct {
	Servers  int
	Load     float64
	Requests int
	Seed     uint64
}

// DefaultPolicyConfig is the chapter's setup.
func DefaultPolicyConfig() PolicyConfig {
	return PolicyConfig{Servers: DefaultServers, Load: DefaultLoad, Requests: DefaultRequests, Seed: DefaultRunSeed}
}

// Check reports the first out-of-range parameter.
func (c PolicyConfig) Check() error {
	switch {
	case c.Servers < 1 || c.Servers > 10_000:
		return fmt.Errorf("servers %d: must be between 1 and 10000", c.Servers)
	case !(c.Load > 0 && c.Load < 1):
		return fmt.Errorf("load %v: must be above 0 and below 1 (at 1 or more the queues grow without bound)", c.Load)
	case c.Load < MinLoad:
		return fmt.Errorf("load %v: must be at least %v (below, the arrival times outgrow the simulated clock's precision)", c.Load, MinLoad)
	case c.Requests < 1 || c.Requests > 10_000_000:
		return fmt.Errorf("requests %d: must be between 1 and 10000000", c.Requests)
	}
	return nil
}

// PolicyResult is one rule's time in the system (queue wait plus service),
// in ms: the mean and the 99th percentile.
type PolicyResult struct {
	Rule      Rule
	Mean, P99 float64
}

// Policies runs the experiment for each of PolicyRules, each from a fresh
// generator seeded with c.Seed, as the chapter's script does.
func Policies(c PolicyConfig) ([]PolicyResult, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	var res []PolicyResult
	for _, r := range PolicyRules {
		mean, p99 := RunPolicy(c, r)
		res = append(res, PolicyResult{r, mean, p99})
	}
	return res, nil
}

// RunPolicy runs the experiment for one rule; c must pass Check.
func RunPolicy(c PolicyConfig, r Rule) (mean, p99 float64) {
	rng := sched.NewRand(c.Seed)
	p := &schedPolicy{
		rule:   r,
		picker: sched.MustNew(r.Kind, r.Opts),
		rng:    &rng,
		loads:  make([]sched.Load, c.Servers),
		queues: make([]fifo, c.Servers),
	}
	for i := range p.loads {
		p.loads[i].Weight = 1
	}
	return simulate(c, func(rate float64) float64 { return expo(&rng, rate) }, p)
}

// expo is an exponential variate with the given rate, by inversion.
func expo(r *sched.Rand, rate float64) float64 {
	return -math.Log(1-r.Float64()) / rate
}

// policy chooses a server for request i arriving at t; admitted tells it
// the request's completion time at server s.
type policy interface {
	choose(i int, t float64, freeAt []float64) int
	admitted(s int, t, done float64)
}

// simulate is the chapter's simulate(), line for line: the same draws in
// the same order (arrival gap, choice, service time), so that driven by
// Python's generator it prints the chapter's table (see the tests).
func simulate(c PolicyConfig, expovariate func(rate float64) float64, p policy) (mean, p99 float64) {
	freeAt := make([]float64, c.Servers) // when each server finishes its queue
	lat := make([]float64, c.Requests)
	rate := c.Load * float64(c.Servers) // arrivals per ms (mean service time = 1 ms)
	t := 0.0
	for i := range c.Requests {
		t += expovariate(rate)
		s := p.choose(i, t, freeAt)
		start := max(t, freeAt[s])
		freeAt[s] = start + expovariate(1.0)
		lat[i] = freeAt[s] - t
		p.admitted(s, t, freeAt[s])
	}
	mean, q := latencies(lat)
	return mean, q(0.99)
}

// latencies sorts lat (not empty) and returns its mean and its quantiles
// as the chapter's script takes them: q(p) = sorted[int(p × n)].
func latencies(lat []float64) (mean float64, q func(p float64) float64) {
	slices.Sort(lat)
	var sum float64
	for _, l := range lat {
		sum += l
	}
	return sum / float64(len(lat)), func(p float64) float64 { return lat[int(p*float64(len(lat)))] }
}

// schedPolicy chooses with a sched picker, keeping the loads it reads up to
// date: the requests in each server's queue (arrival and completion times,
// in order) so that Active counts them and EWMA learns their latencies as
// they complete.
type schedPolicy struct {
	rule   Rule
	picker sched.Picker
	rng    *sched.Rand
	loads  []sched.Load
	queues []fifo
}

type job struct{ arrived, done float64 }

// fifo is a server's requests in the system, oldest first.
type fifo struct {
	jobs []job
	head int
}

func (q *fifo) push(j job) {
	if q.head > 1024 && q.head*2 > len(q.jobs) {
		q.jobs = q.jobs[:copy(q.jobs, q.jobs[q.head:])]
		q.head = 0
	}
	q.jobs = append(q.jobs, j)
}

func (q *fifo) len() int { return len(q.jobs) - q.head }

func (p *schedPolicy) choose(_ int, t float64, freeAt []float64) int {
	for s := range p.loads {
		l := &p.loads[s]
		q := &p.queues[s]
		for q.len() > 0 && q.jobs[q.head].done <= t {
			j := q.jobs[q.head]
			q.head++
			// The latency the LB would measure for a request: its whole
			// time in the system (peak-EWMA's signal, Finagle).
			l.EWMA.ObservePeak(int64(math.Round((j.done - j.arrived) * 1000)))
		}
		switch p.rule.Signal {
		case Backlog:
			l.Active = int64(math.Ceil(max(0, freeAt[s]-t) * 1e6))
		case InSystem:
			l.Active = int64(q.len())
		}
	}
	return p.picker.Pick(p.loads, p.rng)
}

func (p *schedPolicy) admitted(s int, t, done float64) {
	if p.rule.Signal == InSystem || p.rule.Kind == sched.PeakEWMA {
		p.queues[s].push(job{t, done})
	}
}

// WritePolicies prints the results in the chapter's format, then what the
// extra rows compare.
func WritePolicies(w io.Writer, c PolicyConfig, res []PolicyResult) error {
	ew := &errWriter{w: w}
	ew.printf("%-20s%9s%10s\n", "policy", "mean", "p99")
	for _, r := range res {
		ew.printf("%-20s%7.2f ms%8.2f ms\n", r.Rule.Name, r.Mean, r.P99)
	}
	ew.printf("\n%d servers at %.0f%% load, %d requests, seed %d; exponential service times, mean 1 ms, FIFO.\n",
		c.Servers, 100*c.Load, c.Requests, c.Seed)
	ew.printf("two random choices and least loaded compare queued work (the chapter's free_at);\n" +
		"least connections, peak EWMA and random(2) compare requests at the server, as an LB can;\n" +
		"random(2) replace may draw the same server twice (HAProxy before its random(<draws>) change).\n")
	return ew.err
}

// errWriter keeps the first write error, so printing code stays flat.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
