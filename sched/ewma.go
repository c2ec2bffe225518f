package sched

// EWMA is a backend's latency average in integer microseconds (the seed 003
// exercise's "thousandths of a millisecond"), updated with the exercise's
// exact arithmetic so that every language and every lcore computes the same
// digits:
//
//	ewma = (3*sample + 7*ewma) / 10     (alpha = 0.3, integer division)
//
// The first sample starts the average; it is never blended with 0 (the
// exercise's "common mistakes"). The zero EWMA has no sample yet; Micros
// says so, and PeakEWMA charges such a backend Options.Penalty.
//
// EWMA is a small comparable value that never allocates. It is not safe for
// concurrent use: like the rest of a Load, it belongs to one owner.
type EWMA struct {
	// v is the average plus one, so that the zero value means "no sample"
	// while a sample of 0 µs stays expressible.
	v uint64
}

// Micros returns the average in microseconds, and whether any sample has
// been observed. Without a sample it returns 0, false: the exercise's
// starting value (and its cold-start trap, see PeakEWMA).
func (e EWMA) Micros() (us int64, ok bool) {
	if e.v == 0 {
		return 0, false
	}
	return int64(e.v - 1), true
}

// Observe blends a latency sample (microseconds) into the average with the
// exercise's arithmetic: the first sample starts the average, later ones
// give (3*sample + 7*ewma) / 10, truncated. A negative sample counts as 0
// and one above MaxSample as MaxSample.
//
// Samples 100, 200 and 1000 ms (100000, 200000, 1000000 µs) leave the
// average at 100.000, 130.000 and 391.000 ms.
func (e *EWMA) Observe(us int64) {
	s := clampSample(us)
	if e.v == 0 {
		e.v = s + 1
		return
	}
	e.v = (3*s+7*(e.v-1))/10 + 1
}

// ObservePeak is Observe with Finagle's "peak" twist (PeakEwma in
// finagle-core's balancer package): a sample above the average replaces it
// at once, so a backend that turns slow is penalised on its first slow
// answer, while a faster sample decays the average with the exercise's
// arithmetic. Finagle decays by elapsed time (a 10 s time constant); this
// decays per sample, which needs no clock and no floating point and stays
// exactly reproducible. PeakEWMA pickers are fed with ObservePeak; the
// exercise (fulcrum-sim ewma) uses Observe.
func (e *EWMA) ObservePeak(us int64) {
	s := clampSample(us)
	if e.v == 0 || s >= e.v-1 {
		e.v = s + 1
		return
	}
	e.v = (3*s+7*(e.v-1))/10 + 1
}

func clampSample(us int64) uint64 {
	switch {
	case us < 0:
		return 0
	case us > MaxSample:
		return MaxSample
	}
	return uint64(us)
}

// Cost is the exercise's cost of a backend, latency × (active + 1), with
// latency in microseconds: "a backend that answers in 10 ms but already
// holds 9 requests costs 10 * 10 = 100, the same as an idle backend
// averaging 100 ms" (seed 003). Latency is clamped to [0, MaxSample] and
// active to [0, MaxActive], so the product always fits.
//
// PeakEWMA ranks backends by Cost divided by weight; fulcrum-sim ewma uses
// Cost as is, with the exercise's latency of 0 for a backend without
// samples.
func Cost(latencyUS, active int64) uint64 {
	return clampSample(latencyUS) * (clampActive(active) + 1)
}

func clampActive(a int64) uint64 {
	switch {
	case a < 0:
		return 0
	case a > MaxActive:
		return MaxActive
	}
	return uint64(a)
}
