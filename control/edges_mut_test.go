package control

import (
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// Found by a mutation audit (no other test pinned it down): a backend the
// passive checks ejected is not healthy for the panic threshold. 5
// backends, be2 ejected, be3 and be4 down by their checks: 2 of 5 healthy
// is under the default 0.5, so the VIP is in panic mode and new flows
// spread over all five (be2 included). Counting the ejected be2 as healthy
// (3 of 5) left the VIP out of panic mode with all new flows on be1 and
// be5. TestPanicOverThenEjectionEndRamps went from 1 (or 2) of 5 to 3 of 5,
// below the threshold either way.
func TestEdgeEjectedNotHealthyForPanicThreshold(t *testing.T) {
	f := newFixture(t, checkedWeb(5, "30s"))
	f.allUp()
	f.rebuild()
	f.plane.mu.Lock()
	st := f.plane.backends[dataplane.BackendRef{VIP: "web", Backend: "be2"}]
	st.passive.backoff = time.Hour
	st.passive.until = f.plane.now().Add(time.Hour)
	f.plane.mu.Unlock()
	f.rebuild()
	f.setHealthOf("web", "be3", false)
	f.setHealthOf("web", "be4", false)
	if !f.plane.Panicked()["web"] {
		t.Fatal("not in panic mode with 2 of 5 healthy (be2 ejected, be3 and be4 down)")
	}
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w == 0 {
		t.Errorf("panic mode: ejected be2 at weight 0; want it used like every backend")
	}
}
