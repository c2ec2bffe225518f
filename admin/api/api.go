// Package api is the wire contract of Fulcrum's admin API: its paths and
// the JSON documents it serves. The server (package admin) and its clients
// (fulcrumctl, scripts, tests) share these types, so the CLI does not pull
// in the control plane or the metrics library to speak to a daemon.
//
// Units: packets and bytes are totals since the daemon started; weights
// are in the configuration's units (EffectiveWeight is fractional during a
// slow start); shares are fractions of the Maglev table (0..1).
package api

import (
	"net/url"
	"strconv"
	"time"
)

// Prefix is the path prefix of every JSON endpoint (the API's version).
const Prefix = "/api/v1"

// Paths of the endpoints that take no names. GET VIPsPath lists the VIPs
// without their backends; VIPsPath + "?backends=true" with them.
const (
	StatusPath = Prefix + "/status"
	VIPsPath   = Prefix + "/vips"
	LookupPath = Prefix + "/lookup"
	ReloadPath = Prefix + "/reload"
	ConnsPath  = Prefix + "/conns"
	// CapturePath is POST only: the answer is a pcapng stream (see
	// CaptureQuery), not JSON.
	CapturePath = Prefix + "/capture"
	MetricsPath = "/metrics"
)

// Backend actions: POST VIPPath(vip)/backends/{backend}/{action}.
const (
	ActionDrain   = "drain"
	ActionUndrain = "undrain"
	ActionWeight  = "weight"
	// ActionFlush removes the backend's tracked connections; their next
	// packets are placed by the table again (counted as moved).
	ActionFlush = "flush"
)

// VIPPath is the path of one VIP. Names are path-escaped: a VIP's default
// name ("203.0.113.7:80/tcp") contains a slash.
func VIPPath(vip string) string { return VIPsPath + "/" + url.PathEscape(vip) }

// TablePath is the path of a VIP's Maglev table.
func TablePath(vip string) string { return VIPPath(vip) + "/table" }

// BackendPath is the path of one backend of a VIP.
func BackendPath(vip, backend string) string {
	return VIPPath(vip) + "/backends/" + url.PathEscape(backend)
}

// ActionPath is the path of an operator action on a backend.
func ActionPath(vip, backend, action string) string {
	return BackendPath(vip, backend) + "/" + action
}

// ConnsQuery is the query of a connection listing: vip and backend
// (names or addresses; empty: any), at most limit entries (0: the
// server's default; a limit below 8, one conntrack bucket, is raised to
// it, since a page ends at a bucket boundary), continuing from cursor
// (empty: the start; a cursor the server did not give is refused).
func ConnsQuery(vip, backend string, limit int, cursor string) string {
	q := url.Values{}
	if vip != "" {
		q.Set("vip", vip)
	}
	if backend != "" {
		q.Set("backend", backend)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if len(q) == 0 {
		return ConnsPath
	}
	return ConnsPath + "?" + q.Encode()
}

// Trailers of a capture's answer: the frames written and the frames the
// workers' rings had no room for.
const (
	TrailerCaptureFrames = "Fulcrum-Capture-Frames"
	TrailerCaptureMissed = "Fulcrum-Capture-Missed"
)

// CaptureQuery is the query of a capture: vip and backend (names or
// addresses; empty: any), drops only (of reason, if not empty), at most
// count frames (0: no limit) for at most duration (0: the server's
// default, 10 s).
func CaptureQuery(vip, backend string, drops bool, reason string, count int, duration time.Duration) string {
	q := url.Values{}
	for k, v := range map[string]string{"vip": vip, "backend": backend, "reason": reason} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if drops {
		q.Set("drops", "true")
	}
	if count > 0 {
		q.Set("count", strconv.Itoa(count))
	}
	if duration > 0 {
		q.Set("duration", duration.String())
	}
	if len(q) == 0 {
		return CapturePath
	}
	return CapturePath + "?" + q.Encode()
}

// LookupQuery is the query of a lookup: proto is "tcp" or "udp".
func LookupQuery(src, dst string, sport, dport uint16, proto string) string {
	q := url.Values{}
	q.Set("src", src)
	q.Set("dst", dst)
	q.Set("sport", strconv.Itoa(int(sport)))
	q.Set("dport", strconv.Itoa(int(dport)))
	q.Set("proto", proto)
	return LookupPath + "?" + q.Encode()
}

// Error is the body of every response that is not 2xx.
type Error struct {
	Error string `json:"error"`
}

// Status is GET /api/v1/status: the control plane and every worker.
type Status struct {
	Generation    uint64   `json:"generation"` // of the published service snapshot
	Rebuilds      uint64   `json:"rebuilds"`
	LastRebuildMs float64  `json:"last_rebuild_ms"`
	LastError     string   `json:"last_error,omitempty"` // of the last failed rebuild
	ConfigFile    string   `json:"config_file,omitempty"`
	VIPs          int      `json:"vips"`
	PanicVIPs     []string `json:"panic_vips"` // VIPs in panic mode (fail open)
	Total         Worker   `json:"total"`      // the workers summed (Worker is -1)
	Workers       []Worker `json:"workers"`
	StaleWorkers  []int    `json:"stale_workers,omitempty"` // did not answer: their counters read 0
	// StalledWorkers have answered no counter snapshot for
	// control.stall_timeout (stuck: their queues' flows are dropped);
	// StallWithdrawn is true while every VIP is withdrawn for them.
	StalledWorkers []int `json:"stalled_workers,omitempty"`
	StallWithdrawn bool  `json:"stall_withdrawn,omitempty"`
	// FlowsMissingWorkers did not finish counting their flows in time:
	// the active flow counts lack theirs.
	FlowsMissingWorkers []int     `json:"flows_missing_workers,omitempty"`
	BGPPeers            []BGPPeer `json:"bgp_peers,omitempty"`
	Announced           []string  `json:"announced,omitempty"` // VIP prefixes announced over BGP
	// Converging is true from start until every health check of the
	// backends configured at start has given its first verdict: meanwhile
	// nothing is announced and those backends (health "unknown") are
	// routed like up. ConvergingNewFlows counts the new flows forwarded
	// while converging (traffic the router sent over an old route).
	Converging         bool   `json:"converging"`
	ConvergingNewFlows uint64 `json:"converging_new_flows"`
	// HealthProbes is how many health checks run each round: backends of
	// several VIPs at one address, checked the same way, share one.
	HealthProbes int `json:"health_probes"`
	// HealthChecksFailedLocally counts the checks this host failed to
	// make (out of file descriptors, socket buffers or memory): no
	// backend's verdict took them, so verdicts are stale while it grows.
	HealthChecksFailedLocally uint64 `json:"health_checks_failed_locally"`
}

// BGPPeer is one BGP session.
type BGPPeer struct {
	Address      string  `json:"address"`
	ASN          uint32  `json:"asn"`
	State        string  `json:"state"` // idle, connect, active, opensent, openconfirm, established
	UptimeSec    float64 `json:"uptime_seconds"`
	PrefixesSent uint64  `json:"prefixes_sent"`
	// PrefixesReceived are the routes the router sends to the LB, which
	// it never uses but keeps in memory: a router should send none.
	PrefixesReceived uint64 `json:"prefixes_received"`
	LastError        string `json:"last_error,omitempty"`
}

// Worker is one dataplane worker's (lcore's) counters.
type Worker struct {
	Worker      int    `json:"worker"`
	RxPackets   uint64 `json:"rx_packets"`
	RxBytes     uint64 `json:"rx_bytes"`
	TxPackets   uint64 `json:"tx_packets"`
	TxBytes     uint64 `json:"tx_bytes"`
	Forwarded   uint64 `json:"forwarded"`    // encapsulated toward a backend
	ICMPReplies uint64 `json:"icmp_replies"` // too-big answered to the client
	EchoReplies uint64 `json:"echo_replies"` // pings to a VIP answered by the LB
	Punted      uint64 `json:"punted"`       // handed to the kernel
	// PuntLimited: for the kernel but over their class's budget
	// ([dataplane.punt]), by class (neighbour, bgp, health, other); zero
	// counters are left out. Of Drops["punt-rate-limited"].
	PuntLimited map[string]uint64 `json:"punt_limited,omitempty"`
	FromKernel  uint64            `json:"from_kernel"`
	Fragments   uint64            `json:"fragments"`
	ICMPErrors  uint64            `json:"icmp_errors"`   // routed to the backend of the quoted flow
	Moved       uint64            `json:"moved"`         // pinned flows re-selected (backend gone)
	SYNKept     uint64            `json:"syn_kept"`      // SYNs on an established flow that kept its backend (port reuse, or spoofed)
	SYNsByTable uint64            `json:"syns_by_table"` // SYNs of a load-based VIP placed by the table while handshakes in progress were evicted
	TxFull      uint64            `json:"tx_full"`
	Dropped     uint64            `json:"dropped"`
	Drops       map[string]uint64 `json:"drops"` // by reason; zero counters are left out
	Conntrack   Conntrack         `json:"conntrack"`
	QUIC        map[string]uint64 `json:"quic,omitempty"` // packets to QUIC VIPs by path (long-header, routed, no-id, unknown-id, down-id); zero counters are left out

	// Packets forwarded naming a second-chance backend, and flows given
	// one (docs/second-chance.md).
	SecondChance      uint64 `json:"second_chance,omitempty"`
	SecondChanceFlows uint64 `json:"second_chance_flows,omitempty"`

	// HealthTunnelTx: of FromKernel, health checks encapsulated to a
	// backend (checks through the tunnel).
	HealthTunnelTx uint64 `json:"health_tunnel_tx"`
}

// Conntrack is one worker's flow table.
type Conntrack struct {
	Flows        int               `json:"flows"`               // live entries
	Capacity     int               `json:"capacity,omitempty"`  // slots; per worker only
	Hugepages    bool              `json:"hugepages,omitempty"` // the table is on the EAL's hugepages (else the Go heap, transparent huge pages asked for)
	Hits         uint64            `json:"hits"`
	Misses       uint64            `json:"misses"`
	Inserts      uint64            `json:"inserts"`
	InsertFailed uint64            `json:"insert_failed"`
	Expired      uint64            `json:"expired"`
	Evictions    map[string]uint64 `json:"evictions"` // live entries evicted, by state
}

// VIP is one virtual service. In GET /api/v1/vips Backends is left out; in
// GET /api/v1/vips/{vip} it lists every backend.
type VIP struct {
	Name         string `json:"name"`
	Address      string `json:"address"`
	Port         uint16 `json:"port"`
	Protocol     string `json:"protocol"`
	Encap        string `json:"encap"`
	HashFields   string `json:"hash_fields"` // what the Maglev slot is hashed from: "5-tuple", "3-tuple", "src-ip", "src-ip-prefix /24 /48"
	TableSize    int    `json:"table_size"`  // 0: no table (no backend takes new flows)
	Panic        bool   `json:"panic_mode"`
	Serving      bool   `json:"serving"`
	BackendCount int    `json:"backend_count"`
	Healthy      int    `json:"healthy"` // backends not failing their checks
	Usable       int    `json:"usable"`  // backends in the table (effective weight > 0)
	Packets      uint64 `json:"packets"`
	Bytes        uint64 `json:"bytes"`
	NewFlows     uint64 `json:"new_flows"`
	ActiveFlows  uint64 `json:"active_flows"`
	// PacketRate and ByteRate are per second over the RateSeconds before
	// this answer (since an earlier look at least a second old; 0 on the
	// first look: ask again).
	PacketRate  float64   `json:"packet_rate"`
	ByteRate    float64   `json:"byte_rate"`
	RateSeconds float64   `json:"rate_seconds"`
	Backends    []Backend `json:"backends,omitempty"`
	// FlowsMissingWorkers did not finish counting their flows in time
	// (as Status.FlowsMissingWorkers): ActiveFlows, and its backends',
	// lack theirs. A drain is not over at 0 while it is set.
	FlowsMissingWorkers []int `json:"flows_missing_workers,omitempty"`
}

// Backend is one backend of a VIP, as HAProxy's "show stat" shows a server.
type Backend struct {
	VIP             string  `json:"vip"`
	Name            string  `json:"name"`
	Address         string  `json:"address"`
	ID              uint32  `json:"id"`
	Health          string  `json:"health"` // up, down, unknown (checked, no verdict yet: routed like up), unchecked (no check)
	Reason          string  `json:"reason,omitempty"`
	Weight          int     `json:"weight"`           // configured, or set by the operator
	EffectiveWeight float64 `json:"effective_weight"` // in the table now (drain, health, slow start)
	Drained         bool    `json:"drained"`
	Down            bool    `json:"down"` // its pinned flows are moved away (on_down = "move"; "keep" only zeroes the weight)
	SlowStart       bool    `json:"slow_start"`
	Outlier         bool    `json:"outlier"`   // ejected by the passive (handshake) checks
	Ejections       int     `json:"ejections"` // passive ejections so far
	TableSlots      int     `json:"table_slots"`
	TableShare      float64 `json:"table_share"`
	ActiveFlows     uint64  `json:"active_flows"`
	NewFlows        uint64  `json:"new_flows"`
	Packets         uint64  `json:"packets"`
	Bytes           uint64  `json:"bytes"`
	// State is one word for people: up, down, draining, slow-start,
	// outlier, unknown (checked, no verdict yet). RampPercent is how far a
	// slow start has come (effective over configured weight).
	State       string  `json:"state"`
	RampPercent float64 `json:"ramp_percent,omitempty"`
	PacketRate  float64 `json:"packet_rate"` // per second, as VIP.PacketRate
	ByteRate    float64 `json:"byte_rate"`
	// CheckResult is the last active health check's: "ok" or its error;
	// empty without checks (or none done yet). CheckLatencyMs is the last
	// passing check's round trip.
	CheckResult    string  `json:"check_result,omitempty"`
	CheckLatencyMs float64 `json:"check_latency_ms,omitempty"`
	// FlowsMissingWorkers: as VIP.FlowsMissingWorkers, for ActiveFlows.
	FlowsMissingWorkers []int `json:"flows_missing_workers,omitempty"`
}

// Table is GET /api/v1/vips/{vip}/table: the backend name of every slot of
// the VIP's Maglev table. Instances of a fleet that see the same backends
// must serve the same Slots (and so the same Digest), and hash flows with
// the same key (the same HashKeyID): the key does not enter the table,
// but picks each flow's slot.
type Table struct {
	VIP  string `json:"vip"`
	Size int    `json:"size"` // 0: the VIP has no table
	// Digest is the sha256 of what places the VIP's new flows: the line
	// "hash FIELDS", then per slot "NAME ADDRESS" (the backend's name and
	// its address), each line ended by "\n". Instances that show the same
	// digest and hash key id send every new flow to the same server.
	Digest     string   `json:"digest"`
	HashKeyID  string   `json:"hash_key_id"` // flow.Key.ID of dataplane.hash_key
	HashFields string   `json:"hash_fields"` // the VIP's hash setting ("5-tuple", ...)
	Slots      []string `json:"slots"`
}

// LookupSlot is a Maglev table slot and the backend it names.
type LookupSlot struct {
	Slot    int    `json:"slot"`
	Backend string `json:"backend"`
	Address string `json:"address"`
}

// Lookup is GET /api/v1/lookup: where a flow goes, and why.
type Lookup struct {
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Sport uint16 `json:"sport"`
	Dport uint16 `json:"dport"`
	Proto string `json:"proto"`

	VIP     string `json:"vip,omitempty"`
	Backend string `json:"backend,omitempty"`
	Address string `json:"address,omitempty"`
	// Reason: "conntrack" (pinned by an earlier packet, on Worker),
	// "conntrack-stale" (pinned to a backend that is gone: the next packet
	// is placed as a new flow), "table" (Maglev: a new flow would take
	// Slot), "scheduler" (another scheduler picks a new flow's backend at
	// connection time, by load: Backend is empty and Candidates lists what
	// it picks from), "no-backend" (the VIP takes no new flows),
	// "not-a-vip".
	Reason string `json:"reason"`
	Worker int    `json:"worker"` // -1 unless found in conntrack
	State  string `json:"state,omitempty"`
	IdleMs uint32 `json:"idle_ms,omitempty"`
	Slot   int    `json:"slot"` // -1 when no table slot applies
	Hash   string `json:"hash"`
	// HashFields is the VIP's hash setting Hash was computed under
	// ("5-tuple", "3-tuple", ...; empty when Dst is no VIP).
	HashFields string `json:"hash_fields,omitempty"`
	// Scheduler is the VIP's scheduler ("maglev", "p2c", "least-conn",
	// ...). Candidates are the backends a non-Maglev scheduler picks a new
	// flow from, with the weights and loads it compares.
	Scheduler  string      `json:"scheduler,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"`
	// Untracked (a TCP VIP of another scheduler than Maglev): where a
	// segment that is not a SYN goes when no worker tracks its
	// connection (ECMP moved it here, or its entry expired): the VIP's
	// Maglev table slot, under every scheduler. Not given for a stale
	// pin, whose next segment the scheduler places.
	Untracked *LookupSlot `json:"untracked,omitempty"`
}

// Candidate is one backend a load-aware scheduler may pick for a new flow,
// as the workers see it now.
type Candidate struct {
	Backend string  `json:"backend"`
	Address string  `json:"address"`
	Weight  float64 `json:"weight"`       // effective; 0: not eligible (down, drained, ejected)
	Active  int64   `json:"active_flows"` // the load compared, about a second old
	// LatencyUs is the peak-EWMA latency estimate; 0 without samples.
	LatencyUs int64 `json:"latency_us,omitempty"`
}

// WeightRequest is the body of POST .../backends/{backend}/weight (the
// weight may instead be given as ?weight=N).
type WeightRequest struct {
	Weight *int `json:"weight"`
}

// Reload is the answer to POST /api/v1/reload.
type Reload struct {
	File       string `json:"file"`
	Generation uint64 `json:"generation"`
	VIPs       int    `json:"vips"`
}

// Conns is GET /api/v1/conns: one page of tracked connections. Next is
// the cursor of the next page, empty when every worker's table was read.
type Conns struct {
	Conns []Conn `json:"conns"`
	Next  string `json:"next,omitempty"`
}

// Conn is one tracked connection (a conntrack entry).
type Conn struct {
	Client         string `json:"client"` // address:port
	VIPAddress     string `json:"vip_address"`
	Proto          string `json:"proto"`
	VIP            string `json:"vip"`
	Backend        string `json:"backend"`
	BackendAddress string `json:"backend_address"`
	State          string `json:"state"` // new, established, closing, other
	IdleMs         uint32 `json:"idle_ms"`
	Worker         int    `json:"worker"`
	// Stale: pinned to a backend that is gone or down; the next packet is
	// placed again.
	Stale bool `json:"stale,omitempty"`
	// SecondChance: the backend named in the tunnel header as the flow's
	// second chance (docs/second-chance.md).
	SecondChance string `json:"second_chance,omitempty"`
}

// Flush is the answer to POST .../backends/{backend}/flush.
type Flush struct {
	VIP     string `json:"vip"`
	Backend string `json:"backend"`
	Flushed uint64 `json:"flushed"` // connections removed, over every worker
}
