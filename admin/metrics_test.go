package admin_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// scrape fetches /metrics and parses it with Prometheus' own parser.
func (e *env) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	code, body := e.call("GET", api.MetricsPath, "")
	if code != 200 {
		e.t.Fatalf("GET /metrics: %d %s", code, body)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range problems {
		if len(p.Metric) > 8 && p.Metric[:8] == "fulcrum_" {
			e.t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		e.t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value is the sample of family name whose labels are exactly labels
// ("k", "v", ...); found is false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, found bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		if len(m.Label)*2 != len(labels) {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			ok := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					ok = true
				}
			}
			if !ok {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	const n = 120
	sent := e.traffic(1000, n)
	for i := range 3 {
		e.plane.Send(admintest.UDP(t, uint16(7000+i), dnsVIP))
	}
	e.plane.Send(admintest.TCP(t, 9, netip.AddrPortFrom(webVIP.Addr(), 81), "S")) // no-service

	fams := e.scrape()
	check := func(want float64, name string, labels ...string) {
		t.Helper()
		got, ok := value(fams, name, labels...)
		if !ok {
			t.Errorf("%s%v: missing", name, labels)
		} else if got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check(n, "fulcrum_vip_packets_total", "vip", "web")
	check(3, "fulcrum_vip_packets_total", "vip", "dns")
	check(n, "fulcrum_vip_new_flows_total", "vip", "web")
	st := e.plane.Status(true)
	check(float64(st.VIPs[1].Bytes), "fulcrum_vip_bytes_total", "vip", "web")
	check(0, "fulcrum_vip_panic_mode", "vip", "web")
	check(0, "fulcrum_vip_panic_mode", "vip", "dns") // its backends are "unknown", routed like up
	check(1, "fulcrum_converging")
	check(n+3, "fulcrum_converging_new_flows_total")
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		ps := e.backend("web", b)
		check(float64(sent[b]), "fulcrum_backend_packets_total", "vip", "web", "backend", b)
		check(float64(sent[b]), "fulcrum_backend_new_flows_total", "vip", "web", "backend", b)
		check(float64(sent[b]), "fulcrum_backend_active_flows", "vip", "web", "backend", b)
		check(float64(ps.Bytes), "fulcrum_backend_bytes_total", "vip", "web", "backend", b)
		check(1, "fulcrum_backend_healthy", "vip", "web", "backend", b)
		check(0, "fulcrum_backend_drained", "vip", "web", "backend", b)
		check(float64(ps.Weight), "fulcrum_backend_weight", "vip", "web", "backend", b)
		check(float64(ps.Weight), "fulcrum_backend_effective_weight", "vip", "web", "backend", b)
	}
	check(2, "fulcrum_backend_weight", "vip", "web", "backend", "be4")
	check(1, "fulcrum_backend_healthy", "vip", "dns", "backend", "ns1")
	check(1, "fulcrum_backend_effective_weight", "vip", "dns", "backend", "ns1")
	check(1, "fulcrum_drops_total", "reason", "no-service")
	check(0, "fulcrum_drops_total", "reason", "no-backend")
	check(0, "fulcrum_drops_total", "reason", "truncated-tcp")
	check(n+3+1, "fulcrum_worker_rx_packets_total", "worker", "0")
	check(n+3, "fulcrum_worker_tx_packets_total", "worker", "0")
	check(n+3, "fulcrum_conntrack_flows")
	check(0, "fulcrum_conntrack_evictions_total", "state", "established")
	check(0, "fulcrum_conntrack_insert_failed_total")
	rebuilds, last := e.plane.RebuildStats()
	check(float64(rebuilds), "fulcrum_table_rebuilds_total")
	check(last.Seconds(), "fulcrum_table_rebuild_seconds")
	check(float64(st.Generation), "fulcrum_snapshot_generation")
	if got := len(fams["fulcrum_backend_packets_total"].GetMetric()); got != 6 {
		t.Errorf("%d backend series, want 6 (VIPs x backends)", got)
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if fams[name] == nil {
			t.Errorf("%s missing: no Go or process collector", name)
		}
	}

	// Drain and health show at the next scrape.
	var b api.Backend
	e.ok("POST", api.ActionPath("web", "be1", api.ActionDrain), "", &b)
	e.plane.Verdict(t, "dns", "ns1", false)
	e.plane.Verdict(t, "dns", "ns2", true)
	fams = e.scrape()
	check(1, "fulcrum_backend_drained", "vip", "web", "backend", "be1")
	check(0, "fulcrum_backend_effective_weight", "vip", "web", "backend", "be1")
	check(1, "fulcrum_backend_weight", "vip", "web", "backend", "be1")
	check(float64(sent["be1"]), "fulcrum_backend_active_flows", "vip", "web", "backend", "be1")
	check(0, "fulcrum_vip_panic_mode", "vip", "dns") // one healthy of two: at the threshold, not under
	check(0, "fulcrum_backend_healthy", "vip", "dns", "backend", "ns1")
	check(0, "fulcrum_backend_effective_weight", "vip", "dns", "backend", "ns1")
	check(1, "fulcrum_backend_healthy", "vip", "dns", "backend", "ns2")
	check(0, "fulcrum_converging")
	if r := e.plane.Send(admintest.TCP(t, 1000, webVIP, "A")); r.Verdict != dataplane.Tx {
		t.Fatalf("established flow after drain: %v", r.Verdict)
	}
	fams = e.scrape()
	check(n+1, "fulcrum_vip_packets_total", "vip", "web")
	check(n, "fulcrum_vip_new_flows_total", "vip", "web")
}

// TestMetricsPanicMode: both dns backends failing their checks put the VIP
// in panic mode; both stay in the table though neither is healthy.
func TestMetricsPanicMode(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	e.plane.Verdict(t, "dns", "ns1", false)
	e.plane.Verdict(t, "dns", "ns2", false)
	fams := e.scrape()
	check := func(want float64, name string, labels ...string) {
		t.Helper()
		if got, ok := value(fams, name, labels...); !ok || got != want {
			t.Errorf("%s%v = %v (found %v), want %v", name, labels, got, ok, want)
		}
	}
	check(1, "fulcrum_vip_panic_mode", "vip", "dns")
	check(0, "fulcrum_vip_panic_mode", "vip", "web")
	check(0, "fulcrum_converging")
	for _, ns := range []string{"ns1", "ns2"} {
		check(0, "fulcrum_backend_healthy", "vip", "dns", "backend", ns)
		check(1, "fulcrum_backend_effective_weight", "vip", "dns", "backend", ns)
	}
}
