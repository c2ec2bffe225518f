package admin_test

import (
	"bytes"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// Names that spell Prometheus label syntax, and a 64-byte non-ASCII
// name (the longest allowed), on their way to /metrics and the JSON:
// kept exactly as label values, no label added, promtool accepts the
// exposition.
func TestStringsProbeLabelSyntaxNames(t *testing.T) {
	const (
		vipName = `a",evil="1`
		beName  = `b"}` + "\\" + `,x="` // ends the label set, if unescaped
	)
	long := strings.Repeat("\u00e9", 32) // 64 bytes
	q := func(s string) string { return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"` }
	cfg := strings.Replace(admintest.Config, `name = "web"`, `name = `+q(vipName), 1)
	cfg = strings.Replace(cfg, `name = "be1"`, `name = `+q(beName), 1)
	cfg = strings.Replace(cfg, `name = "be2"`, `name = `+q(long), 1)
	if !strings.Contains(cfg, "evil") || !strings.Contains(cfg, long) {
		t.Fatal("config not rewritten")
	}
	e := start(t, cfg, loopback())
	e.traffic(5000, 20)
	fams := e.scrape()
	for _, b := range []string{beName, long} {
		if _, ok := value(fams, "fulcrum_backend_healthy", "vip", vipName, "backend", b); !ok {
			t.Errorf("no fulcrum_backend_healthy{vip=%q,backend=%q}", vipName, b)
		}
	}
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "evil" || l.GetName() == "x" {
					t.Errorf("%s has a label %q made from a name", name, l.GetName())
				}
			}
		}
	}
	code, body := e.call("GET", api.MetricsPath, "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, l := range bytes.Split(body, []byte("\n")) {
		if bytes.Contains(l, []byte("evil")) && !bytes.Contains(l, []byte(`vip="a\",evil=\"1"`)) {
			t.Errorf("exposition line holds the name unescaped: %q", l)
		}
	}
	var vips []api.VIP
	e.get(api.VIPsPath+"?backends=true", &vips)
	found := 0
	for _, v := range vips {
		for _, b := range v.Backends {
			if v.Name == vipName && (b.Name == beName || b.Name == long) {
				found++
			}
		}
	}
	if found != 2 {
		t.Errorf("JSON holds %d of the 2 names exactly", found)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not installed (scripts/setup.sh installs it)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
