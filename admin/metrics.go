package admin

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/punt"
)

// PortStats are the wire port's driver counters (dpdk.Stats, which this
// package cannot name: it builds without DPDK too).
type PortStats struct {
	IPackets, OPackets uint64
	IBytes, OBytes     uint64
	IMissed            uint64 // dropped by the NIC: rx ring full (lcore too slow)
	IErrors, OErrors   uint64
	RxNoMbuf           uint64 // rx failed for want of an mbuf (pool too small)
}

// SetPortStats gives the metrics a reader of the wire port's counters
// (nil: no port metrics, as under the pcap or test dataplane). Call it
// before serving.
func (s *Server) SetPortStats(f func() (PortStats, error)) { s.portStats = f }

// SetVersion names the daemon's version in fulcrum_build_info. Call it
// before serving.
func (s *Server) SetVersion(v string) { s.version = v }

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

	bePackets, beBytes, beNewFlows, beActive                  *prometheus.Desc
	beHealthy, beWeight, beEffective, beDrained               *prometheus.Desc
	beOutlier, beEjections                                    *prometheus.Desc
	drops, workerRx, workerTx                                 *prometheus.Desc
	ctFlows, ctEvictions, ctInsertFailed                      *prometheus.Desc
	rebuilds, rebuildSeconds, generation                      *prometheus.Desc
	bgpEstablished, bgpAnnounced, bgpReceived                 *prometheus.Desc
	converging, convergingNewFlows, healthProbes, healthLocal *prometheus.Desc
	adminConns, adminRefused                                  *prometheus.Desc

	// Per worker (lcore).
	wRxBytes, wTxBytes, wTxFull, wMoved, wSYNKept, wSYNsByTable, wPunted, wFromKernel *prometheus.Desc
	wHealthTunnel                                                                     *prometheus.Desc
	wSecondChance, wSecondChanceFlows                                                 *prometheus.Desc
	wFragments, wICMPRouted, wForwarded, wICMPReplies                                 *prometheus.Desc
	wICMPLimited, wPuntLimited, wPolls, wBusy                                         *prometheus.Desc
	wCTEntries, wCTCapacity, wCTInsertFailed, wCTLookups                              *prometheus.Desc
	wCTInserts, wCTExpired, wCTFlushed                                                *prometheus.Desc
	staleWorkers, stalledWorkers, flowsMissing                                        *prometheus.Desc
	wQUIC                                                                             *prometheus.Desc

	// The wire port.
	portPackets, portBytes, portMissed, portNoMbuf, portErrors *prometheus.Desc

	buildInfo, hashKeyInfo, configGen, reloads, lastReload *prometheus.Desc

	// busy keeps each worker's poll counters at the previous scrape, so
	// fulcrum_worker_busy_ratio covers the time since then.
	busyMu sync.Mutex
	busy   []polls
}

type polls struct{ bursts, idle uint64 }

func newCollector(s *Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fulcrum_"+name, help, labels, nil)
	}
	vb := []string{"vip", "backend"}
	return &collector{
		s:           s,
		vipPackets:  d("vip_packets_total", "Packets forwarded for a VIP.", "vip"),
		vipBytes:    d("vip_bytes_total", "Bytes forwarded for a VIP: the frames as received, up to the end of the IP packet (Ethernet padding and trailing bytes left out), before encapsulation.", "vip"),
		vipNewFlows: d("vip_new_flows_total", "New flows (conntrack misses) a VIP sent to a backend.", "vip"),
		vipPanic:    d("vip_panic_mode", "1 while too few of a VIP's backends are healthy and all of them take new flows (fail open).", "vip"),

		bePackets:   d("backend_packets_total", "Packets forwarded to a backend.", vb...),
		beBytes:     d("backend_bytes_total", "Bytes forwarded to a backend, counted as vip_bytes_total.", vb...),
		beNewFlows:  d("backend_new_flows_total", "New flows pinned to a backend.", vb...),
		beActive:    d("backend_active_flows", "Live conntrack entries pinned to a backend, over all workers.", vb...),
		beHealthy:   d("backend_healthy", "1 unless the backend fails its health checks (unchecked backends, and checked ones without a verdict yet, count as healthy).", vb...),
		beWeight:    d("backend_weight", "Configured weight, or the operator's override.", vb...),
		beEffective: d("backend_effective_weight", "Weight in the Maglev table now (0 when drained or down; ramping in slow start).", vb...),
		beDrained:   d("backend_drained", "1 while the backend is drained (no new flows).", vb...),
		beOutlier:   d("backend_outlier", "1 while the backend is ejected by the passive (handshake) checks.", vb...),
		beEjections: d("backend_ejections_total", "Passive ejections of the backend.", vb...),

		drops:    d("drops_total", "Packets dropped, by reason, over all workers (docs/drop-reasons.md).", "reason"),
		workerRx: d("worker_rx_packets_total", "Packets received by a worker (lcore).", "worker"),
		workerTx: d("worker_tx_packets_total", "Packets transmitted by a worker (lcore).", "worker"),

		ctFlows:        d("conntrack_flows", "Live conntrack entries over all workers."),
		ctEvictions:    d("conntrack_evictions_total", "Live conntrack entries evicted to make room, by their state.", "state"),
		ctInsertFailed: d("conntrack_insert_failed_total", "New flows that found no conntrack slot (both their buckets full of entries they may not evict)."),

		rebuilds:       d("table_rebuilds_total", "Service snapshots (Maglev tables) built and published."),
		rebuildSeconds: d("table_rebuild_duration_seconds", "Time to build and publish a service snapshot (every Maglev table)."),
		generation:     d("snapshot_generation", "Generation of the published service snapshot."),

		bgpEstablished: d("bgp_session_established", "1 while the BGP session to a router is established.", "peer"),
		bgpAnnounced:   d("bgp_announced_vips", "VIP prefixes announced over BGP."),
		bgpReceived:    d("bgp_prefixes_received", "Routes a router sends to the LB: never used, but kept in memory (a router should send none).", "peer"),

		converging:         d("converging", "1 from start until every health check has given its first verdict (nothing is announced meanwhile)."),
		convergingNewFlows: d("converging_new_flows_total", "New flows forwarded while converging (before the first announcement)."),
		healthProbes:       d("health_probes", "Health checks run each round: backends of several VIPs at one address, checked the same way, share one."),
		healthLocal:        d("health_checks_failed_locally_total", "Health checks this host failed to make (out of file descriptors, socket buffers or memory); no verdict takes them."),

		adminConns:   d("admin_connections", "Open admin API connections (at most admin.max_conns)."),
		adminRefused: d("admin_connections_refused_total", "Admin API connections closed at accept because admin.max_conns were open."),

		wRxBytes:           d("worker_rx_bytes_total", "Bytes received by a worker.", "worker"),
		wTxBytes:           d("worker_tx_bytes_total", "Bytes transmitted by a worker.", "worker"),
		wTxFull:            d("worker_tx_full_total", "Packets a worker decided to send (forward, reply, punt) that the port's tx queue refused.", "worker"),
		wMoved:             d("worker_moved_flows_total", "Tracked flows re-selected because their backend was removed or went down, or flushed by an operator.", "worker"),
		wSYNsByTable:       d("worker_syns_by_table_total", "SYNs of a load-based VIP placed by the Maglev table instead of the scheduler because the conntrack table was evicting handshakes in progress (a SYN flood): the client's ACK finds the same backend with or without the entry.", "worker"),
		wSYNKept:           d("worker_syn_kept_total", "SYNs on an established connection that kept its backend: a new connection on a reused 5-tuple whose end the LB missed, or a spoofed SYN, which must not move a live connection.", "worker"),
		wPunted:            d("worker_punted_packets_total", "Packets a worker handed to the kernel (exception path).", "worker"),
		wFromKernel:        d("worker_from_kernel_packets_total", "Packets from the kernel a worker sent on the wire.", "worker"),
		wHealthTunnel:      d("worker_health_tunnel_packets_total", "Of the packets from the kernel, health checks encapsulated to their backend (checks through the tunnel).", "worker"),
		wSecondChance:      d("worker_second_chance_packets_total", "Packets forwarded naming a second-chance backend in the tunnel (docs/second-chance.md).", "worker"),
		wSecondChanceFlows: d("worker_second_chance_flows_total", "Flows given a second chance: mid-connection packets of unknown flows whose previous table's choice differs.", "worker"),
		wFragments:         d("worker_fragments_total", "VIP packets that were IP fragments.", "worker"),
		wICMPRouted:        d("worker_icmp_errors_routed_total", "ICMP errors sent to the backend owning the quoted flow.", "worker"),
		wForwarded:         d("worker_forwarded_packets_total", "Packets encapsulated toward a backend.", "worker"),
		wICMPReplies:       d("worker_icmp_replies_total", "ICMP messages the LB answered itself: too-big (path MTU) or echo (ping to a VIP).", "worker", "type"),
		wICMPLimited:       d("worker_icmp_rate_limited_total", "ICMP replies not sent because the lcore's budget was spent.", "worker", "type"),
		wPuntLimited:       d("worker_punt_rate_limited_total", "Packets for the host (the exception path) dropped because their class's budget on the lcore was spent (dataplane.punt).", "worker", "class"),
		wPolls:             d("worker_polls_total", "Receive polls of a worker: with packets (a burst) or empty.", "worker", "result"),
		wBusy:              d("worker_busy_ratio", "Fraction of a worker's polls that found packets, since the previous scrape (since start on the first).", "worker"),
		wCTEntries:         d("worker_conntrack_entries", "Live conntrack entries of a worker.", "worker"),
		wCTCapacity:        d("worker_conntrack_capacity_entries", "Size of a worker's conntrack table.", "worker"),
		wCTInsertFailed:    d("worker_conntrack_insert_failed_total", "New flows of a worker that found no conntrack slot.", "worker"),
		wCTLookups:         d("worker_conntrack_lookups_total", "Conntrack lookups of VIP packets (fragments excluded), by result.", "worker", "result"),
		wCTInserts:         d("worker_conntrack_inserts_total", "Conntrack entries created.", "worker"),
		wCTExpired:         d("worker_conntrack_expired_total", "Conntrack entries reclaimed after their idle timeout.", "worker"),
		wCTFlushed:         d("worker_conntrack_flushed_total", "Conntrack entries removed by an operation (a removed VIP or backend, a flush).", "worker"),
		wQUIC:              d("worker_quic_packets_total", "Packets to QUIC VIPs by the way they took: long-header (flow hash), routed (by the server id of the connection ID), or a fallback to conntrack and the table: no-id, unknown-id, down-id (docs/quic.md).", "worker", "path"),
		flowsMissing:       d("workers_flows_missing", "Workers whose flow count did not finish within this scrape's time (busy with another operation): the active flow gauges lack their flows."),
		staleWorkers:       d("workers_stale", "Workers that did not answer this scrape's counter snapshot (stopped or stuck): their counters keep the last scrape's values, so no counter goes back."),
		stalledWorkers:     d("workers_stalled", "Workers that have answered no counter snapshot for control.stall_timeout (stuck: their queues' flows are dropped); while one is, every VIP is withdrawn unless stall_timeout = 0."),

		portPackets: d("port_packets_total", "Packets through the wire port, from the driver's counters.", "direction"),
		portBytes:   d("port_bytes_total", "Bytes through the wire port, from the driver's counters (some virtual drivers leave them 0).", "direction"),
		portMissed:  d("port_rx_missed_packets_total", "Packets the NIC dropped because the rx ring was full (imissed: the lcores are too slow)."),
		portNoMbuf:  d("port_rx_nombuf_total", "Receives that failed for want of an mbuf (rx_nombuf: the pool is too small)."),
		portErrors:  d("port_errors_total", "Erroneous packets, from the driver's counters (ierrors, oerrors).", "direction"),

		buildInfo:   d("build_info", "Always 1; the labels name the build.", "version", "goversion"),
		hashKeyInfo: d("hash_key_info", "Always 1; id names dataplane.hash_key without revealing it. Every instance of a fleet must show the same id.", "id"),
		configGen:   d("config_generation", "Configurations applied since start: 1 plus the successful reloads."),
		reloads:     d("reloads_total", "Configuration reloads, by result: ok, refused (invalid, or needs a restart: the running one stays), error (the file could not be read, or the configuration is in force but the exception interface was not updated).", "result"),
		lastReload:  d("last_reload_success_timestamp_seconds", "Unix time the running configuration was applied (start, or the last successful reload)."),
	}
}

// Describe sends every metric's description: the collector is checked.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.vipPackets, c.vipBytes, c.vipNewFlows, c.vipPanic,
		c.bePackets, c.beBytes, c.beNewFlows, c.beActive, c.beHealthy, c.beWeight, c.beEffective, c.beDrained, c.beOutlier, c.beEjections,
		c.drops, c.workerRx, c.workerTx, c.ctFlows, c.ctEvictions, c.ctInsertFailed,
		c.rebuilds, c.rebuildSeconds, c.generation, c.bgpEstablished, c.bgpAnnounced, c.bgpReceived,
		c.converging, c.convergingNewFlows, c.healthProbes, c.healthLocal,
		c.adminConns, c.adminRefused,
		c.wRxBytes, c.wTxBytes, c.wTxFull, c.wMoved, c.wSYNKept, c.wSYNsByTable, c.wPunted, c.wFromKernel, c.wHealthTunnel, c.wSecondChance, c.wSecondChanceFlows,
		c.wFragments, c.wICMPRouted, c.wForwarded, c.wICMPReplies, c.wICMPLimited, c.wPuntLimited, c.wPolls, c.wBusy,
		c.wCTEntries, c.wCTCapacity, c.wCTInsertFailed, c.wCTLookups, c.wCTInserts, c.wCTExpired, c.wCTFlushed,
		c.staleWorkers, c.stalledWorkers, c.flowsMissing, c.wQUIC,
		c.portPackets, c.portBytes, c.portMissed, c.portNoMbuf, c.portErrors,
		c.buildInfo, c.hashKeyInfo, c.configGen, c.reloads, c.lastReload,
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

	capacity := c.s.plane.ConntrackCapacity()
	busy := c.busyRatios(st.Workers)
	total := &dataplane.Counters{}
	for i := range st.Workers {
		w := &st.Workers[i]
		total.Add(w)
		id := strconv.Itoa(i)
		counter(c.workerRx, w.RxPackets, id)
		counter(c.workerTx, w.TxPackets, id)
		counter(c.wRxBytes, w.RxBytes, id)
		counter(c.wTxBytes, w.TxBytes, id)
		counter(c.wTxFull, w.TxFull, id)
		counter(c.wMoved, w.Moved, id)
		counter(c.wSYNKept, w.SYNKept, id)
		counter(c.wSYNsByTable, w.SYNsByTable, id)
		counter(c.wPunted, w.Punted, id)
		counter(c.wFromKernel, w.FromKernel, id)
		counter(c.wHealthTunnel, w.HealthTunnelTx, id)
		counter(c.wSecondChance, w.SecondChance, id)
		counter(c.wSecondChanceFlows, w.SecondChanceFlows, id)
		counter(c.wFragments, w.Fragments, id)
		counter(c.wICMPRouted, w.ICMPErrors, id)
		for p, n := range w.QUIC {
			counter(c.wQUIC, n, id, dataplane.QUICPath(p).String())
		}
		counter(c.wForwarded, w.Encap[encap.Forward], id)
		counter(c.wICMPReplies, w.Encap[encap.ICMPReply], id, "too-big")
		counter(c.wICMPReplies, w.EchoReplies, id, "echo")
		counter(c.wICMPLimited, w.Drops[dataplane.DropICMPRateLimited], id, "too-big")
		counter(c.wICMPLimited, w.Drops[dataplane.DropEchoRateLimited], id, "echo")
		for k, n := range w.PuntLimited {
			counter(c.wPuntLimited, n, id, punt.Class(k).String())
		}
		counter(c.wPolls, w.Bursts, id, "packets")
		counter(c.wPolls, w.IdlePolls, id, "empty")
		gauge(c.wBusy, busy[i], id)
		gauge(c.wCTEntries, float64(w.Flows), id)
		if i < len(capacity) {
			gauge(c.wCTCapacity, float64(capacity[i]), id)
		}
		counter(c.wCTInsertFailed, w.Conntrack.InsertFailed, id)
		counter(c.wCTLookups, w.CTHits, id, "hit")
		counter(c.wCTLookups, w.CTMisses, id, "miss")
		counter(c.wCTInserts, w.Conntrack.Inserts, id)
		counter(c.wCTExpired, w.Conntrack.Expired, id)
		counter(c.wCTFlushed, w.Conntrack.Dropped, id)
	}
	gauge(c.staleWorkers, float64(len(st.Stale)))
	gauge(c.stalledWorkers, float64(len(st.Stalled)))
	gauge(c.flowsMissing, float64(len(st.FlowsMissing)))
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

	if c.s.portStats != nil {
		if p, err := c.s.portStats(); err == nil {
			counter(c.portPackets, p.IPackets, "rx")
			counter(c.portPackets, p.OPackets, "tx")
			counter(c.portBytes, p.IBytes, "rx")
			counter(c.portBytes, p.OBytes, "tx")
			counter(c.portMissed, p.IMissed)
			counter(c.portNoMbuf, p.RxNoMbuf)
			counter(c.portErrors, p.IErrors, "rx")
			counter(c.portErrors, p.OErrors, "tx")
		} else {
			c.s.log.Warn("metrics: reading the port's counters", "err", err)
		}
	}

	n, _ := c.s.plane.RebuildStats()
	counter(c.rebuilds, n)
	ops := c.s.plane.OpsStats()
	buckets := make(map[float64]uint64, len(control.RebuildBuckets))
	for i, le := range control.RebuildBuckets {
		buckets[le] = ops.RebuildBuckets[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.rebuildSeconds, ops.RebuildCount, ops.RebuildSum, buckets)
	gauge(c.generation, float64(st.Generation))
	for _, r := range []string{control.ReloadOK, control.ReloadRefused, control.ReloadError} {
		counter(c.reloads, ops.Reloads[r], r)
	}
	gauge(c.configGen, float64(1+ops.Applied))
	last := c.s.started
	if !ops.LastApplied.IsZero() {
		last = ops.LastApplied
	}
	gauge(c.lastReload, float64(last.UnixNano())/1e9)
	version := c.s.version
	if version == "" {
		version = "unknown"
	}
	gauge(c.buildInfo, 1, version, runtime.Version())
	gauge(c.hashKeyInfo, 1, c.s.hashKeyID())

	for _, p := range st.BGP {
		gauge(c.bgpEstablished, bool01(p.State == "established"), p.Address)
		gauge(c.bgpReceived, float64(p.PrefixesReceived), p.Address)
	}
	gauge(c.bgpAnnounced, float64(len(st.Announced)))
	gauge(c.converging, bool01(st.Converging))
	gauge(c.healthProbes, float64(st.HealthProbes))
	counter(c.convergingNewFlows, st.ConvergingNewFlows)
	counter(c.healthLocal, st.HealthLocalFailures)
	conns := c.s.Conns()
	gauge(c.adminConns, float64(conns.Open))
	counter(c.adminRefused, conns.Refused)
}

// busyRatios is, per worker, the fraction of polls with packets since
// the previous scrape, or since start when there is no earlier one (or
// the worker did not poll since).
func (c *collector) busyRatios(workers []dataplane.Counters) []float64 {
	c.busyMu.Lock()
	defer c.busyMu.Unlock()
	out := make([]float64, len(workers))
	prev := c.busy
	c.busy = make([]polls, len(workers))
	for i := range workers {
		now := polls{workers[i].Bursts, workers[i].IdlePolls}
		c.busy[i] = now
		var base polls
		if i < len(prev) && prev[i].bursts <= now.bursts && prev[i].idle <= now.idle &&
			now.bursts+now.idle > prev[i].bursts+prev[i].idle {
			base = prev[i]
		}
		if all := now.bursts - base.bursts + now.idle - base.idle; all > 0 {
			out[i] = float64(now.bursts-base.bursts) / float64(all)
		}
	}
	return out
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

// Scrapes at once. A scrape's answer is built whole before it is written
// (promhttp): with 65,536 backends it is about 118 MB of text and 500 MB
// allocated, held until a slow reader has taken it (up to the write
// timeout). Two run at once (two Prometheus servers of an HA pair); a
// third waits up to metricsWait for one to end, then is answered 503 with
// Retry-After, as a table read is.
var metricsSlot = make(chan struct{}, 2)

// metricsWait is how long a scrape waits for a place.
var metricsWait = 5 * time.Second

// gateMetrics bounds the scrapes running at once (metricsSlot).
func (s *Server) gateMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !acquire(r.Context(), metricsSlot, metricsWait) {
			w.Header().Set("Retry-After", "5")
			s.writeError(w, r, &httpError{http.StatusServiceUnavailable,
				"two metrics scrapes are in progress (two at a time): retry later"})
			return
		}
		defer func() { <-metricsSlot }()
		next.ServeHTTP(w, r)
	})
}
