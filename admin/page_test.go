package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// chromium finds the headless browser; where scripts/setup.sh ran (it
// installs chromium) a missing one fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if setupRan() {
		t.Fatal("chromium not found: scripts/setup.sh installs it")
	}
	t.Skip("chromium not installed (scripts/setup.sh installs it)")
	return ""
}

// render loads url in headless chromium and returns the DOM after load
// and the page's console messages (chromium logs each one as a CONSOLE
// line on stderr).
func render(t *testing.T, browser, url string) (dom string, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--enable-logging=stderr", "--v=0", "--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	return string(out), console
}

// TestRenderSeesConsole: the console check can fail — a page that logs an
// error is caught.
func TestRenderSeesConsole(t *testing.T) {
	browser := chromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!DOCTYPE html><html><body><script>console.error("marker-7731")</script></body></html>`)
	}))
	defer srv.Close()
	_, console := render(t, browser, srv.URL)
	if len(console) != 1 || !strings.Contains(console[0], "marker-7731") {
		t.Errorf("console of a page that logs one error: %q", console)
	}
}

var backendRow = regexp.MustCompile(`<tr class="backend [a-z-]+" data-vip="([^"]+)" data-backend="([^"]+)" data-state="([a-z-]+)">`)

// TestStatusPage loads GET / of a running control plane in a real browser:
// no console errors, every VIP and backend of the configuration on it with
// its state, and a drained backend shown draining after the drain call.
func TestStatusPage(t *testing.T) {
	browser := chromium(t)
	e := start(t, admintest.Config, loopback())
	e.traffic(4000, 20)

	states := func() map[string]string {
		t.Helper()
		dom, console := render(t, browser, e.base+"/")
		if len(console) > 0 {
			t.Errorf("console messages: %q", console)
		}
		for _, v := range e.plane.Config().VIPs {
			if !strings.Contains(dom, `data-vip="`+v.Name+`">`+v.Name+` `) {
				t.Errorf("VIP %s not on the page", v.Name)
			}
		}
		got := map[string]string{}
		for _, m := range backendRow.FindAllStringSubmatch(dom, -1) {
			got[m[1]+"/"+m[2]] = m[3]
		}
		if !strings.Contains(dom, "no BGP sessions configured") {
			t.Errorf("no BGP section")
		}
		return got
	}
	want := map[string]string{"web/be1": "up", "web/be2": "up", "web/be3": "up", "web/be4": "up", "dns/ns1": "unknown", "dns/ns2": "unknown"}
	check := func(got map[string]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%d backend rows %v, want %d", len(got), got, len(want))
		}
		for k, s := range want {
			if got[k] != s {
				t.Errorf("backend %s: state %q, want %q", k, got[k], s)
			}
		}
	}
	check(states())

	var b api.Backend
	e.ok("POST", api.ActionPath("web", "be2", api.ActionDrain), "", &b)
	e.plane.Verdict(t, "dns", "ns1", false)
	want["web/be2"], want["dns/ns1"], want["dns/ns2"] = "draining", "down", "unknown"
	check(states())
}

// TestStatusPageHeaders: HTML with a policy that allows no script, and
// only GET and HEAD.
func TestStatusPageHeaders(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	resp, err := e.hc.Get(e.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("GET /: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"))
	}
	if code, _ := e.call("POST", "/nonexistent", ""); code != 404 {
		t.Errorf("POST /nonexistent: %d, want 404", code)
	}
	req, _ := http.NewRequest("POST", e.base+"/", nil)
	if resp, err := e.hc.Do(req); err != nil || resp.StatusCode != 405 {
		t.Errorf("POST /: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}
}
