package admin

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// collector exports the control plane's state as Prometheus metrics. It
// reads one Status at scrape time, so there is no background goroutine and
// every scrape is consistent with itself. Label cardinality is bounded by
// the configuration: VIPs x backends, plus fixed sets (drop reasons,
// conntrack states, workers).
type collector struct {
	s *Server

	// One scrape at a time reads the status into buf, whose counter
	// snapshots are reused from scrape to scrape (no garbage per worker).
	mu  sync.Mutex
	buf control.StatusBuf

	vipPackets, vipBytes, vipNewFlows, vipPanic *prometheus.Desc

	bePackets, beBytes, beNewFlows, beActive    *prometheus.Desc
	beHealthy, beWeight, beEffective, beDrained *prometheus.Desc
	beOutlier, beEjections                      *prometheus.Desc
	drops, workerRx, workerTx                   *prometheus.Desc
	ctFlows, ctEvictions, ctInsertFailed        *prometheus.Desc
	rebuilds, rebuildSeconds, generation        *prometheus.Desc
	bgpEstablished, bgpAnnounced                *prometheus.Desc
	converging, convergingNewFlows              *prometheus.Desc
	adminConns, adminRefused                    *prometheus.Desc
}

func newCollector(s *Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fulcrum_"+name, help, labels, nil)
	}
	vb := []string{"vip", "backend"}
	return &collector{
		s:           s,
		vipPackets:  d("vip_packets_total", "Packets forwarded for a VIP.", "vip"),
		vipBytes:    d("vip_bytes_total", "Bytes forwarded for a VIP.", "vip"),
		vipNewFlows: d("vip_new_flows_total", "New flows (conntrack misses) a VIP sent to a backend.", "vip"),
		vipPanic:    d("vip_panic_mode", "1 while too few of a VIP's backends are healthy and all of them take new flows (fail open).", "vip"),

		bePackets:   d("backend_packets_total", "Packets forwarded to a backend.", vb...),
		beBytes:     d("backend_bytes_total", "Bytes forwarded to a backend.", vb...),
		beNewFlows:  d("backend_new_flows_total", "New flows pinned to a backend.", vb...),
		beActive:    d("backend_active_flows", "Live conntrack entries pinned to a backend, over all workers.", vb...),
		beHealthy:   d("backend_healthy", "1 unless the backend fails its health checks (unchecked backends, and checked ones without a verdict yet, count as healthy).", vb...),
		beWeight:    d("backend_weight", "Configured weight, or the operator's override.", vb...),
		beEffective: d("backend_effective_weight", "Weight in the Maglev table now (0 when drained or down; ramping in slow start).", vb...),
		beDrained:   d("backend_drained", "1 while the backend is drained (no new flows).", vb...),
		beOutlier:   d("backend_outlier", "1 while the backend is ejected by the passive (handshake) checks.", vb...),
		beEjections: d("backend_ejections_total", "Passive ejections of the backend.", vb...),

		drops:    d("drops_total", "Packets dropped, by reason, over all workers.", "reason"),
		workerRx: d("worker_rx_packets_total", "Packets received by a worker (lcore).", "worker"),
		workerTx: d("worker_tx_packets_total", "Packets transmitted by a worker (lcore).", "worker"),

		ctFlows:        d("conntrack_flows", "Live conntrack entries over all workers."),
		ctEvictions:    d("conntrack_evictions_total", "Live conntrack entries evicted to make room, by their state.", "state"),
		ctInsertFailed: d("conntrack_insert_failed_total", "New flows that found no conntrack slot (bucket full of entries they may not evict)."),

		rebuilds:       d("table_rebuilds_total", "Service snapshots (Maglev tables) built and published."),
		rebuildSeconds: d("table_rebuild_seconds", "Duration of the last snapshot rebuild."),
		generation:     d("snapshot_generation", "Generation of the published service snapshot."),

		bgpEstablished: d("bgp_session_established", "1 while the BGP session to a router is established.", "peer"),
		bgpAnnounced:   d("bgp_announced_vips", "VIP prefixes announced over BGP."),

		converging:         d("converging", "1 from start until every health check has given its first verdict (nothing is announced meanwhile)."),
		convergingNewFlows: d("converging_new_flows_total", "New flows forwarded while converging (before the first announcement)."),

		adminConns:   d("admin_connections", "Open admin API connections (at most admin.max_conns)."),
		adminRefused: d("admin_connections_refused_total", "Admin API connections closed at accept because admin.max_conns were open."),
	}
}

// Describe sends every metric's description: the collector is checked.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.vipPackets, c.vipBytes, c.vipNewFlows, c.vipPanic,
		c.bePackets, c.beBytes, c.beNewFlows, c.beActive, c.beHealthy, c.beWeight, c.beEffective, c.beDrained, c.beOutlier, c.beEjections,
		c.drops, c.workerRx, c.workerTx, c.ctFlows, c.ctEvictions, c.ctInsertFailed,
		c.rebuilds, c.rebuildSeconds, c.generation, c.bgpEstablished, c.bgpAnnounced,
		c.converging, c.convergingNewFlows,
		c.adminConns, c.adminRefused,
	} {
		ch <- d
	}
}

// Collect reads the control plane's status, with flow counts, and turns
// it into metrics.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.statusMu.Lock()
	st := c.s.plane.StatusInto(true, &c.buf)
	c.s.statusMu.Unlock()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for i := range st.VIPs {
		v := vipJSON(&st.VIPs[i])
		counter(c.vipPackets, v.Packets, v.Name)
		counter(c.vipBytes, v.Bytes, v.Name)
		counter(c.vipNewFlows, v.NewFlows, v.Name)
		gauge(c.vipPanic, bool01(v.Panic), v.Name)
		for _, b := range v.Backends {
			counter(c.bePackets, b.Packets, v.Name, b.Name)
			counter(c.beBytes, b.Bytes, v.Name, b.Name)
			counter(c.beNewFlows, b.NewFlows, v.Name, b.Name)
			gauge(c.beActive, float64(b.ActiveFlows), v.Name, b.Name)
			gauge(c.beHealthy, bool01(b.Health != "down"), v.Name, b.Name)
			gauge(c.beWeight, float64(b.Weight), v.Name, b.Name)
			gauge(c.beEffective, b.EffectiveWeight, v.Name, b.Name)
			gauge(c.beDrained, bool01(b.Drained), v.Name, b.Name)
			gauge(c.beOutlier, bool01(b.Outlier), v.Name, b.Name)
			counter(c.beEjections, uint64(b.Ejections), v.Name, b.Name)
		}
	}

	total := &dataplane.Counters{}
	for i := range st.Workers {
		w := &st.Workers[i]
		total.Add(w)
		counter(c.workerRx, w.RxPackets, strconv.Itoa(i))
		counter(c.workerTx, w.TxPackets, strconv.Itoa(i))
	}
	// Reasons are summed by name: a label value must appear once.
	drops := map[string]uint64{}
	var order []string
	dataplane.ForEachDrop(total, func(reason string, n uint64) {
		if _, ok := drops[reason]; !ok {
			order = append(order, reason)
		}
		drops[reason] += n
	})
	for _, r := range order {
		counter(c.drops, drops[r], r)
	}
	gauge(c.ctFlows, float64(total.Flows))
	for s, n := range total.Conntrack.Evicted {
		counter(c.ctEvictions, n, conntrack.State(s).String())
	}
	counter(c.ctInsertFailed, total.Conntrack.InsertFailed)

	n, last := c.s.plane.RebuildStats()
	counter(c.rebuilds, n)
	gauge(c.rebuildSeconds, last.Seconds())
	gauge(c.generation, float64(st.Generation))
	for _, p := range st.BGP {
		gauge(c.bgpEstablished, bool01(p.State == "established"), p.Address)
	}
	gauge(c.bgpAnnounced, float64(len(st.Announced)))
	gauge(c.converging, bool01(st.Converging))
	counter(c.convergingNewFlows, st.ConvergingNewFlows)
	conns := c.s.Conns()
	gauge(c.adminConns, float64(conns.Open))
	counter(c.adminRefused, conns.Refused)
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// prometheusGoCollectors are the Go runtime's and the process's metrics.
func prometheusGoCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
}
