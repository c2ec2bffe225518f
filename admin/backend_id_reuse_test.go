package admin_test

import (
	"os"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// TestFlushLeavesAnotherVIPsFlowsAfterIDReuse: a backend removed by a
// reload leaves its conntrack entries (stale, pinned to its id); two
// reloads later a backend added to another VIP is given the same id, and
// a flush of that new backend removes (and counts) the removed backend's
// flows of the other VIP: the listing of the new backend shows none.
func TestFlushLeavesAnotherVIPsFlowsAfterIDReuse(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	sent := e.traffic(5000, 40)
	if sent["be1"] == 0 {
		t.Fatal("no flows on be1")
	}
	// Reload 1: be1 leaves web.
	noBe1 := strings.Replace(admintest.Config, "  [[vip.backend]]\n  name = \"be1\"\n  address = \"10.0.1.1\"\n", "", 1)
	if noBe1 == admintest.Config {
		t.Fatal("config not rewritten")
	}
	reload := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(e.plane.File, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		var r api.Reload
		e.ok("POST", api.ReloadPath, "", &r)
	}
	reload(noBe1)
	// Reload 2: dns gets a third backend, ns3.
	withNs3 := noBe1 + "  [[vip.backend]]\n  name = \"ns3\"\n  address = \"10.0.2.3\"\n"
	reload(withNs3)

	var b api.Backend
	e.get("/api/v1/vips/dns/backends/ns3", &b)
	var page api.Conns
	e.get(api.ConnsPath+"?vip=dns&backend=ns3", &page)
	var f api.Flush
	e.ok("POST", api.ActionPath("dns", "ns3", api.ActionFlush), "", &f)
	t.Logf("ns3: id %d active_flows %d, listed %d, flushed %d (web's old be1 had %d)", b.ID, b.ActiveFlows, len(page.Conns), f.Flushed, sent["be1"])
	if f.Flushed != uint64(len(page.Conns)) || f.Flushed != b.ActiveFlows {
		t.Errorf("flush of dns/ns3 (new, no traffic) removed %d flows; it listed %d and had %d active (web's removed be1 had %d)",
			f.Flushed, len(page.Conns), b.ActiveFlows, sent["be1"])
	}
}

// TestConnsOfNewBackendSkipRemovedBackendsFlows: the same id reuse within
// one VIP: a listing of a backend added by a later reload shows the flows
// of the removed backend whose id it got, under the new backend's name and
// address, although no packet ever went to it.
func TestConnsOfNewBackendSkipRemovedBackendsFlows(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	sent := e.traffic(5000, 40)
	if sent["be1"] == 0 {
		t.Fatal("no flows on be1")
	}
	noBe1 := strings.Replace(admintest.Config, "  [[vip.backend]]\n  name = \"be1\"\n  address = \"10.0.1.1\"\n", "", 1)
	reload := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(e.plane.File, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		var r api.Reload
		e.ok("POST", api.ReloadPath, "", &r)
	}
	reload(noBe1)
	// be5 goes to web, after be4 (before [[vip]] dns).
	withBe5 := strings.Replace(noBe1, "  weight = 2\n", "  weight = 2\n  [[vip.backend]]\n  name = \"be5\"\n  address = \"10.0.1.5\"\n", 1)
	reload(withBe5)
	var b api.Backend
	e.get("/api/v1/vips/web/backends/be5", &b)
	var page api.Conns
	e.get(api.ConnsPath+"?vip=web&backend=be5", &page)
	for _, c := range page.Conns {
		t.Logf("listed under be5: %+v", c)
	}
	if len(page.Conns) != 0 {
		t.Errorf("conns of web/be5 (new, id %d, %d active flows, no packet sent to it): %d listed, the removed be1's",
			b.ID, b.ActiveFlows, len(page.Conns))
	}
}
