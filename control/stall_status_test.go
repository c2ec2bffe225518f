package control

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// A status read (an API call, a /metrics scrape: they run one at a time)
// must not wait out a stalled worker's flow count: that count times out
// only after 5 s and stays posted, so every later read waits 5 s again
// for it, and with two stuck workers a scrape outlived Prometheus's
// default 10 s scrape_timeout (fulcrum_workers_stalled went unseen just
// when it mattered). The stalled worker is named stale and flows-missing,
// and no operation is left posted on it.
func TestStatusSkipsStalledWorker(t *testing.T) {
	f := newStallFixture(t, baseConfig)
	f.plane.WorkersStarted()
	f.advance(6 * time.Second)
	f.fold()
	if st := f.plane.Status(false); !slices.Equal(st.Stalled, []int{1}) {
		t.Fatalf("Stalled %v, want [1]", st.Stalled)
	}
	st := f.plane.Status(true)
	if !slices.Equal(st.Stale, []int{1}) || !slices.Equal(st.FlowsMissing, []int{1}) {
		t.Errorf("Stale %v FlowsMissing %v, want [1] [1]", st.Stale, st.FlowsMissing)
	}
	if err := f.stuck.Post(dataplane.CountFlowsOpInto(make([]uint32, 1))); errors.Is(err, dataplane.ErrBusy) {
		t.Fatal("a status read left a flow count posted on the stalled worker: every later read waits 5 s for it")
	}
}
