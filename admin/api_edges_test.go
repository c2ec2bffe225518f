package admin_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
)

// TestOptionsStarNeedsTheToken: off loopback every call needs the
// token, and a refused peer's connection is closed so it cannot keep a
// max_conns slot (server.go, "Exhaustion"; unauthorized). "OPTIONS *" is
// answered by net/http itself, before the guard: 200 without the token,
// and the connection kept, so a peer without the token holds slots for
// as long as it sends one every idle timeout.
func TestOptionsStarNeedsTheToken(t *testing.T) {
	const token = "0123456789abcdef-admin"
	p := admintest.New(t, admintest.Config)
	srv := admin.New(p.Plane, config.Admin{Listen: "192.0.2.10:9180", Token: token}, "", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: 192.0.2.10\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Errorf("OPTIONS * without the token off loopback: status %d, Connection: close %v; want 401 and close", resp.StatusCode, resp.Close)
	}
	if !closedByPeer(c, 5*time.Second) {
		t.Error("the connection of a peer without the token stayed open")
	}
}

// TestReloadInForceCountsAsApplied: a reload whose configuration
// is in force but whose exception interface update failed
// (ErrExceptionNotUpdated: "Applied: the snapshot is published") moves
// the snapshot, but fulcrum_config_generation ("Configurations applied
// since start") and fulcrum_last_reload_success_timestamp_seconds ("Unix
// time the running configuration was applied") stay as before it.
func TestReloadInForceCountsAsApplied(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	e.plane.SetOnApply(func(old, cur *config.Config) error { return errors.New("tap gone") })
	added := admintest.Config + "\n  [[vip.backend]]\n  name = \"ns3\"\n  address = \"10.0.2.3\"\n"
	if err := os.WriteFile(e.plane.File, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	before := e.scrape()
	e.fails("POST", api.ReloadPath, "", http.StatusInternalServerError, "in force")
	var dns api.VIP
	e.get(api.VIPPath("dns"), &dns)
	if dns.BackendCount != 3 {
		t.Fatalf("the reload is not in force: dns has %d backends", dns.BackendCount)
	}
	after := e.scrape()
	g0, _ := value(before, "fulcrum_config_generation")
	g1, _ := value(after, "fulcrum_config_generation")
	t0, _ := value(before, "fulcrum_last_reload_success_timestamp_seconds")
	t1, _ := value(after, "fulcrum_last_reload_success_timestamp_seconds")
	if g1 != g0+1 {
		t.Errorf("fulcrum_config_generation %v -> %v after a configuration was put in force", g0, g1)
	}
	if t1 <= t0 {
		t.Errorf("fulcrum_last_reload_success_timestamp_seconds %v -> %v: the running configuration was applied after start", t0, t1)
	}
}

// A backend's flows, as the API counts them (what a drain waits for),
// include the flows whose second chance names it (docs/second-chance.md):
// their connections are on it, reached through the pin's agent. A flush
// of the backend drops those too: none is left counted on it after.
func TestFlushTakesSecondChanceFlows(t *testing.T) {
	e, _ := chanceFlows(t, 200)
	for _, b := range []string{"be1", "be2", "be3"} {
		var before, after api.Backend
		e.get(api.BackendPath("sc", b), &before)
		var f api.Flush
		e.ok("POST", api.ActionPath("sc", b, api.ActionFlush), "", &f)
		e.get(api.BackendPath("sc", b), &after)
		if after.ActiveFlows != 0 {
			t.Errorf("sc/%s: %d flows before the flush, %d flushed, %d still counted on it after", b, before.ActiveFlows, f.Flushed, after.ActiveFlows)
		}
	}
}

// TestLongTokenFileRefused: config takes the first line of token_file
// but reads at most 4 KiB of it, so a longer token is cut without a
// word: the daemon starts, and the token itself is refused on every call.
func TestLongTokenFileRefused(t *testing.T) {
	tok := strings.Repeat("a1b2c3d4", 640) // 5120 characters, one line
	tf := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(tf, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "fulcrum.toml")
	toml := admintest.Config + "\n[admin]\ntoken_file = \"" + tf + "\"\n"
	if err := os.WriteFile(file, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(file); err != nil {
		return // refused at load: fine
	}
	p := admintest.New(t, toml)
	ac := p.Config().Admin
	ac.Listen = "127.0.0.1:0"
	e := serve(t, p, ac, p.File)
	code, body := e.call(http.MethodPost, api.ActionPath("web", "be1", api.ActionUndrain), "", "Authorization", "Bearer "+tok)
	if code != http.StatusOK {
		t.Errorf("the token_file's token (%d characters) was accepted by config, then refused: %d %.100s", len(tok), code, body)
	}
}
