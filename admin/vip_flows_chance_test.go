package admin_test

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestVIPActiveFlowsCountsEachConnectionOnce: a flow given a second
// chance counts for its pin and for the backend its chance names
// (README, "Drain, weights and slow start": a drain of either must wait
// for it). The VIP's active_flows, which fulcrumctl vips, show and
// backends print as the VIP's FLOWS, is the sum of its backends', so it
// counts every such connection twice: here 200 tracked connections show
// as more.
func TestVIPActiveFlowsCountsEachConnectionOnce(t *testing.T) {
	const n = 200
	e, st := chanceFlows(t, n)
	conns, _ := e.listAll("sc", "", 1000)
	var v api.VIP
	e.get(api.VIPPath("sc"), &v)
	var vips []api.VIP
	e.get(api.VIPsPath, &vips)
	listed := uint64(0)
	for _, x := range vips {
		if x.Name == "sc" {
			listed = x.ActiveFlows
		}
	}
	t.Logf("%d connections tracked (%d listed), %d with a second chance; VIP active_flows %d (vips: %d)",
		n, len(conns), st.Total.SecondChanceFlows, v.ActiveFlows, listed)
	if len(conns) != n {
		t.Fatalf("%d connections listed, want %d", len(conns), n)
	}
	if v.ActiveFlows != n || listed != n {
		t.Errorf("vip sc: active_flows %d (GET /vips/sc), %d (GET /vips) for %d tracked connections: the %d second-chance flows counted twice",
			v.ActiveFlows, listed, n, st.Total.SecondChanceFlows)
	}
}

// chanceFlows starts an instance whose VIP sc (second chance on) had
// be4 added to be1..be3, so its old table is the previous one, and sends
// it the mid-connection segments of n flows it never saw (the routers
// moved them here): each is tracked once, pinned to the current table's
// choice, and those the old table placed elsewhere get a second chance.
// It fails the test if none did (it would test nothing).
func chanceFlows(t *testing.T, n int) (*env, api.Status) {
	t.Helper()
	sc := netip.MustParseAddrPort("203.0.113.20:80")
	cfg := func(backends ...string) string {
		return monoConfig(monoWeb, "", func(b *configtest.Builder) {
			b.VIP("sc", sc.Addr().String(), int(sc.Port()), "second_chance = true")
			for _, name := range backends {
				b.Backend(name, "10.0.5."+name[2:])
			}
		})
	}
	e := start(t, cfg("be1", "be2", "be3"), loopback())
	e.monoReload(cfg("be1", "be2", "be3", "be4"))
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
	return e, st
}
