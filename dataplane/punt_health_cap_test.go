package dataplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/punt"
)

// The health budget is sized from the checks but cannot exceed
// punt.MaxRate. 40,000 TCP-checked backends (within the snapshot's
// 65,536) at a 2 s interval with jitter = 0 (every round starts together)
// need more by config's own formula, and a round's SYN-ACKs are then
// dropped over the budget: healthy backends fail their checks. Such a
// configuration ran before and is still accepted, but Load warns about it
// (naming the key); at a size the budget holds, it does not.
func TestPuntHealthOverMaxRateWarns(t *testing.T) {
	load := func(n int) *config.Config {
		p := filepath.Join(t.TempDir(), "f.toml")
		if err := os.WriteFile(p, []byte(checkedConfig(n, "jitter = 0.0")), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	warns := func(c *config.Config) bool {
		for _, w := range c.Warnings {
			if strings.HasPrefix(w, "dataplane.punt.health:") {
				return true
			}
		}
		return false
	}
	const n = 40000
	big := load(n)
	if big.Dataplane.Punt.Health != punt.MaxRate {
		t.Fatalf("health budget %d, want it capped at %d", big.Dataplane.Punt.Health, punt.MaxRate)
	}
	r := newRig(t, checkedConfig(n, "jitter = 0.0"))
	if lost := checkRound(t, r, n, 10); lost == 0 {
		t.Fatalf("a round of %d checks within 10 ms lost no SYN-ACK at the capped budget: the warning would be wrong", n)
	}
	if !warns(big) {
		t.Errorf("%d TCP-checked backends, jitter 0: answers dropped over the capped budget, yet no dataplane.punt.health warning: %q", n, big.Warnings)
	}
	if small := load(100); warns(small) {
		t.Errorf("100 checked backends warned: %q", small.Warnings)
	}
}
