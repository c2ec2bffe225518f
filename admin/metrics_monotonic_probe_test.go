package admin_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// The probes of this file check what Prometheus' rate() and increase()
// assume of every counter series: it never decreases unless the process
// restarted, and a series that vanishes and comes back does not come back
// lower.

// monoKey names one counter sample: family, then its labels sorted.
type monoKey string

func monoKeyOf(name string, m *dto.Metric, suffix string) monoKey {
	ls := make([]string, 0, len(m.Label))
	for _, l := range m.Label {
		ls = append(ls, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(ls)
	return monoKey(name + suffix + "{" + strings.Join(ls, ",") + "}")
}

// counters flattens every fulcrum_ counter (and histogram count, sum and
// bucket) of a scrape.
func monoCounters(fams map[string]*dto.MetricFamily) map[monoKey]float64 {
	out := map[monoKey]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "fulcrum_") {
			continue
		}
		for _, m := range f.Metric {
			switch {
			case m.Counter != nil:
				out[monoKeyOf(name, m, "")] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[monoKeyOf(name, m, "_count")] = float64(m.Histogram.GetSampleCount())
				out[monoKeyOf(name, m, "_sum")] = m.Histogram.GetSampleSum()
				for _, b := range m.Histogram.Bucket {
					out[monoKeyOf(name, m, fmt.Sprintf("_bucket[le=%g]", b.GetUpperBound()))] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// monitor remembers every counter series' last value (and, for series that
// vanished, the value they had) and reports each decrease.
type monitor struct {
	e    *env
	last map[monoKey]float64
	gone map[monoKey]float64
	bad  []string
	// renewed names the backends ("backend=be4,vip=web") the last reload
	// gave a new incarnation (re-added, or at a new address): their
	// counters may start again from 0, once, which rate() takes for the
	// reset it is. resets lists the ones seen.
	renewed map[string]bool
	resets  []string
}

func newMonitor(e *env) *monitor {
	return &monitor{e: e, last: map[monoKey]float64{}, gone: map[monoKey]float64{}}
}

// step scrapes, records each decrease under the step's name and returns
// the scrape.
func (m *monitor) step(name string) map[string]*dto.MetricFamily {
	m.e.t.Helper()
	fams := m.e.scrape()
	cur := monoCounters(fams)
	allowed := func(k monoKey, v float64) bool {
		for r := range m.renewed {
			if v == 0 && strings.Contains(string(k), "{"+r+"}") {
				m.resets = append(m.resets, fmt.Sprintf("%s: %s", name, k))
				return true
			}
		}
		return false
	}
	for k, v := range cur {
		if p, ok := m.last[k]; ok && v < p && !allowed(k, v) {
			m.bad = append(m.bad, fmt.Sprintf("%s: %s went back %v -> %v", name, k, p, v))
		}
		if p, ok := m.gone[k]; ok {
			if v < p && !allowed(k, v) {
				m.bad = append(m.bad, fmt.Sprintf("%s: %s came back lower %v -> %v", name, k, p, v))
			}
			delete(m.gone, k)
		}
	}
	for k, v := range m.last {
		if _, ok := cur[k]; !ok {
			m.gone[k] = v
		}
	}
	m.last = cur
	m.renewed = nil
	return fams
}

func (m *monitor) violations(filter string) []string {
	var out []string
	for _, b := range m.bad {
		if strings.Contains(b, filter) {
			out = append(out, b)
		}
	}
	return out
}

// monoConfig is admintest.Config's layout with the web backends given
// ("name=addr") and the dns VIP under dnsName ("" leaves it out), plus
// extra VIPs written as given.
func monoConfig(web []string, dnsName string, extra func(*configtest.Builder)) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
		VIP("web", configtest.Web, 80)
	for _, w := range web {
		name, addr, _ := strings.Cut(w, "=")
		if a, weight, ok := strings.Cut(addr, "="); ok {
			b.Backend(name, a, "weight = "+weight)
			continue
		}
		b.Backend(name, addr)
	}
	if dnsName != "" {
		b.VIP(dnsName, "203.0.113.8", 53, `protocol = "udp"`).
			Sub("[vip.health]", `kind = "tcp"`).
			Backend("ns1", "10.0.2.1").
			Backend("ns2", "10.0.2.2")
	}
	if extra != nil {
		extra(b)
	}
	return b.String()
}

func (e *env) monoReload(toml string) {
	e.t.Helper()
	if err := os.WriteFile(e.plane.File, []byte(toml), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := e.plane.Reload(e.plane.File); err != nil {
		e.t.Fatalf("reload: %v", err)
	}
}

// burst sends n new TCP flows (SYN then ACK) to web and n UDP flows to dns
// (when dns is true), each from its own source port starting at sport.
func (e *env) monoBurst(sport uint16, n int, dns bool) {
	e.t.Helper()
	for i := range n {
		p := sport + uint16(i)
		for _, f := range []string{"S", "A"} {
			if r := e.plane.Send(admintest.TCP(e.t, p, webVIP, f)); r.Verdict != dataplane.Tx {
				e.t.Fatalf("web flow %d %s: verdict %v", p, f, r.Verdict)
			}
		}
		if dns {
			if r := e.plane.Send(admintest.UDP(e.t, p, dnsVIP)); r.Verdict != dataplane.Tx {
				e.t.Fatalf("dns flow %d: verdict %v", p, r.Verdict)
			}
		}
	}
}

// gaugesMatchStatus compares the per-backend gauges of a scrape with the
// VIP list read right after it (no traffic in between).
func (e *env) gaugesMatchStatus(step string, fams map[string]*dto.MetricFamily) []string {
	e.t.Helper()
	var vips []api.VIP
	e.get(api.VIPsPath+"?backends=true", &vips)
	var bad []string
	seen := 0
	for _, v := range vips {
		for _, b := range v.Backends {
			l := []string{"vip", v.Name, "backend", b.Name}
			for _, c := range []struct {
				name string
				want float64
			}{
				{"fulcrum_backend_active_flows", float64(b.ActiveFlows)},
				{"fulcrum_backend_weight", float64(b.Weight)},
				{"fulcrum_backend_effective_weight", b.EffectiveWeight},
				{"fulcrum_backend_healthy", bool01(b.Health != "down")},
				{"fulcrum_backend_drained", bool01(b.Drained)},
				{"fulcrum_backend_packets_total", float64(b.Packets)},
				{"fulcrum_backend_new_flows_total", float64(b.NewFlows)},
			} {
				got, ok := value(fams, c.name, l...)
				if !ok || got != c.want {
					bad = append(bad, fmt.Sprintf("%s: %s%v = %v (present %v), status says %v", step, c.name, l, got, ok, c.want))
				}
			}
			seen++
		}
		if got, _ := value(fams, "fulcrum_vip_packets_total", "vip", v.Name); got != float64(v.Packets) {
			bad = append(bad, fmt.Sprintf("%s: fulcrum_vip_packets_total{vip=%s} = %v, status says %v", step, v.Name, got, v.Packets))
		}
	}
	if n := len(fams["fulcrum_backend_weight"].GetMetric()); n != seen {
		bad = append(bad, fmt.Sprintf("%s: %d fulcrum_backend_weight series, status lists %d backends", step, n, seen))
	}
	return bad
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var monoWeb = []string{"be1=10.0.1.1", "be2=10.0.1.2", "be3=10.0.1.3", "be4=10.0.1.4"}

// TestMetricsMonotonicWalk walks the operations an operator does (drain,
// health flaps, flush, reloads that change weights, remove and re-add
// backends, rename and replace VIPs) with traffic between them and checks
// every fulcrum_ counter series after each step, and that the gauges agree
// with the VIP list.
func TestMetricsMonotonicWalk(t *testing.T) {
	e := start(t, monoConfig(monoWeb, "dns", nil), loopback())
	m := newMonitor(e)
	var gauges []string
	sport := uint16(1000)
	burst := func(n int, dns bool) { e.monoBurst(sport, n, dns); sport += uint16(n) }
	check := func(step string) {
		fams := m.step(step)
		gauges = append(gauges, e.gaugesMatchStatus(step, fams)...)
	}

	burst(40, true)
	check("traffic while converging")
	e.plane.Verdict(t, "dns", "ns1", true)
	e.plane.Verdict(t, "dns", "ns2", true)
	check("converged")
	burst(20, true)
	check("traffic")

	e.ok("POST", api.ActionPath("web", "be1", api.ActionDrain), "", new(map[string]any))
	burst(20, false)
	check("drain be1")
	e.ok("POST", api.ActionPath("web", "be1", api.ActionUndrain), "", new(map[string]any))
	burst(20, false)
	check("undrain be1")

	e.plane.Verdict(t, "dns", "ns1", false)
	burst(10, true)
	check("ns1 down")
	e.plane.Verdict(t, "dns", "ns1", true)
	burst(10, true)
	check("ns1 up")

	e.ok("POST", api.ActionPath("web", "be2", api.ActionFlush), "", new(api.Flush))
	burst(20, false)
	check("flush be2")

	e.monoReload(monoConfig([]string{"be1=10.0.1.1", "be2=10.0.1.2", "be3=10.0.1.3", "be4=10.0.1.4=3"}, "dns", nil))
	check("reload: weight")
	burst(20, false)
	check("reload: weight, traffic")

	e.monoReload(monoConfig(monoWeb[:3], "dns", nil))
	check("reload: be4 removed")
	burst(20, false)
	check("reload: be4 removed, traffic")

	e.monoReload(monoConfig(monoWeb, "dns", nil))
	m.renewed = map[string]bool{"backend=be4,vip=web": true}
	check("reload: be4 re-added")
	burst(20, false)
	check("reload: be4 re-added, traffic")

	e.monoReload(monoConfig([]string{"be1=10.0.1.1", "be2=10.0.1.2", "be3=10.0.1.3", "be4=10.0.1.40"}, "dns", nil))
	m.renewed = map[string]bool{"backend=be4,vip=web": true}
	check("reload: be4 moved")
	burst(20, false)
	check("reload: be4 moved, traffic")

	web2 := []string{"be1=10.0.1.1", "be2=10.0.1.2", "be4=10.0.1.40", "be9=10.0.1.9"}
	e.monoReload(monoConfig(web2, "dns", nil))
	check("reload: be3 replaced by be9")
	burst(20, false)
	check("reload: be3 replaced by be9, traffic")

	e.monoReload(monoConfig(web2, "dns2", nil))
	check("reload: dns renamed dns2")
	burst(10, true)
	check("reload: dns renamed dns2, traffic")

	e.monoReload(monoConfig(web2, "", nil))
	check("reload: dns2 removed")
	e.monoReload(monoConfig(web2, "", func(b *configtest.Builder) {
		b.VIP("api", "203.0.113.9", 443).Backend("api1", "10.0.3.1")
	}))
	check("reload: api added")

	for i := range 20 {
		burst(3, false)
		check(fmt.Sprintf("snapshot cycle %d", i))
	}

	for _, r := range m.resets {
		t.Logf("expected reset (new incarnation): %s", r)
	}
	for _, b := range m.bad {
		t.Error(b)
	}
	for _, g := range gauges {
		t.Error(g)
	}
}

// TestMetricsVIPNewFlowsOnBackendRemoval: removing a backend by reload
// must not take its new flows out of fulcrum_vip_new_flows_total, a
// counter of the VIP, whose series stays.
func TestMetricsVIPNewFlowsOnBackendRemoval(t *testing.T) {
	e := start(t, monoConfig(monoWeb, "", nil), loopback())
	e.monoBurst(1000, 40, false)
	before, _ := value(e.scrape(), "fulcrum_vip_new_flows_total", "vip", "web")
	pktsBefore, _ := value(e.scrape(), "fulcrum_vip_packets_total", "vip", "web")
	if before != 40 || pktsBefore != 80 {
		t.Fatalf("web: %v new flows, %v packets after 40 flows of 2 packets", before, pktsBefore)
	}
	e.monoReload(monoConfig(monoWeb[:3], "", nil))
	fams := e.scrape()
	after, _ := value(fams, "fulcrum_vip_new_flows_total", "vip", "web")
	pktsAfter, _ := value(fams, "fulcrum_vip_packets_total", "vip", "web")
	if after < before {
		t.Errorf("fulcrum_vip_new_flows_total{vip=web} went back %v -> %v when be4 was removed (fulcrum_vip_packets_total %v -> %v)", before, after, pktsBefore, pktsAfter)
	}
}

// TestMetricsVIPIDReuse: a VIP added after another was removed must not
// start with the removed VIP's traffic.
func TestMetricsVIPIDReuse(t *testing.T) {
	e := start(t, monoConfig(monoWeb, "dns", nil), loopback())
	e.monoBurst(1000, 30, true)
	if v, _ := value(e.scrape(), "fulcrum_vip_packets_total", "vip", "dns"); v != 30 {
		t.Fatalf("dns: %v packets, want 30", v)
	}
	e.monoReload(monoConfig(monoWeb, "", nil))
	e.monoReload(monoConfig(monoWeb, "", func(b *configtest.Builder) {
		b.VIP("api", "203.0.113.9", 443).Backend("api1", "10.0.3.1")
	}))
	fams := e.scrape()
	for _, n := range []string{"fulcrum_vip_packets_total", "fulcrum_vip_bytes_total"} {
		if v, ok := value(fams, n, "vip", "api"); !ok || v != 0 {
			t.Errorf("%s{vip=api} = %v (present %v) before api saw a packet: the removed dns VIP's count", n, v, ok)
		}
	}
	var vips []api.VIP
	e.get(api.VIPsPath, &vips)
	for _, v := range vips {
		if v.Name == "api" && v.Packets != 0 {
			t.Errorf("status: api has %d packets before it saw one", v.Packets)
		}
	}
}

// TestMetricsConvergingNewFlowsAfterConvergence: the count of flows
// forwarded while converging does not fall when convergence ends.
func TestMetricsConvergingNewFlowsAfterConvergence(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	e.monoBurst(1000, 25, true)
	fams := e.scrape()
	before, _ := value(fams, "fulcrum_converging_new_flows_total")
	if c, _ := value(fams, "fulcrum_converging"); c != 1 || before != 50 {
		t.Fatalf("converging %v, %v new flows while converging; want 1, 50", c, before)
	}
	e.plane.Verdict(t, "dns", "ns1", true)
	e.plane.Verdict(t, "dns", "ns2", true)
	fams = e.scrape()
	after, _ := value(fams, "fulcrum_converging_new_flows_total")
	var st api.Status
	e.get(api.StatusPath, &st)
	if c, _ := value(fams, "fulcrum_converging"); c != 0 {
		t.Fatalf("still converging after both verdicts")
	}
	if after < before || st.ConvergingNewFlows < uint64(before) {
		t.Errorf("fulcrum_converging_new_flows_total went back %v -> %v at convergence (status: %d)", before, after, st.ConvergingNewFlows)
	}
}

// TestMetricsVIPKeyChangeInheritsRemovedVIP: a VIP that moves to another
// port (a new key, so a new id) keeps its series, fulcrum_vip_*{vip=web};
// when the id it gets was a removed VIP's, the series jumps to that VIP's
// counts: rate() shows traffic that never happened.
func TestMetricsVIPKeyChangeInheritsRemovedVIP(t *testing.T) {
	e := start(t, monoConfig(monoWeb, "dns", nil), loopback())
	e.monoBurst(1000, 5, false) // web: 10 packets
	for i := range 200 {        // dns: 200 packets
		e.plane.Send(admintest.UDP(t, uint16(5000+i), dnsVIP))
	}
	before, _ := value(e.scrape(), "fulcrum_vip_packets_total", "vip", "web")
	e.monoReload(monoConfig(monoWeb, "", nil))
	moved := strings.Replace(monoConfig(monoWeb, "", nil), "port = 80", "port = 8080", 1)
	e.monoReload(moved)
	after, _ := value(e.scrape(), "fulcrum_vip_packets_total", "vip", "web")
	if after > before {
		t.Errorf("fulcrum_vip_packets_total{vip=web} jumped %v -> %v with no packet sent (the removed dns VIP's 200)", before, after)
	}
}
