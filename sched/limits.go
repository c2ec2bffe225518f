package sched

import (
	"errors"
	"time"
)

// Limits and defaults an operator may need, in one place.
const (
	// DefaultDraws is the number of candidates P2C and PeakEWMA compare:
	// two, the power of two choices (Mitzenmacher), Envoy's LEAST_REQUEST
	// choice_count default and HAProxy's random(2).
	DefaultDraws = 2

	// MaxDraws bounds Options.Draws so that a choice keeps its candidates
	// in a fixed array on the stack. Beyond a handful of draws p2c is
	// least-connections with extra random numbers (seed 000, section 4.1);
	// a count at or above the number of eligible backends compares them all.
	MaxDraws = 16

	// DefaultPenalty is the latency PeakEWMA assumes for a backend with no
	// sample yet: 30 ms, Linkerd's EWMA_DEFAULT_RTT, the starting estimate
	// of its peak-EWMA balancer. High enough that a newcomer does not soak
	// up every new flow while its caches are cold (seed 003, "The
	// cold-start trap"), low enough that it gets flows to be measured on.
	DefaultPenalty = 30 * time.Millisecond

	// MaxSample is the largest latency, in microseconds, that EWMA keeps:
	// larger samples count as MaxSample (about 71.6 minutes). The bound
	// keeps latency × (active+1) in 64 bits for every active count up to
	// MaxActive, so costs compare exactly.
	MaxSample = 1<<32 - 1

	// MaxActive is the largest Active the load-aware pickers distinguish;
	// larger counts (and a negative count, which is 0) are clamped. No
	// backend holds four billion flows: conntrack is far smaller.
	MaxActive = 1<<32 - 1
)

// Errors New and ParseKind return, wrapped with the value at fault. Test
// for them with errors.Is.
var (
	ErrUnknownKind = errors.New("unknown scheduler")
	ErrNotPicker   = errors.New("chosen by the VIP's Maglev table, not by a picker")
	ErrDraws       = errors.New("draws out of range")
	ErrPenalty     = errors.New("penalty out of range")
)
