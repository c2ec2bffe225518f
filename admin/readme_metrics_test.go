package admin_test

import (
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/control"
)

// readmeMetric is a metric as README "Metrics" names it: its labels, and
// its type where the README says it (a histogram) or the name does (a
// name ending in _total is a counter, any other a gauge).
type readmeMetric struct {
	labels []string
	values map[string][]string // a label's values, where the README lists them (result="ok|refused|error")
}

var (
	spanRE  = regexp.MustCompile("`([^`\n]+)`")
	braceRE = regexp.MustCompile(`\{([^{}]*)\}`)
)

// expandBraces turns a{b,c}d{e,f} into abde, abdf, acde, acdf.
func expandBraces(s string) []string {
	m := braceRE.FindStringSubmatchIndex(s)
	if m == nil {
		return []string{s}
	}
	var out []string
	for _, alt := range strings.Split(s[m[2]:m[3]], ",") {
		out = append(out, expandBraces(s[:m[0]]+alt+s[m[1]:])...)
	}
	return out
}

// readmeMetrics reads the metric names of README "Metrics": every code
// span that starts with fulcrum_ or, short for the family of the span
// before it (fulcrum_worker_..., fulcrum_backend_...), with _; a final
// {a,b="x|y"} lists labels, a {x,y} inside the name alternatives. The
// section's prose gives the implicit labels: vip (and backend) on the
// per-VIP and per-backend series, worker on the per-worker ones.
func readmeMetrics(t *testing.T) map[string]readmeMetric {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n### Metrics\n")
	if start < 0 {
		t.Fatal(`README.md has no "### Metrics" section`)
	}
	text = text[start+1:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	out := map[string]readmeMetric{}
	family := ""
	for _, m := range spanRE.FindAllStringSubmatch(text, -1) {
		span := m[1]
		if !strings.HasPrefix(span, "fulcrum_") && !strings.HasPrefix(span, "_") {
			continue
		}
		name, labels, values := span, []string(nil), map[string][]string{}
		if strings.HasSuffix(span, "}") {
			i := strings.LastIndex(span, "{")
			name = span[:i]
			for _, l := range strings.Split(span[i+1:len(span)-1], ",") {
				l, v, ok := strings.Cut(l, "=")
				l = strings.TrimSpace(l)
				labels = append(labels, l)
				if ok {
					vs := strings.Split(strings.Trim(v, `"`), "|")
					sort.Strings(vs)
					values[l] = vs
				}
			}
		}
		if strings.HasPrefix(name, "_") {
			if family == "" {
				t.Fatalf("README Metrics: %s before any full name", span)
			}
			name = family + name
		} else {
			parts := strings.SplitN(name, "_", 3)
			family = parts[0] + "_" + parts[1]
		}
		for _, n := range expandBraces(name) {
			var implicit []string
			switch {
			case strings.HasPrefix(n, "fulcrum_vip_"):
				implicit = []string{"vip"}
			case strings.HasPrefix(n, "fulcrum_backend_"):
				implicit = []string{"vip", "backend"}
			case strings.HasPrefix(n, "fulcrum_worker_"):
				implicit = []string{"worker"}
			}
			all := append(implicit, labels...)
			sort.Strings(all)
			out[n] = readmeMetric{labels: all, values: values}
		}
	}
	return out
}

// TestReadmeMetricsList: README "Metrics" names every fulcrum_ metric
// the daemon exports, with its labels, and each name it lists exists.
// The scrape has every family: a BGP peer, the port's counters.
func TestReadmeMetricsList(t *testing.T) {
	doc := readmeMetrics(t)
	if len(doc) < 40 {
		t.Fatalf("README Metrics: parsed only %d names: %v", len(doc), doc)
	}
	p := admintest.New(t, admintest.Config)
	p.SetAnnouncer(func([]netip.Prefix) {}, func() []control.PeerInfo {
		return []control.PeerInfo{{Address: "10.0.0.1", State: "established"}}
	})
	e := serve(t, p, loopback(), p.File, func(s *admin.Server) {
		s.SetPortStats(func() (admin.PortStats, error) { return testPort, nil })
	})
	e.traffic(1000, 10)
	fams := e.scrape()
	var exported []string
	for name, f := range fams {
		if !strings.HasPrefix(name, "fulcrum_") {
			continue
		}
		exported = append(exported, name)
		d, ok := doc[name]
		if !ok {
			t.Errorf("README Metrics does not list %s (%s)", name, f.GetType())
			continue
		}
		var labels []string
		for _, lp := range f.Metric[0].Label {
			labels = append(labels, lp.GetName())
		}
		sort.Strings(labels)
		if !slices.Equal(labels, d.labels) {
			t.Errorf("README Metrics: %s has labels %v, the README says %v", name, labels, d.labels)
		}
		for l, vs := range d.values {
			var got []string
			for _, m := range f.Metric {
				for _, lp := range m.Label {
					if lp.GetName() == l && !slices.Contains(got, lp.GetValue()) {
						got = append(got, lp.GetValue())
					}
				}
			}
			sort.Strings(got)
			if !slices.Equal(got, vs) {
				t.Errorf("README Metrics: %s{%s} takes %v, the README says %v", name, l, got, vs)
			}
		}
		want := dto.MetricType_GAUGE
		switch {
		case strings.HasSuffix(name, "_total"):
			want = dto.MetricType_COUNTER
		case name == "fulcrum_table_rebuild_duration_seconds":
			want = dto.MetricType_HISTOGRAM // "(histogram)"
		}
		if f.GetType() != want {
			t.Errorf("%s is a %s: its name says %s", name, f.GetType(), want)
		}
	}
	for name := range doc {
		if fams[name] == nil {
			t.Errorf("README Metrics lists %s, which /metrics does not export", name)
		}
	}
	if len(exported) < 40 {
		t.Errorf("scrape has only %d fulcrum_ families", len(exported))
	}
}
