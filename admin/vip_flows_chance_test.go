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
	// A backend added: the VIP's table changes and the old one becomes
	// its previous table.
	e.monoReload(cfg("be1", "be2", "be3", "be4"))
	// Mid-connection segments of 200 flows this instance never saw (the
	// routers moved them here): each is tracked once, pinned to the
	// current table's choice.
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
