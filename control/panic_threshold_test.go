package control

import (
	"fmt"
	"testing"
)

// Panic mode starts "when fewer than control.panic_threshold of a VIP's
// backends are healthy" (README, Health checks). With panic_threshold =
// 0.28 and 25 backends, 7 healthy is exactly 28%: not fewer, so no panic
// mode, and the 18 backends whose checks fail must get no new flows. The
// comparison healthy < threshold × total is made in floating point, where
// 0.28 × 25 is 7.000000000000001, and 7 < 7.000000000000001.
func TestPanicAtExactlyTheThreshold(t *testing.T) {
	for _, tc := range []struct {
		threshold      string
		total, healthy int
	}{
		{"0.28", 25, 7},
		{"0.56", 25, 14},
		{"0.5", 24, 12}, // exact in binary: the control case
	} {
		t.Run(fmt.Sprintf("%s_%d_of_%d", tc.threshold, tc.healthy, tc.total), func(t *testing.T) {
			f := newFixture(t, checkedWeb(tc.total, "0s", "panic_threshold = "+tc.threshold))
			f.allUp()
			f.rebuild()
			for i := tc.healthy + 1; i <= tc.total; i++ {
				f.setHealthOf("web", fmt.Sprintf("be%d", i), false)
			}
			f.rebuild()
			dead := pubBackend(t, f.shared, "web", fmt.Sprintf("be%d", tc.total)).Weight
			if f.plane.Panicked()["web"] || dead != 0 {
				t.Errorf("%d of %d healthy (exactly panic_threshold %s, not fewer): panic mode %v, a down backend's weight %d; want no panic mode and 0",
					tc.healthy, tc.total, tc.threshold, f.plane.Panicked()["web"], dead)
			}
		})
	}
}
