package admin

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// A worker still running an earlier operation (one that timed out: the
// worker was stuck and finishes it later) refuses the next with ErrBusy.
// That is the same passing state as a timeout, and answered the same: 503
// (try again), not 500 (a fault of the daemon).
func TestEdgeWorkerBusyIs503(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("worker 0: %w", dataplane.ErrTimeout),
		fmt.Errorf("worker 1: %w", dataplane.ErrBusy),
	} {
		if got := statusOf(err); got != http.StatusServiceUnavailable {
			t.Errorf("statusOf(%v) = %d, want 503", err, got)
		}
	}
}
