package admin_test

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// TestConnsOfBackendListsItsSecondChanceFlows: a backend's flows are its
// pinned ones and those whose second chance names it (README: they "count
// among its flows", a drain waits for them, flush --backend removes them).
// conns --backend must list the connections its active_flows counts and a
// flush removes: an operator waiting on a drain lists them to see what
// holds it.
func TestConnsOfBackendListsItsSecondChanceFlows(t *testing.T) {
	e, _ := chanceFlows(t, 200)
	for _, name := range []string{"be1", "be2", "be3", "be4"} {
		var b api.Backend
		e.get(api.BackendPath("sc", name), &b)
		listed, _ := e.listAll("sc", name, 1000)
		if uint64(len(listed)) != b.ActiveFlows {
			t.Errorf("%s: active_flows %d, conns --backend lists %d", name, b.ActiveFlows, len(listed))
		}
	}
}
