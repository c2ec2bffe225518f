package health

import (
	"net/netip"
	"testing"
	"time"
)

// README: "A reload that moves a VIP's checks to another port keeps each
// backend's verdict until the check at the new port gives its own (rise
// or fall checks later)". The successor checker inherits the predecessor's
// ConsecutiveOK and ConsecutiveFail, counted at the old port, so results
// of two different checks are added up: an Up backend with fall-1
// failures at the old port goes Down on the first failure at the new one,
// and a Down backend with rise-1 passes at the old port comes Up on the
// first pass at the new one.
func TestProbePortMoveVerdictNeedsRiseOrFallAtNewPort(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old      string // results at the old port
		newPort  string // results at the new port
		want     State  // after newPort
		wantFrom State  // after old
	}{
		// rise 3, fall 3
		{"up, fall-1 failures at the old port, one failure at the new", "+++--", "-", Up, Up},
		{"down, rise-1 passes at the old port, one pass at the new", "---++", "+", Down, Down},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Rise, cfg.Fall = 3, 3
			oldT := Target{Addr: netip.MustParseAddrPort("10.0.0.5:80"), Config: cfg}
			oldC, err := NewChecker("b", oldT, proberOf(nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			drive(oldC.m, tc.old, t0, time.Second)
			if s := oldC.Status(); s.State != tc.wantFrom {
				t.Fatalf("at the old port: %v, want %v", s.State, tc.wantFrom)
			}
			newT := oldT
			newT.Config.Port = 8080 // the reload moves the checks: Manager.Set gives the same address's checker a successor that inherits
			newC, err := NewChecker("b", newT, proberOf(nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			newC.inherit(oldC)
			got := drive(newC.m, tc.newPort, t0.Add(time.Minute), time.Second)
			if s := newC.Status(); s.State != tc.want {
				t.Fatalf("after %q at the new port: %v (%v, %s), want %v: %d checks at the new port decided, rise and fall are 3",
					tc.newPort, s.State, got, s.Reason, tc.want, len(tc.newPort))
			}
		})
	}
}
