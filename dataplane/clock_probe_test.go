package dataplane

import (
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
)

// TestProbeHandshakeAcrossWrap: a handshake whose SYN comes just before the
// clock wraps and whose ACK just after adds its real time to HandshakeMs,
// not 49 days; likewise after a SYN retransmitted across the wrap. Both the
// general path (first burst) and the fused path (a known flow) are used.
func TestProbeHandshakeAcrossWrap(t *testing.T) {
	for _, start := range []conntrack.Time{^conntrack.Time(0) - 15, ^conntrack.Time(0) - 9, 1<<31 - 15} {
		r := newRig(t, testConfig)
		r.now = start
		r.run(frame(t, "198.51.100.61", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true)) // at start+10
		r.now += 20
		r.run(frame(t, "198.51.100.61", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "A", 0, true)) // at start+40
		// Flow 2: SYN, its retransmission 3 s later across the wrap, the ACK.
		r.now = start - 3000
		r.run(frame(t, "198.51.100.61", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "S", 0, true))
		r.now = start + 3000
		r.run(frame(t, "198.51.100.61", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "S", 0, true)) // at start+3010
		r.now += 5
		r.run(frame(t, "198.51.100.61", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 0, true)) // at start+3025
		s := sumBackends(&r.w.c)
		if s.SYNs != 2 || s.Established != 2 || s.SYNRetrans != 1 || s.HandshakeMs != 30+15 {
			t.Errorf("from %d: %+v; want 2 SYNs, 2 established, 1 retransmission, 45 ms", start, s)
		}
		wantBalance(t, r)
	}
}

// TestProbeTokenBucketAcrossWrap: a budget refills by the elapsed time
// across the wrap, and one idle for 2^31 ms or more is full.
func TestProbeTokenBucketAcrossWrap(t *testing.T) {
	const rate, burst = 100, 5 // 100 a second: one token per 10 ms
	b := fullBucket(burst)
	now := ^conntrack.Time(0) - 20
	for range burst {
		if !b.take(now, rate, burst) {
			t.Fatal("full bucket refused")
		}
	}
	if b.take(now, rate, burst) {
		t.Fatal("empty bucket gave a token")
	}
	now += 30 // 10 ms after the wrap: 30 ms elapsed, 3 tokens
	got := 0
	for b.take(now, rate, burst) {
		got++
	}
	if got != 3 {
		t.Errorf("30 ms across the wrap refilled %d tokens, want 3", got)
	}
	for _, idle := range []conntrack.Time{1<<31 - 1, 1 << 31, 1<<31 + 1, ^conntrack.Time(0)} {
		c := b
		got := 0
		for c.take(now+idle, rate, burst) {
			got++
		}
		if got != burst {
			t.Errorf("idle %d ms: %d tokens, want %d", idle, got, burst)
		}
	}
}
