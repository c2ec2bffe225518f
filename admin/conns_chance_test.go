package admin_test

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestConnsOfBackendListsItsSecondChanceFlows: a backend's flows are its
// pinned ones and those whose second chance names it (README: they "count
// among its flows", a drain waits for them, flush --backend removes them).
// conns --backend must list the connections its active_flows counts and a
// flush removes: an operator waiting on a drain lists them to see what
// holds it.
func TestConnsOfBackendListsItsSecondChanceFlows(t *testing.T) {
	sc := netip.MustParseAddrPort("203.0.113.20:80")
	cfg := func(backends ...string) string {
		return monoConfig(monoWeb, "", func(b *configtest.Builder) {
			b.VIP("sc", sc.Addr().String(), int(sc.Port()), "second_chance = true")
			for _, n := range backends {
				b.Backend(n, "10.0.5."+n[2:])
			}
		})
	}
	e := start(t, cfg("be1", "be2", "be3"), loopback())
	e.monoReload(cfg("be1", "be2", "be3", "be4"))
	const n = 200
	for i := range n {
		if r := e.plane.Send(admintest.TCP(t, uint16(3000+i), sc, "A")); r.Verdict != dataplane.Tx {
			t.Fatalf("flow %d: verdict %v", i, r.Verdict)
		}
	}
	var st api.Status
	e.get(api.StatusPath, &st)
	if st.Total.SecondChanceFlows == 0 {
		t.Fatal("no flow got a second chance: the test does not test")
	}
	for _, name := range []string{"be1", "be2", "be3", "be4"} {
		var b api.Backend
		e.get(api.BackendPath("sc", name), &b)
		listed, _ := e.listAll("sc", name, 1000)
		if uint64(len(listed)) != b.ActiveFlows {
			t.Errorf("%s: active_flows %d, conns --backend lists %d", name, b.ActiveFlows, len(listed))
		}
	}
}
