package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/maglev"
	"github.com/fulcrumlb/fulcrum/sched"
)

// fieldError is a validation error tied to a configuration path such as
// "vip[0].backend[2].weight"; Parse turns the path into a line number.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

func errAt(path, format string, args ...any) error {
	return &fieldError{path: path, msg: path + ": " + fmt.Sprintf(format, args...)}
}

// Encapsulations the dataplane can write.
var encaps = map[string]bool{"gre": true, "ipip": true, "gue": true}

func boolPtr(b bool) *bool { return &b }

// finish fills defaults and validates. It stops at the first error so the
// operator fixes one thing at a time with an exact line.
func (c *Config) finish() error {
	e := &c.EAL
	if e.MemoryMB == 0 {
		e.MemoryMB = DefaultMemoryMB
	}
	if e.MemoryMB < 64 {
		return errAt("eal.memory_mb", "%d MiB is too little for DPDK (need at least 64)", e.MemoryMB)
	}
	if e.FilePrefix == "" {
		e.FilePrefix = "fulcrum"
	}
	if strings.ContainsAny(e.FilePrefix, "/ \t") {
		return errAt("eal.file_prefix", "%q must not contain '/' or spaces", e.FilePrefix)
	}
	if e.MainLcore < 0 {
		return errAt("eal.main_lcore", "%d is negative", e.MainLcore)
	}
	if len(e.WorkerLcores) == 0 {
		e.WorkerLcores = []int{e.MainLcore + 1}
	}
	if e.LcoreMap != "" {
		mapped := map[int]bool{}
		for _, part := range strings.Split(e.LcoreMap, ",") {
			id, cpu, found := strings.Cut(part, "@")
			n, err := strconv.Atoi(id)
			if err != nil || n < 0 {
				return errAt("eal.lcore_map", "%q: %q is not LCORE or LCORE@CPU", e.LcoreMap, part)
			}
			if found {
				if c, err := strconv.Atoi(cpu); err != nil || c < 0 {
					return errAt("eal.lcore_map", "%q: %q is not LCORE@CPU", e.LcoreMap, part)
				}
			}
			mapped[n] = true
		}
		for _, l := range append([]int{e.MainLcore}, e.WorkerLcores...) {
			if !mapped[l] {
				return errAt("eal.lcore_map", "%q does not place lcore %d", e.LcoreMap, l)
			}
		}
	}
	seen := map[int]bool{e.MainLcore: true}
	for i, w := range e.WorkerLcores {
		if w < 0 || seen[w] {
			return errAt("eal.worker_lcores", "lcore %d (entry %d) is negative or used twice (the main lcore is %d)", w, i, e.MainLcore)
		}
		seen[w] = true
	}

	d := &c.Dataplane
	if d.Port == "" {
		return errAt("dataplane.port", "is required: the DPDK device name of the wire port (e.g. \"net_af_packet0\" or a PCI address)")
	}
	if d.Burst == 0 {
		d.Burst = DefaultBurst
	}
	if d.Burst < 1 || d.Burst > 64 {
		return errAt("dataplane.burst", "%d is outside 1..64", d.Burst)
	}
	for _, f := range []struct {
		p   string
		v   *int
		def int
	}{{"dataplane.rx_desc", &d.RxDesc, DefaultRxDesc}, {"dataplane.tx_desc", &d.TxDesc, DefaultTxDesc}, {"dataplane.mempool_size", &d.MempoolSize, DefaultMempoolSize}} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 64 || *f.v > 1<<20 {
			return errAt(f.p, "%d is outside 64..1048576", *f.v)
		}
	}
	if d.IdleBackoff == nil {
		d.IdleBackoff = boolPtr(true)
	}
	if d.IdleMaxSleep.Duration == 0 {
		d.IdleMaxSleep.Duration = DefaultIdleMaxSleep
	}
	if d.IdleMaxSleep.Duration < 0 || d.IdleMaxSleep.Seconds() > 1 {
		return errAt("dataplane.idle_max_sleep", "%v is outside 0..1s", d.IdleMaxSleep.Duration)
	}
	if d.Exception == nil {
		d.Exception = boolPtr(true)
	}
	if d.ExceptionIf == "" {
		d.ExceptionIf = DefaultExceptionName
	}
	if len(d.ExceptionIf) > 15 {
		return errAt("dataplane.exception_iface", "%q is longer than 15 characters (Linux IFNAMSIZ)", d.ExceptionIf)
	}
	if !d.LBIPv4.IsValid() && !d.LBIPv6.IsValid() {
		return errAt("dataplane", "needs lb_ipv4 or lb_ipv6: the LB's own address, used as the tunnels' outer source")
	}
	if d.LBIPv4.IsValid() && !d.LBIPv4.Is4() {
		return errAt("dataplane.lb_ipv4", "%v is not an IPv4 address", d.LBIPv4)
	}
	if d.LBIPv6.IsValid() && !d.LBIPv6.Is6() {
		return errAt("dataplane.lb_ipv6", "%v is not an IPv6 address", d.LBIPv6)
	}
	if d.GatewayIPv4.IsValid() && !d.GatewayIPv4.Is4() {
		return errAt("dataplane.gateway_ipv4", "%v is not an IPv4 address", d.GatewayIPv4)
	}
	if d.GatewayIPv6.IsValid() && !d.GatewayIPv6.Is6() {
		return errAt("dataplane.gateway_ipv6", "%v is not an IPv6 address", d.GatewayIPv6)
	}
	if d.LBPrefix4 == 0 {
		d.LBPrefix4 = 24
	}
	if d.LBPrefix6 == 0 {
		d.LBPrefix6 = 64
	}
	if d.LBPrefix4 < 1 || d.LBPrefix4 > 32 {
		return errAt("dataplane.lb_ipv4_prefix", "%d is outside 1..32", d.LBPrefix4)
	}
	if d.LBPrefix6 < 1 || d.LBPrefix6 > 128 {
		return errAt("dataplane.lb_ipv6_prefix", "%d is outside 1..128", d.LBPrefix6)
	}
	if d.MTU == 0 {
		d.MTU = DefaultMTU
	}
	if d.MTU < 1280 || d.MTU > 9216 {
		return errAt("dataplane.mtu", "%d is outside 1280..9216", d.MTU)
	}
	if d.Encap == "" {
		d.Encap = "gre"
	}
	if !encaps[d.Encap] {
		return errAt("dataplane.encap", "%q is not one of gre, ipip, gue", d.Encap)
	}
	if d.TTL == 0 {
		d.TTL = DefaultTTL
	}
	if d.TTL < 1 || d.TTL > 255 {
		return errAt("dataplane.ttl", "%d is outside 1..255", d.TTL)
	}
	if d.DF == "" {
		d.DF = "set"
	}
	if d.DF != "set" && d.DF != "inherit" && d.DF != "clear" {
		return errAt("dataplane.df", "%q is not one of set, inherit, clear", d.DF)
	}
	if d.GUEPort == 0 {
		d.GUEPort = DefaultGUEPort
	}
	if d.GUEPort < 1 || d.GUEPort > 65535 {
		return errAt("dataplane.gue_port", "%d is not a UDP port", d.GUEPort)
	}
	if d.HashKey == "" {
		return errAt("dataplane.hash_key", "is required: 32 hex digits, the same on every instance of the fleet (e.g. from `openssl rand -hex 16`)")
	}
	if _, err := flow.ParseKey(d.HashKey); err != nil {
		return errAt("dataplane.hash_key", "%v", err)
	}

	ct := &c.Conntrack
	if ct.Capacity == 0 {
		ct.Capacity = DefaultCTCapacity
	}
	if ct.Capacity < 64 || ct.Capacity > 1<<27 {
		return errAt("conntrack.capacity", "%d is outside 64..134217728 entries per worker", ct.Capacity)
	}
	for _, f := range []struct {
		p   string
		v   *Duration
		def Duration
	}{
		{"conntrack.tcp_established", &ct.TCPEstablished, Duration{DefaultTCPEstablished}},
		{"conntrack.tcp_syn", &ct.TCPSyn, Duration{DefaultTCPSyn}},
		{"conntrack.tcp_closing", &ct.TCPClosing, Duration{DefaultTCPClosing}},
		{"conntrack.udp", &ct.UDP, Duration{DefaultUDP}},
	} {
		if f.v.Duration == 0 {
			*f.v = f.def
		}
		if f.v.Duration < 1e9 || f.v.Hours() > 24 {
			return errAt(f.p, "%v is outside 1s..24h", f.v.Duration)
		}
	}

	if err := c.finishControl(); err != nil {
		return err
	}
	if len(c.VIPs) == 0 {
		return errAt("vip", "no [[vip]] is configured")
	}
	vipKeys := map[string]int{}
	for i := range c.VIPs {
		if err := c.finishVIP(i, vipKeys); err != nil {
			return err
		}
	}
	// Every backend family needs a next hop: a static MAC, or a gateway
	// whose MAC the kernel resolves through the exception path.
	for i, v := range c.VIPs {
		for j, b := range v.Backends {
			gw, name := d.GatewayIPv4, "gateway_ipv4"
			if b.Address.Is6() {
				gw, name = d.GatewayIPv6, "gateway_ipv6"
			}
			if d.NextHopMAC.Set {
				continue
			}
			at := fmt.Sprintf("vip[%d].backend[%d].address", i, j)
			if !gw.IsValid() {
				return errAt(at, "no next hop toward backend %v: set dataplane.%s (resolved by the kernel) or dataplane.next_hop_mac", b.Address, name)
			}
			if !*d.Exception {
				return errAt("dataplane.exception", "is off, so dataplane.%s cannot be resolved: set dataplane.next_hop_mac", name)
			}
		}
	}
	return nil
}

func (c *Config) finishVIP(i int, seen map[string]int) error {
	v := &c.VIPs[i]
	at := fmt.Sprintf("vip[%d]", i)
	if !v.Address.IsValid() {
		return errAt(at+".address", "is required")
	}
	if v.Port < 0 || v.Port > 65535 {
		return errAt(at+".port", "%d is not a port (0 means every port)", v.Port)
	}
	if v.Protocol == "" {
		v.Protocol = "tcp"
	}
	if v.Protocol != "tcp" && v.Protocol != "udp" {
		return errAt(at+".protocol", "%q is not tcp or udp", v.Protocol)
	}
	key := v.Key()
	if v.Name == "" {
		v.Name = key
	}
	if j, dup := seen[key]; dup {
		return errAt(at+".address", "VIP %s is already configured by vip #%d", key, j+1)
	}
	seen[key] = i
	d := &c.Dataplane
	if v.Address.Addr == d.LBIPv4.Addr || v.Address.Addr == d.LBIPv6.Addr {
		return errAt(at+".address", "%v is the LB's own address; a VIP must be a separate address", v.Address)
	}
	if v.Encap == "" {
		v.Encap = d.Encap
	}
	if !encaps[v.Encap] {
		return errAt(at+".encap", "%q is not one of gre, ipip, gue", v.Encap)
	}
	if v.TableSize == 0 {
		v.TableSize = DefaultTableSize
	}
	if v.TableSize < 3 || !maglev.IsPrime(uint64(v.TableSize)) {
		return errAt(at+".table_size", "%d is not a prime: Maglev's permutation needs a prime table size (e.g. 65537, 655373)", v.TableSize)
	}
	if v.OnDown == "" {
		v.OnDown = "keep"
	}
	if v.OnDown != "keep" && v.OnDown != "move" {
		return errAt(at+".on_down", "%q is not keep or move", v.OnDown)
	}
	if v.Scheduler == "" {
		v.Scheduler = "maglev"
	}
	kind, err := sched.ParseKind(v.Scheduler)
	if err != nil {
		return errAt(at+".scheduler", "%q is not one of maglev, p2c, least-conn, peak-ewma, round-robin, random", v.Scheduler)
	}
	if v.Draws == 0 {
		v.Draws = sched.DefaultDraws
	}
	if v.Penalty.Duration == 0 {
		v.Penalty.Duration = sched.DefaultPenalty
	}
	if _, err := sched.New(kind, sched.Options{Draws: v.Draws, Penalty: v.Penalty.Duration}); err != nil && kind != sched.Maglev {
		return errAt(at+".draws", "%v", err)
	}
	if err := finishHealth(at+".health", &v.Health, &c.Health, v.Port); err != nil {
		return err
	}
	if len(v.Backends) == 0 {
		return errAt(at, "has no [[vip.backend]]")
	}
	if len(v.Backends) >= v.TableSize {
		return errAt(at+".table_size", "%d slots for %d backends: the table needs more slots than backends (100x for 1%% balance)", v.TableSize, len(v.Backends))
	}
	names := map[string]int{}
	addrs := map[netip.Addr]int{}
	live := 0
	for j := range v.Backends {
		b := &v.Backends[j]
		bat := fmt.Sprintf("%s.backend[%d]", at, j)
		if !b.Address.IsValid() {
			return errAt(bat+".address", "is required")
		}
		if b.Address.Is4() && !d.LBIPv4.IsValid() {
			return errAt(bat+".address", "backend %v is IPv4 but dataplane.lb_ipv4 is not set: no outer source address for an IPv4 tunnel", b.Address)
		}
		if b.Address.Is6() && !d.LBIPv6.IsValid() {
			return errAt(bat+".address", "backend %v is IPv6 but dataplane.lb_ipv6 is not set: no outer source address for an IPv6 tunnel", b.Address)
		}
		if k, dup := addrs[b.Address.Addr]; dup {
			return errAt(bat+".address", "backend %v is listed twice (also backend #%d)", b.Address, k+1)
		}
		addrs[b.Address.Addr] = j
		if b.Name == "" {
			b.Name = b.Address.String()
		}
		if k, dup := names[b.Name]; dup {
			return errAt(bat+".name", "name %q is already used by backend #%d", b.Name, k+1)
		}
		names[b.Name] = j
		if b.Weight == nil {
			w := 1
			b.Weight = &w
		}
		if *b.Weight < 0 || *b.Weight > 65535 {
			return errAt(bat+".weight", "backend %q: weight %d is outside 0..65535", b.Name, *b.Weight)
		}
		if *b.Weight > 0 {
			live++
		}
	}
	if live == 0 {
		return errAt(at, "every backend has weight 0: the VIP could not take a new flow")
	}
	return nil
}

// Control-plane defaults.
const (
	DefaultPanicThreshold = 0.5 // the chapter's section 5.4 and Envoy's healthy_panic_threshold
	DefaultSlowStartMin   = 0.1 // a ramping backend starts at 10% of its weight
	DefaultAdminListen    = "127.0.0.1:9180"
	DefaultAdminMaxConns  = 64
	// DefaultHealthFlapWindow: transitions within the last 20 checks
	// count toward flapping (a 2 s flap at a 200 ms interval is caught).
	DefaultHealthFlapWindow = 20
)

// Health-check defaults (HAProxy's inter 2s, rise 2, fall 3).
const (
	DefaultHealthInterval   = 2 * time.Second
	DefaultHealthTimeout    = time.Second
	DefaultHealthRise       = 2
	DefaultHealthFall       = 3
	DefaultHealthJitter     = 0.1
	DefaultHealthBackoff    = 10 * time.Second
	DefaultHealthBackoffMax = 5 * time.Minute
)

func (c *Config) finishControl() error {
	ct := &c.Control
	if ct.PanicThreshold == 0 {
		ct.PanicThreshold = DefaultPanicThreshold
	}
	if ct.PanicThreshold < 0 || ct.PanicThreshold > 1 {
		return errAt("control.panic_threshold", "%v is outside 0..1", ct.PanicThreshold)
	}
	if ct.SlowStart.Duration < 0 || ct.SlowStart.Hours() > 1 {
		return errAt("control.slow_start", "%v is outside 0..1h", ct.SlowStart.Duration)
	}
	if ct.SlowStartMin == 0 {
		ct.SlowStartMin = DefaultSlowStartMin
	}
	if ct.SlowStartMin <= 0 || ct.SlowStartMin > 1 {
		return errAt("control.slow_start_min", "%v is outside (0, 1]", ct.SlowStartMin)
	}
	if ct.DrainTimeout.Duration < 0 {
		return errAt("control.drain_timeout", "%v is negative", ct.DrainTimeout.Duration)
	}
	a := &c.Admin
	if a.Listen == "" {
		a.Listen = DefaultAdminListen
	}
	if a.MaxConns == 0 {
		a.MaxConns = DefaultAdminMaxConns
	}
	if a.MaxConns < 1 || a.MaxConns > MaxAdminConns {
		return errAt("admin.max_conns", "%d is outside 1..%d", a.MaxConns, MaxAdminConns)
	}
	if (a.TLSCert == "") != (a.TLSKey == "") {
		return errAt("admin.tls_cert", "tls_cert and tls_key go together")
	}
	if a.Token != "" && a.TokenFile != "" {
		return errAt("admin.token_file", "set token or token_file, not both")
	}
	if err := a.finishAdminToken(); err != nil {
		return err
	}
	if a.Listen != "off" && !strings.HasPrefix(a.Listen, "unix:") {
		if _, _, err := net.SplitHostPort(a.Listen); err != nil {
			return errAt("admin.listen", "%q is not host:port, unix:/path or off", a.Listen)
		}
		if !AdminListenLocal(a.Listen) && a.Secret() == "" {
			return errAt("admin.token", "is required (or token_file) when admin.listen (%s) is not loopback: every call from the network must be authenticated", a.Listen)
		}
	}
	return finishHealth("health", &c.Health, nil, 0)
}

// finishHealth fills h from def (the [health] defaults) and the built-in
// defaults, and validates it.
func finishHealth(at string, h, def *Health, vipPort int) error {
	if def != nil {
		if h.Kind == "" {
			h.Kind = def.Kind
		}
		if h.Port == 0 {
			h.Port = def.Port
		}
		if h.Path == "" {
			h.Path = def.Path
		}
		if h.Host == "" {
			h.Host = def.Host
		}
		if h.Expect == "" {
			h.Expect = def.Expect
		}
		for _, f := range []struct{ v, d *Duration }{{&h.Interval, &def.Interval}, {&h.Timeout, &def.Timeout}, {&h.Backoff, &def.Backoff}, {&h.BackoffMax, &def.BackoffMax}} {
			if f.v.Duration == 0 {
				*f.v = *f.d
			}
		}
		if h.Rise == 0 {
			h.Rise = def.Rise
		}
		if h.Fall == 0 {
			h.Fall = def.Fall
		}
		if h.Jitter == 0 {
			h.Jitter = def.Jitter
		}
		if h.FlapWindow == 0 {
			h.FlapWindow = def.FlapWindow
		}
		if h.Passive == "" {
			h.Passive = def.Passive
		}
		if h.PassiveWindow.Duration == 0 {
			h.PassiveWindow = def.PassiveWindow
		}
		if h.PassiveMin == 0 {
			h.PassiveMin = def.PassiveMin
		}
		if h.PassiveThreshold == 0 {
			h.PassiveThreshold = def.PassiveThreshold
		}
	}
	if h.Passive == "" {
		h.Passive = "on"
	}
	if h.Passive != "on" && h.Passive != "off" {
		return errAt(at+".passive", "%q is not on or off", h.Passive)
	}
	if h.PassiveWindow.Duration == 0 {
		h.PassiveWindow.Duration = 10 * time.Second
	}
	if h.PassiveMin == 0 {
		h.PassiveMin = 20
	}
	if h.PassiveThreshold == 0 {
		h.PassiveThreshold = 0.5
	}
	if h.PassiveWindow.Duration < 2*time.Second || h.PassiveWindow.Duration > 10*time.Minute {
		return errAt(at+".passive_window", "%v is outside 2s..10m", h.PassiveWindow.Duration)
	}
	if h.PassiveMin < 1 {
		return errAt(at+".passive_min", "%d is below 1", h.PassiveMin)
	}
	if h.PassiveThreshold <= 0 || h.PassiveThreshold > 1 {
		return errAt(at+".passive_threshold", "%v is outside (0, 1]", h.PassiveThreshold)
	}
	if h.Kind == "" {
		h.Kind = "none"
	}
	switch h.Kind {
	case "none", "tcp", "http", "https":
	default:
		return errAt(at+".kind", "%q is not one of none, tcp, http, https", h.Kind)
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if !strings.HasPrefix(h.Path, "/") {
		return errAt(at+".path", "%q must start with /", h.Path)
	}
	if h.Expect == "" {
		h.Expect = "200-399"
	}
	if h.Interval.Duration == 0 {
		h.Interval.Duration = DefaultHealthInterval
	}
	if h.Timeout.Duration == 0 {
		h.Timeout.Duration = DefaultHealthTimeout
	}
	if h.Rise == 0 {
		h.Rise = DefaultHealthRise
	}
	if h.Fall == 0 {
		h.Fall = DefaultHealthFall
	}
	if h.Jitter == 0 {
		h.Jitter = DefaultHealthJitter
	}
	if h.Backoff.Duration == 0 {
		h.Backoff.Duration = DefaultHealthBackoff
	}
	if h.FlapWindow == 0 {
		h.FlapWindow = DefaultHealthFlapWindow
	}
	if h.FlapWindow < 2 || h.FlapWindow > 1000 {
		return errAt(at+".flap_window", "%d is outside 2..1000 checks", h.FlapWindow)
	}
	if h.BackoffMax.Duration == 0 {
		h.BackoffMax.Duration = DefaultHealthBackoffMax
	}
	switch {
	case h.Port < 0 || h.Port > 65535:
		return errAt(at+".port", "%d is not a port", h.Port)
	case h.Kind != "none" && h.Port == 0 && vipPort == 0 && at != "health":
		return errAt(at+".port", "is required: the VIP serves every port, so the check needs one")
	case h.Interval.Duration < 10*time.Millisecond:
		return errAt(at+".interval", "%v is below 10ms", h.Interval.Duration)
	case h.Timeout.Duration <= 0 || h.Timeout.Duration >= h.Interval.Duration:
		return errAt(at+".timeout", "%v must be positive and shorter than the interval (%v)", h.Timeout.Duration, h.Interval.Duration)
	case h.Rise < 1 || h.Rise > 100:
		return errAt(at+".rise", "%d is outside 1..100", h.Rise)
	case h.Fall < 1 || h.Fall > 100:
		return errAt(at+".fall", "%d is outside 1..100", h.Fall)
	case h.Jitter < 0 || h.Jitter > 0.5:
		return errAt(at+".jitter", "%v is outside 0..0.5", h.Jitter)
	case h.BackoffMax.Duration < h.Backoff.Duration:
		return errAt(at+".flap_backoff_max", "%v is below flap_backoff %v", h.BackoffMax.Duration, h.Backoff.Duration)
	}
	return nil
}
