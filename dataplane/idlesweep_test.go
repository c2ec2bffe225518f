package dataplane

import (
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
)

// An idle loop sweeps the largest connection table in well under the
// 2^31 ms within which conntrack must see an entry again (its clock wraps
// after 49.7 days), at every idle sleep up to the largest idle_max_sleep:
// at 8 buckets a poll and 1 s sleeps a pass took 24 days.
func TestIdleSweepPassBounded(t *testing.T) {
	buckets := conntrack.MaxCapacity / conntrack.BucketSlots
	for s := time.Microsecond; ; s = min(2*s, config.MaxIdleMaxSleep) {
		pass := time.Duration(buckets/idleSweep(s)) * s
		if pass > time.Hour {
			t.Errorf("idle sleep %v: a pass over %d buckets takes %v", s, buckets, pass)
		}
		if s == config.MaxIdleMaxSleep {
			break
		}
	}
}
