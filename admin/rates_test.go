package admin

import (
	"testing"
	"time"
)

// TestRates: no rate on the first look; looks closer than a second reuse
// the last rates; a later one measures from the previous sample; counters
// that go back (a reused id) start over; stale samples are pruned.
func TestRates(t *testing.T) {
	var r rates
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at             time.Duration
		packets, bytes uint64
		pps, bps, secs float64
	}{
		{0, 100, 1000, 0, 0, 0},
		{500 * time.Millisecond, 150, 1500, 0, 0, 0},       // too soon: no window yet
		{2 * time.Second, 300, 5000, 100, 2000, 2},         // (300-100)/2, (5000-1000)/2
		{2500 * time.Millisecond, 400, 6000, 100, 2000, 2}, // too soon: the last rates
		{6 * time.Second, 700, 6000, 100, 250, 4},          // (700-300)/4, (6000-5000)/4
		{7 * time.Second, 10, 10, 0, 0, 0},                 // went back: start over
	}
	for i, s := range steps {
		pps, bps, secs := r.rate("web", s.packets, s.bytes, t0.Add(s.at))
		if pps != s.pps || bps != s.bps || secs != s.secs {
			t.Errorf("step %d: %v %v %v, want %v %v %v", i, pps, bps, secs, s.pps, s.bps, s.secs)
		}
	}
	r.rate("gone", 1, 1, t0)
	r.rate("web", 20, 20, t0.Add(rateSampleTTL+8*time.Second))
	if _, ok := r.samples["gone"]; ok || len(r.samples) != 1 {
		t.Errorf("samples after the TTL: %v", r.samples)
	}
}
