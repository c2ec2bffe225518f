package dataplane

import (
	"strings"
	"testing"
)

// TestDropNames: every drop reason has one name, unique, in one style (no
// "drop-" prefix: the metric's name says it), so fulcrum_drops_total has
// one series per reason.
func TestDropNames(t *testing.T) {
	seen := map[string]int{}
	ForEachDrop(&Counters{}, func(reason string, _ uint64) {
		seen[reason]++
		if reason == "" || strings.HasPrefix(reason, "drop-") || reason != strings.ToLower(reason) || strings.ContainsAny(reason, " _") {
			t.Errorf("reason %q: not a lower-case, dash-separated name without a drop- prefix", reason)
		}
	})
	for r, n := range seen {
		if n != 1 {
			t.Errorf("reason %q named %d times", r, n)
		}
	}
	for _, want := range []string{"too-big-no-df", "no-headroom", "bad-kind", "no-service", "truncated-tcp"} {
		if seen[want] != 1 {
			t.Errorf("reason %q missing", want)
		}
	}
	if len(seen) != 49 {
		t.Errorf("%d reasons, want 49 (parse 22, encap 7, dataplane 20)", len(seen))
	}
}
