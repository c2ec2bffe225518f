package health

import (
	"net/netip"
	"testing"
	"time"
)

// A reload that changes what an Unknown backend's check asks (here its
// path: the operator fixes a wrong one) resets the counts in a row, "kept
// until the new check gives its own verdict, rise or fall of its checks
// later" (inherit). But the rule that decides Down after rise+fall checks
// without a verdict (undecided) counts the old check's results too: a
// backend with rise+fall-1 mixed results under the old check is called
// down ("no verdict") by the first check of the new one, which passed.
// At start Unknown routes like Up, so a serving backend is taken out of
// the table by a passing check.
func TestChangedCheckNoVerdictCountsNewChecks(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kind = KindHTTP
	cfg.Rise, cfg.Fall = 2, 3
	oldT := Target{Addr: netip.MustParseAddrPort("10.0.0.5:80"), Config: cfg}
	oldC, err := NewChecker("b", oldT, proberOf(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	drive(oldC.m, "--+-", t0, time.Second) // rise+fall-1 checks, no verdict yet
	if s := oldC.Status(); s.State != Unknown {
		t.Fatalf("old check: %v, want unknown", s.State)
	}
	newT := oldT
	newT.Config.Path = "/healthz" // another question: counts reset
	newC, err := NewChecker("b", newT, proberOf(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	newC.inherit(oldC)
	got := drive(newC.m, "+", t0.Add(time.Minute), time.Second)
	if s := newC.Status(); s.State != Unknown {
		t.Fatalf("one passing check of the new path: %v %v (%s), want still unknown (rise is %d)", s.State, got, s.Reason, cfg.Rise)
	}
}
