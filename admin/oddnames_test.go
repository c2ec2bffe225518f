package admin_test

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// Names as hostile as config allows (no '/', spaces or control
// characters): quotes, backslashes, markup, non-ASCII.
const (
	oddVIP     = `w"<script>alert(1)\x`
	oddBackend = `b'"><svg>é\\`
	// A health check's reason holds what the backend answered (net/http
	// quotes a malformed status line into its error).
	oddReason = `http: malformed HTTP response "<script>alert(2)</script>\"\\"`
)

func oddConfig(t *testing.T) string {
	t.Helper()
	q := func(s string) string { return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"` }
	cfg := strings.Replace(admintest.Config, `name = "web"`, `name = `+q(oddVIP), 1)
	cfg = strings.Replace(cfg, `name = "be1"`, `name = `+q(oddBackend), 1)
	if !strings.Contains(cfg, "<script>") || !strings.Contains(cfg, "<svg>") {
		t.Fatal("config not rewritten")
	}
	return cfg
}

// TestOddNamesEscaped: the status page escapes names and check reasons
// (no markup of theirs survives), has a CSP and loads nothing from
// elsewhere; the metrics carry the names exactly, escaped so the
// exposition parses, and promtool accepts them.
func TestOddNamesEscaped(t *testing.T) {
	e := start(t, oddConfig(t), loopback())
	e.traffic(5000, 20)
	if err := e.plane.SetHealth("dns", "ns1", false, oddReason); err != nil {
		t.Fatal(err)
	}

	resp, err := e.hc.Get(e.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	// default-src does not cover base-uri, form-action or
	// frame-ancestors: each is closed on its own.
	for _, d := range []string{"default-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, d)
		}
	}
	if strings.Contains(csp, "script-src") {
		t.Errorf("Content-Security-Policy %q allows scripts", csp)
	}
	for _, bad := range []string{"<script", "<svg", "alert(2)</"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("page holds %q unescaped", bad)
		}
	}
	// A quote in a name must not end an attribute.
	if i := bytes.Index(page, []byte(`'"><`)); i >= 0 {
		t.Errorf("page holds a quote that ends a tag: %q", page[max(i-80, 0):min(i+40, len(page))])
	}
	for _, want := range []string{"&lt;script&gt;alert(1)", "&lt;svg&gt;", "alert(2)"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("page lacks %q (the escaped name or reason)", want)
		}
	}
	// Nothing from elsewhere: every src, href and url() is data: or a
	// fragment.
	for _, m := range regexp.MustCompile(`(?i)(?:src|href|action)\s*=\s*["']?([^"' >]*)|url\(([^)]*)\)`).FindAllSubmatch(page, -1) {
		ref := string(m[1]) + string(m[2])
		if !strings.HasPrefix(ref, "data:") && !strings.HasPrefix(ref, "#") {
			t.Errorf("page references %q", ref)
		}
	}

	fams := e.scrape()
	if _, ok := value(fams, "fulcrum_backend_healthy", "vip", oddVIP, "backend", oddBackend); !ok {
		t.Errorf("no fulcrum_backend_healthy for the odd names (label values not kept exactly)")
	}
	var status []api.VIP
	e.get(api.VIPsPath+"?backends=true", &status)
	found := false
	for _, v := range status {
		for _, b := range v.Backends {
			found = found || v.Name == oddVIP && b.Name == oddBackend
		}
	}
	if !found {
		t.Errorf("JSON lacks the odd names exactly")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed")
	}
	code, body := e.call("GET", api.MetricsPath, "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
