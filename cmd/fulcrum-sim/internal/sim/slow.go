// A slow server in a closed loop: the seed chapter's section 4.2 (HAProxy
// in front of s1-s3 at 2 ms and s4 at 50 ms, wrk with 32 connections) and
// the farms of the HAProxy random(<draws>) patch (seed 002).

package sim

import (
	"container/heap"
	"fmt"
	"io"
	"math"

	"github.com/fulcrumlb/fulcrum/sched"
)

// Farm is a set of ideal servers: each answers every request after its
// fixed delay, however many it holds (seed 002: "ideal servers (fixed
// delays)"), as the chapter's 2 ms and 50 ms test servers do.
type Farm struct {
	Name     string
	Delays   []float64 // ms, one per server
	Measured string    // the source's figure for random(2), before -> after the patch
}

// slowThreshold separates the slow servers from the others, in ms.
const slowThreshold = 10

// Farms are the two setups of fulcrum-sim slow.
var Farms = []Farm{
	{"section 4.2: 4 servers, s1-s3 at 2 ms, s4 at 50 ms", []float64{2, 2, 2, 50}, "8.73% -> 5.16%"},
	{"HAProxy random(<draws>) change: 8 servers, s1-s6 at 2 ms, s7-s8 at 50 ms", []float64{2, 2, 2, 2, 2, 2, 50, 50}, "7.5% -> 6.80%"},
}

// SlowRules are the rules fulcrum-sim slow compares, all reading the
// requests each server holds (what HAProxy's leastconn and random(2) count
// and what Fulcrum counts as active flows).
var SlowRules = []Rule{
	{"round robin", sched.RoundRobin, sched.Options{}, NoSignal},
	{"least connections", sched.LeastConn, sched.Options{}, InSystem},
	{"random(2) replace", sched.P2C, sched.Options{WithReplacement: true}, InSystem},
	{"random(2) distinct", sched.P2C, sched.Options{}, InSystem},
	{"peak EWMA", sched.PeakEWMA, sched.Options{}, InSystem},
}

// SlowConfig is the closed loop: Clients clients each send a request, wait
// for its answer and send the next at once (wrk -c32). The first Warmup
// requests are not measured, the next Requests are.
type SlowConfig struct {
	Clients  int
	Requests int
	Warmup   int
	Seed     uint64
}

// Defaults of fulcrum-sim slow: the chapter's 32 connections and the
// patch's "30000 requests after a warm-up".
const (
	DefaultClients      = 32
	DefaultSlowRequests = 30_000
	DefaultWarmup       = 3_000
)

// DefaultSlowConfig is fulcrum-sim slow's default setup.
func DefaultSlowConfig() SlowConfig {
	return SlowConfig{Clients: DefaultClients, Requests: DefaultSlowRequests, Warmup: DefaultWarmup, Seed: DefaultRunSeed}
}

// Check reports the first out-of-range parameter.
func (c SlowConfig) Check() error {
	switch {
	case c.Clients < 1 || c.Clients > 100_000:
		return fmt.Errorf("clients %d: must be between 1 and 100000", c.Clients)
	case c.Requests < 1 || c.Requests > 10_000_000:
		return fmt.Errorf("requests %d: must be between 1 and 10000000", c.Requests)
	case c.Warmup < 0 || c.Warmup > 10_000_000:
		return fmt.Errorf("warmup %d: must be between 0 and 10000000", c.Warmup)
	}
	return nil
}

// SlowResult is one rule on one farm, over the measured requests.
type SlowResult struct {
	Rule Rule
	// Sent is the number of measured requests each server received.
	Sent []int
	// SlowShare is the percentage of them sent to the slow servers.
	SlowShare float64
	// Mean and the percentiles of the latency, in ms.
	Mean, P50, P90, P99 float64
	// RPS is the measured requests per second of simulated time.
	RPS float64
}

// Slow runs every rule of SlowRules on every farm of Farms.
func Slow(c SlowConfig) ([][]SlowResult, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	out := make([][]SlowResult, len(Farms))
	for i, f := range Farms {
		for _, r := range SlowRules {
			out[i] = append(out[i], RunSlow(c, f, r))
		}
	}
	return out, nil
}

// completion is a request's answer reaching its client.
type completion struct {
	at, sent float64
	client   int
	server   int
	measured bool
	seq      int // orders simultaneous answers deterministically
}

type completions []completion

func (h completions) Len() int { return len(h) }
func (h completions) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h completions) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *completions) Push(x any)   { *h = append(*h, x.(completion)) }
func (h *completions) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// RunSlow runs one rule on one farm; c must pass Check. The clients start
// at random moments within the first millisecond.
func RunSlow(c SlowConfig, f Farm, r Rule) SlowResult {
	rng := sched.NewRand(c.Seed)
	picker := sched.MustNew(r.Kind, r.Opts)
	loads := make([]sched.Load, len(f.Delays))
	for i := range loads {
		loads[i].Weight = 1
	}
	res := SlowResult{Rule: r, Sent: make([]int, len(f.Delays))}
	lat := make([]float64, 0, c.Requests)
	total := c.Warmup + c.Requests
	sent := 0
	var h completions
	var firstSent, lastDone float64
	send := func(client int, t float64) {
		s := picker.Pick(loads, &rng)
		loads[s].Active++
		measured := sent >= c.Warmup
		if measured {
			if sent == c.Warmup {
				firstSent = t
			}
			res.Sent[s]++
		}
		heap.Push(&h, completion{at: t + f.Delays[s], sent: t, client: client, server: s, measured: measured, seq: sent})
		sent++
	}
	for cl := range c.Clients {
		if sent < total {
			send(cl, rng.Float64())
		}
	}
	for h.Len() > 0 {
		e := heap.Pop(&h).(completion)
		l := &loads[e.server]
		l.Active--
		l.EWMA.ObservePeak(int64(math.Round((e.at - e.sent) * 1000)))
		if e.measured {
			lat = append(lat, e.at-e.sent)
			lastDone = max(lastDone, e.at)
		}
		if sent < total {
			send(e.client, e.at)
		}
	}
	slow := 0
	for s, n := range res.Sent {
		if f.Delays[s] > slowThreshold {
			slow += n
		}
	}
	res.SlowShare = 100 * float64(slow) / float64(c.Requests)
	mean, q := latencies(lat)
	res.Mean, res.P50, res.P90, res.P99 = mean, q(0.50), q(0.90), q(0.99)
	if d := lastDone - firstSent; d > 0 {
		res.RPS = float64(c.Requests) / d * 1000
	}
	return res
}

// WriteSlow prints one table per farm and the with-replacement vs distinct
// comparison beside the patch's measurement.
func WriteSlow(w io.Writer, c SlowConfig, res [][]SlowResult) error {
	ew := &errWriter{w: w}
	for i, f := range Farms {
		if i > 0 {
			ew.printf("\n")
		}
		ew.printf("%s\n", f.Name)
		ew.printf("%-20s%10s%11s%10s%10s%10s%8s\n", "rule", "to slow", "mean", "p50", "p90", "p99", "rps")
		var replace, distinct float64
		for _, r := range res[i] {
			ew.printf("%-20s%9.2f%%%8.2f ms%7.2f ms%7.2f ms%7.2f ms%8.0f\n",
				r.Rule.Name, r.SlowShare, r.Mean, r.P50, r.P90, r.P99, r.RPS)
			switch r.Rule.Name {
			case "random(2) replace":
				replace = r.SlowShare
			case "random(2) distinct":
				distinct = r.SlowShare
			}
		}
		ew.printf("random(2) to the slow servers, with replacement -> distinct draws: %.2f%% -> %.2f%% (HAProxy's own measurement for the change: %s)\n",
			replace, distinct, f.Measured)
	}
	ew.printf("\n%d clients in a closed loop, %d requests measured after %d, seed %d; ideal servers with fixed delays.\n",
		c.Clients, c.Requests, c.Warmup, c.Seed)
	return ew.err
}
