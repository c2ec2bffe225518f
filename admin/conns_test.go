package admin_test

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
)

// listAll pages through GET /api/v1/conns with limit and returns every
// connection and the number of pages.
func (e *env) listAll(vip, backend string, limit int) ([]api.Conn, int) {
	e.t.Helper()
	var all []api.Conn
	cursor, pages := "", 0
	for {
		var page api.Conns
		e.get(api.ConnsQuery(vip, backend, limit, cursor), &page)
		pages++
		if len(page.Conns) > limit {
			e.t.Fatalf("page of %d connections, limit %d", len(page.Conns), limit)
		}
		all = append(all, page.Conns...)
		if page.Next == "" {
			return all, pages
		}
		if page.Next == cursor {
			e.t.Fatalf("cursor %q does not advance", cursor)
		}
		cursor = page.Next
		if pages > 1000 {
			e.t.Fatal("too many pages")
		}
	}
}

// TestConnsAndFlush: the listing pages through every tracked connection
// exactly once, filters by VIP and backend, and a flush removes a
// backend's connections, counts them as moved, and their next packets are
// forwarded again.
func TestConnsAndFlush(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	const n = 40
	sent := e.traffic(5000, n)
	for i := range 3 {
		e.plane.Send(admintest.UDP(t, uint16(7000+i), dnsVIP))
	}

	all, pages := e.listAll("", "", 8)
	if len(all) != n+3 || pages < 2 {
		t.Fatalf("listed %d connections in %d pages, want %d in several", len(all), pages, n+3)
	}
	seen := map[string]bool{}
	perBackend := map[string]int{}
	for _, c := range all {
		key := c.Client + ">" + c.VIPAddress
		if seen[key] {
			t.Errorf("connection %s listed twice", key)
		}
		seen[key] = true
		if c.Worker != 0 || c.Stale || c.IdleMs > 60000 {
			t.Errorf("connection %+v", c)
		}
		if c.VIP == "web" {
			if c.VIPAddress != webVIP.String() || c.Proto != "tcp" || c.State != "new" || !strings.HasPrefix(c.Client, dptest.Client.String()+":") {
				t.Errorf("web connection %+v", c)
			}
			perBackend[c.Backend]++
		}
	}
	for b, want := range sent {
		if perBackend[b] != want {
			t.Errorf("backend %s: %d connections listed, %d flows sent", b, perBackend[b], want)
		}
	}
	dns, _ := e.listAll("dns", "", 1000)
	if len(dns) != 3 {
		t.Errorf("dns: %d connections, want 3", len(dns))
	}
	be1, _ := e.listAll("web", "be1", 1000)
	if len(be1) != sent["be1"] || sent["be1"] == 0 {
		t.Fatalf("web/be1: %d connections, %d sent", len(be1), sent["be1"])
	}
	for _, c := range be1 {
		if c.Backend != "be1" || c.BackendAddress != "10.0.1.1" {
			t.Errorf("web/be1 listing holds %+v", c)
		}
	}

	var f api.Flush
	e.ok("POST", api.ActionPath("web", "be1", api.ActionFlush), "", &f)
	if f.Flushed != uint64(sent["be1"]) || f.VIP != "web" || f.Backend != "be1" {
		t.Errorf("flush: %+v, want %d flushed", f, sent["be1"])
	}
	if left, _ := e.listAll("web", "be1", 1000); len(left) != 0 {
		t.Errorf("after the flush be1 has %d connections", len(left))
	}
	if rest, _ := e.listAll("", "", 1000); len(rest) != n+3-sent["be1"] {
		t.Errorf("after the flush %d connections, want %d", len(rest), n+3-sent["be1"])
	}
	if got, _ := value(e.scrape(), "fulcrum_worker_moved_flows_total", "worker", "0"); got != float64(sent["be1"]) {
		t.Errorf("moved after the flush: %v, want %d", got, sent["be1"])
	}
	// A flushed flow's next packet is placed again (be1 is still in the
	// table: the same backend) and tracked again.
	be1Client, _ := netip.ParseAddrPort(be1[0].Client)
	if r := e.plane.Send(admintest.TCP(t, be1Client.Port(), webVIP, "A")); r.Verdict != dataplane.Tx || r.Backend != netip.MustParseAddr("10.0.1.1") {
		t.Errorf("flushed flow's next packet: %v to %v", r.Verdict, r.Backend)
	}
	if again, _ := e.listAll("web", "be1", 1000); len(again) != 1 {
		t.Errorf("after one more packet be1 has %d connections, want 1", len(again))
	}

	e.fails("GET", api.ConnsQuery("", "be1", 0, ""), "", 400, "vip")
	e.fails("GET", api.ConnsQuery("nope", "", 0, ""), "", 404)
	e.fails("GET", api.ConnsQuery("", "", 0, "x"), "", 400, "cursor")
	e.fails("GET", api.ConnsPath+"?limit=0", "", 400, "limit")
	e.fails("GET", api.ConnsPath+fmt.Sprintf("?limit=%d", 1<<20), "", 400, "limit")
	e.fails("POST", api.ActionPath("web", "nope", api.ActionFlush), "", 404)
}

// TestConnsCursorNoWorkers: a cursor sent to a plane with no workers is
// refused with 400, not a panic (the message named the buckets of worker
// 0).
func TestConnsCursorNoWorkers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fulcrum.toml")
	if err := os.WriteFile(file, []byte(admintest.Config), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	plane, err := control.New(cfg, &dataplane.Shared{}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := admin.New(plane, loopback(), "", nil).Handler()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", api.ConnsQuery("", "", 10, "0.0"), nil)
	req.Host = "127.0.0.1"
	h.ServeHTTP(rec, req)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "0 workers") {
		t.Errorf("cursor 0.0 with no workers: %d %s; want 400 naming 0 workers", rec.Code, rec.Body)
	}
}
