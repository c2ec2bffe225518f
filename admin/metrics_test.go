package admin_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/punt"
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
	p := admintest.New(t, admintest.Config)
	e := serve(t, p, loopback(), p.File, func(s *admin.Server) {
		s.SetVersion("1.2.3-test")
		s.SetPortStats(func() (admin.PortStats, error) { return testPort, nil })
	})
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
	_ = last
	h := fams["fulcrum_table_rebuild_duration_seconds"].GetMetric()
	if len(h) != 1 || h[0].Histogram == nil {
		t.Fatalf("fulcrum_table_rebuild_duration_seconds: %v, want one histogram", h)
	}
	if hist := h[0].Histogram; hist.GetSampleCount() != rebuilds || len(hist.Bucket) != len(control.RebuildBuckets)+1 ||
		hist.Bucket[len(hist.Bucket)-1].GetCumulativeCount() > rebuilds {
		t.Errorf("rebuild histogram: %d samples, %d buckets (last %d); want %d samples, %d buckets (+Inf)",
			hist.GetSampleCount(), len(hist.Bucket), hist.Bucket[len(hist.Bucket)-1].GetCumulativeCount(), rebuilds, len(control.RebuildBuckets)+1)
	}
	w := st.Workers[0]
	check(float64(w.RxBytes), "fulcrum_worker_rx_bytes_total", "worker", "0")
	check(float64(w.TxBytes), "fulcrum_worker_tx_bytes_total", "worker", "0")
	check(n+3, "fulcrum_worker_forwarded_packets_total", "worker", "0")
	check(0, "fulcrum_worker_tx_full_total", "worker", "0")
	check(0, "fulcrum_worker_moved_flows_total", "worker", "0")
	check(0, "fulcrum_worker_punted_packets_total", "worker", "0")
	check(0, "fulcrum_worker_second_chance_packets_total", "worker", "0") // SYNs never carry one
	check(0, "fulcrum_worker_second_chance_flows_total", "worker", "0")
	check(0, "fulcrum_worker_health_tunnel_packets_total", "worker", "0")
	check(0, "fulcrum_worker_icmp_replies_total", "worker", "0", "type", "echo")
	check(0, "fulcrum_worker_icmp_replies_total", "worker", "0", "type", "too-big")
	check(0, "fulcrum_worker_icmp_rate_limited_total", "worker", "0", "type", "echo")
	check(n+3, "fulcrum_worker_conntrack_entries", "worker", "0")
	check(65536, "fulcrum_worker_conntrack_capacity_entries", "worker", "0") // [conntrack] capacity
	check(n+3, "fulcrum_worker_conntrack_inserts_total", "worker", "0")
	check(n+3, "fulcrum_worker_conntrack_lookups_total", "worker", "0", "result", "miss")
	check(0, "fulcrum_worker_conntrack_lookups_total", "worker", "0", "result", "hit")
	check(float64(w.Bursts), "fulcrum_worker_polls_total", "worker", "0", "result", "packets")
	if b, ok := value(fams, "fulcrum_worker_busy_ratio", "worker", "0"); !ok || b < 0 || b > 1 {
		t.Errorf("fulcrum_worker_busy_ratio = %v (found %v), want 0..1", b, ok)
	}
	check(0, "fulcrum_workers_stale")
	check(float64(testPort.IPackets), "fulcrum_port_packets_total", "direction", "rx")
	check(float64(testPort.OPackets), "fulcrum_port_packets_total", "direction", "tx")
	check(float64(testPort.IBytes), "fulcrum_port_bytes_total", "direction", "rx")
	check(float64(testPort.OBytes), "fulcrum_port_bytes_total", "direction", "tx")
	check(float64(testPort.IMissed), "fulcrum_port_rx_missed_packets_total")
	check(float64(testPort.RxNoMbuf), "fulcrum_port_rx_nombuf_total")
	check(float64(testPort.IErrors), "fulcrum_port_errors_total", "direction", "rx")
	check(float64(testPort.OErrors), "fulcrum_port_errors_total", "direction", "tx")
	check(1, "fulcrum_build_info", "version", "1.2.3-test", "goversion", runtime.Version())
	check(1, "fulcrum_config_generation")
	for _, r := range []string{"ok", "refused", "error"} {
		check(0, "fulcrum_reloads_total", "result", r)
	}
	if ts, _ := value(fams, "fulcrum_last_reload_success_timestamp_seconds"); ts < float64(time.Now().Add(-time.Hour).Unix()) || ts > float64(time.Now().Unix()+1) {
		t.Errorf("fulcrum_last_reload_success_timestamp_seconds = %v, want about now", ts)
	}
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

// testPort are port counters, all different, so a swapped pair shows.
var testPort = admin.PortStats{IPackets: 101, OPackets: 102, IBytes: 103, OBytes: 104, IMissed: 105, IErrors: 106, OErrors: 107, RxNoMbuf: 108}

// TestMetricsBusyRatio: the busy ratio covers the polls since the previous
// scrape: packets in one window and none in the next read 1, then 0.
func TestMetricsBusyRatio(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	e.scrape()
	e.traffic(2000, 5)
	if b, _ := value(e.scrape(), "fulcrum_worker_busy_ratio", "worker", "0"); b <= 0 {
		t.Errorf("busy ratio after traffic: %v, want > 0", b)
	}
	// Idle polls only: the test worker serves snapshots from idle polls.
	e.plane.Status(false)
	if b, _ := value(e.scrape(), "fulcrum_worker_busy_ratio", "worker", "0"); b != 0 {
		t.Errorf("busy ratio with no traffic since the last scrape: %v, want 0", b)
	}
}

// TestMetricsPromtool: Prometheus' own checker accepts the exposition
// (names, units, _total on counters, help text). Where scripts/setup.sh ran
// (it installs promtool), a missing promtool fails the test.
func TestMetricsPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if setupRan() {
			t.Fatal("promtool not found: scripts/setup.sh installs it (Debian package prometheus)")
		}
		t.Skip("promtool not installed (scripts/setup.sh installs it)")
	}
	p := admintest.New(t, admintest.Config)
	e := serve(t, p, loopback(), p.File, func(s *admin.Server) {
		s.SetVersion("test")
		s.SetPortStats(func() (admin.PortStats, error) { return testPort, nil })
	})
	e.traffic(3000, 10)
	code, body := e.call("GET", api.MetricsPath, "")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// setupRan reports whether scripts/setup.sh ran here as root: it installs
// debootstrap (packaging group) with the test tools, so a root without it
// is a bare build box.
func setupRan() bool {
	_, err := exec.LookPath("debootstrap")
	return os.Geteuid() == 0 && err == nil
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

// TestMetricsScrapesBounded: a scrape's answer is built whole before it is
// written, so two run at once; while two are being written to readers that
// do not take them, a third waits, then is answered 503 with Retry-After,
// and is served once one of them ends. Other endpoints are not held up.
func TestMetricsScrapesBounded(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	h := e.srv.Handler()
	admin.SetMetricsWait(t, 200*time.Millisecond)
	scrape := func() *http.Request {
		r := httptest.NewRequest("GET", api.MetricsPath, nil)
		r.Host = "127.0.0.1"
		return r
	}
	var slow [2]*blockingWriter
	var done [2]chan struct{}
	for i := range slow {
		slow[i] = &blockingWriter{h: http.Header{}, header: make(chan struct{}), release: make(chan struct{})}
		done[i] = make(chan struct{})
		go func() {
			defer close(done[i])
			h.ServeHTTP(slow[i], scrape())
		}()
		<-slow[i].header
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, scrape())
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("third scrape: %d (Retry-After %q); want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if code, b := e.call("GET", api.StatusPath, ""); code != 200 {
		t.Errorf("status during two scrapes: %d %.100s", code, b)
	}
	close(slow[0].release)
	<-done[0]
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, scrape())
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "fulcrum_") {
		t.Errorf("scrape after one ended: %d %.100s", rec.Code, rec.Body)
	}
	close(slow[1].release)
	<-done[1]
}

// Packets for the host over their class's punt budget are counted by class
// in /metrics and in the status JSON, and agree with the drop reason: 80
// datagrams to the LB's own address against a budget of 1 a second (its
// burst 64) all at once.
func TestPuntLimitedMetrics(t *testing.T) {
	p := admintest.New(t, admintest.Config+"\n[dataplane.punt]\nother = 1\n")
	e := serve(t, p, loopback(), p.File)
	const n = 80
	punted := 0
	for i := range n {
		if r := e.plane.Send(admintest.UDP(t, uint16(3000+i), netip.MustParseAddrPort("192.0.2.10:9"))); r.Verdict == dataplane.Punt {
			punted++
		}
	}
	limited := n - punted
	if punted < punt.MinBurst || limited == 0 {
		t.Fatalf("punted %d of %d, want the burst of %d and the rest limited", punted, n, punt.MinBurst)
	}
	var st api.Status
	e.get(api.StatusPath, &st)
	w := st.Workers[0]
	if w.PuntLimited["other"] != uint64(limited) || w.Drops["punt-rate-limited"] != uint64(limited) || len(w.PuntLimited) != 1 || w.Punted != uint64(punted) {
		t.Errorf("status: punt_limited %v, drops %d, punted %d; want other %d, %d punted", w.PuntLimited, w.Drops["punt-rate-limited"], w.Punted, limited, punted)
	}
	fams := e.scrape()
	for _, c := range []struct {
		class string
		want  float64
	}{{"other", float64(limited)}, {"neighbour", 0}, {"bgp", 0}, {"health", 0}} {
		if got, ok := value(fams, "fulcrum_worker_punt_rate_limited_total", "worker", "0", "class", c.class); !ok || got != c.want {
			t.Errorf("fulcrum_worker_punt_rate_limited_total{class=%q} = %v (found %v), want %v", c.class, got, ok, c.want)
		}
	}
	if got, _ := value(fams, "fulcrum_drops_total", "reason", "punt-rate-limited"); got != float64(limited) {
		t.Errorf("fulcrum_drops_total{reason=punt-rate-limited} = %v, want %d", got, limited)
	}
}

// The routes a router sends to the LB (which it never uses but whose
// speaker keeps each one) show per peer in the status and the metrics,
// so an operator sees a router that exports its table to the LB.
func TestBGPPrefixesReceivedShown(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	p.SetAnnouncer(func([]netip.Prefix) {}, func() []control.PeerInfo {
		return []control.PeerInfo{{Address: "10.0.0.1", State: "established", PrefixesSent: 1, PrefixesReceived: 912345}}
	})
	e := serve(t, p, loopback(), p.File)
	var st api.Status
	e.ok("GET", api.StatusPath, "", &st)
	if len(st.BGPPeers) != 1 || st.BGPPeers[0].PrefixesReceived != 912345 || st.BGPPeers[0].PrefixesSent != 1 {
		t.Errorf("status bgp_peers %+v, want 10.0.0.1 with 912345 received, 1 sent", st.BGPPeers)
	}
	if v, ok := value(e.scrape(), "fulcrum_bgp_prefixes_received", "peer", "10.0.0.1"); !ok || v != 912345 {
		t.Errorf("fulcrum_bgp_prefixes_received{peer=10.0.0.1} = %v (found %v), want 912345", v, ok)
	}
}
