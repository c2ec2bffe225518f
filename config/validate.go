package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/BurntSushi/toml"

	"github.com/fulcrumlb/fulcrum/bgp"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/health"
	"github.com/fulcrumlb/fulcrum/maglev"
	"github.com/fulcrumlb/fulcrum/sched"
)

// fieldError is a validation error tied to a configuration path such as
// "vip[0].backend[2].weight"; the checker turns the path into a line.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return e.msg }

func errAt(path, format string, args ...any) error {
	return &fieldError{path: path, msg: path + ": " + fmt.Sprintf(format, args...)}
}

// checker fills defaults and collects every problem of a Config. It keeps
// going after a problem wherever the later checks do not depend on the bad
// value, so `fulcrum check` lists all there is to fix.
type checker struct {
	file string
	loc  *locator
	md   toml.MetaData
	errs Errors
	// healthDefaultsBad: [health] had a problem, which every VIP inherits
	// and which is reported once, at [health].
	healthDefaultsBad bool
	// enc is the encapsulator of a valid [dataplane]: it decides which
	// backend addresses can be tunnel endpoints, as it will at run time.
	enc *encap.Encapsulator
}

// bad records a problem of the key at path.
func (ck *checker) bad(path, format string, args ...any) {
	ck.add(errAt(path, format, args...))
}

// add records err: a *fieldError at its path's line, anything else at the
// first line.
func (ck *checker) add(err error) {
	var fe *fieldError
	if !errors.As(err, &fe) {
		ck.errs = append(ck.errs, &Problem{File: ck.file, Line: 1, Msg: err.Error()})
		return
	}
	ck.errs = append(ck.errs, &Problem{File: ck.file, Line: ck.line(fe.path), Key: fe.path, Msg: fe.msg})
}

// line is path's line, its table's when the key is absent, or 1 when the
// whole table is (so no problem is ever at line 0).
func (ck *checker) line(path string) int { return max(ck.loc.line(path), 1) }

// defined reports whether the file sets the key at path (no indices).
func (ck *checker) defined(path ...string) bool { return ck.md.IsDefined(path...) }

func boolPtr(b bool) *bool { return &b }

// finish fills defaults and validates c, recording every problem.
func (ck *checker) finish(c *Config) {
	ck.finishEAL(&c.EAL)
	dpOK := ck.finishDataplane(c)
	ck.finishConntrack(&c.Conntrack)
	ck.finishControl(&c.Control)
	if err := c.finishAdmin(); err != nil {
		ck.add(err)
	}
	ck.finishHealth("health", &c.Health, nil, 0)
	if c.BGP != nil {
		ck.finishBGP(c.BGP)
	}
	if len(c.VIPs) == 0 {
		ck.bad("vip", "no [[vip]] is configured")
	}
	keys := map[flow.VIPKey]int{} // VIP key -> index
	names := map[string]int{}     // VIP name -> index
	for i := range c.VIPs {
		ck.finishVIP(c, i, keys, names)
	}
	ck.checkSnapshotLimits(c)
	if !dpOK {
		return // the next-hop check needs a valid [dataplane]
	}
	// Every backend family needs a next hop: a static MAC, or a gateway
	// whose MAC the kernel resolves through the exception path.
	d := &c.Dataplane
	if d.NextHopMAC.Set {
		return
	}
	for i, v := range c.VIPs {
		for j, b := range v.Backends {
			gw, name := d.GatewayIPv4, "gateway_ipv4"
			if b.Address.Is6() {
				gw, name = d.GatewayIPv6, "gateway_ipv6"
			}
			if !b.Address.IsValid() {
				continue
			}
			if !gw.IsValid() {
				ck.bad(fmt.Sprintf("vip[%d].backend[%d].address", i, j), "no next hop toward backend %v: set dataplane.%s (resolved by the kernel) or dataplane.next_hop_mac", b.Address, name)
			} else if !*d.Exception {
				ck.bad("dataplane.exception", "is off, so dataplane.%s cannot be resolved: set dataplane.next_hop_mac", name)
				return
			}
		}
	}
}

// checkSnapshotLimits refuses more VIPs or backends than the dataplane's
// snapshot holds (conntrack.MaxVIPs, conntrack.MaxBackends), at the first
// one too many, which `fulcrum run` would otherwise refuse without a line.
func (ck *checker) checkSnapshotLimits(c *Config) {
	if len(c.VIPs) > conntrack.MaxVIPs {
		ck.bad(fmt.Sprintf("vip[%d]", conntrack.MaxVIPs), "is VIP #%d of %d: at most %d VIPs are supported", conntrack.MaxVIPs+1, len(c.VIPs), conntrack.MaxVIPs)
	}
	n := 0 // backends of all VIPs: each VIP's are its own ids
	for i, v := range c.VIPs {
		if n+len(v.Backends) > conntrack.MaxBackends {
			j := conntrack.MaxBackends - n
			ck.bad(fmt.Sprintf("vip[%d].backend[%d]", i, j), "is backend #%d of all VIPs: at most %d backends in all are supported", conntrack.MaxBackends+1, conntrack.MaxBackends)
			return
		}
		n += len(v.Backends)
	}
}

// filePrefixRE is what DPDK's --file-prefix may be here: a plain name. The
// prefix names a directory that shutdown removes (/run/dpdk/PREFIX), so
// "..", "." and anything with a '/' would remove something else.
var filePrefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func (ck *checker) finishEAL(e *EAL) {
	if e.MemoryMB == 0 {
		e.MemoryMB = DefaultMemoryMB
	}
	if e.MemoryMB < MinMemoryMB || e.MemoryMB > MaxMemoryMB {
		ck.bad("eal.memory_mb", "%d MiB is outside %d..%d", e.MemoryMB, MinMemoryMB, MaxMemoryMB)
	}
	if e.FilePrefix == "" {
		e.FilePrefix = DefaultFilePrefix
	}
	if !filePrefixRE.MatchString(e.FilePrefix) || e.FilePrefix == "." || e.FilePrefix == ".." || len(e.FilePrefix) > MaxFilePrefixLen {
		ck.bad("eal.file_prefix", "%q is not a plain name: letters, digits, '-', '_' and '.', not \".\" or \"..\", at most %d bytes", e.FilePrefix, MaxFilePrefixLen)
	}
	if e.MainLcore < 0 || e.MainLcore >= MaxLcores {
		ck.bad("eal.main_lcore", "%d is outside 0..%d (RTE_MAX_LCORE)", e.MainLcore, MaxLcores-1)
	}
	if len(e.WorkerLcores) == 0 {
		e.WorkerLcores = []int{e.MainLcore + 1}
	}
	seen := map[int]bool{e.MainLcore: true}
	for i, w := range e.WorkerLcores {
		switch {
		case w < 0 || w >= MaxLcores:
			ck.bad("eal.worker_lcores", "lcore %d (entry %d) is outside 0..%d (RTE_MAX_LCORE)", w, i, MaxLcores-1)
		case seen[w]:
			ck.bad("eal.worker_lcores", "lcore %d (entry %d) is used twice (the main lcore is %d)", w, i, e.MainLcore)
		}
		seen[w] = true
	}
	if e.LcoreMap == "" {
		return
	}
	mapped := map[int]bool{}
	for _, part := range strings.Split(e.LcoreMap, ",") {
		id, cpu, found := strings.Cut(part, "@")
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 || n >= MaxLcores {
			ck.bad("eal.lcore_map", "%q: %q is not LCORE or LCORE@CPU with LCORE in 0..%d", e.LcoreMap, part, MaxLcores-1)
			return
		}
		if found {
			if c, err := strconv.Atoi(cpu); err != nil || c < 0 {
				ck.bad("eal.lcore_map", "%q: %q is not LCORE@CPU", e.LcoreMap, part)
				return
			}
		}
		mapped[n] = true
	}
	for _, l := range append([]int{e.MainLcore}, e.WorkerLcores...) {
		if !mapped[l] {
			ck.bad("eal.lcore_map", "%q does not place lcore %d", e.LcoreMap, l)
		}
	}
}

// finishDataplane reports whether [dataplane] is valid; the encapsulation
// settings are checked by package encap, which owns them.
func (ck *checker) finishDataplane(c *Config) bool {
	n := len(ck.errs)
	d := &c.Dataplane
	if d.Port == "" {
		ck.bad("dataplane.port", "is required: the DPDK device name of the wire port (e.g. \"net_af_packet0\" or a PCI address)")
	}
	if d.Burst == 0 {
		d.Burst = conntrack.DefaultBurst
	}
	if d.Burst < 1 || d.Burst > conntrack.MaxBurst {
		ck.bad("dataplane.burst", "%d is outside 1..%d", d.Burst, conntrack.MaxBurst)
	}
	for _, f := range []struct {
		p   string
		v   *int
		def int
	}{{"dataplane.rx_desc", &d.RxDesc, DefaultRxDesc}, {"dataplane.tx_desc", &d.TxDesc, DefaultTxDesc}, {"dataplane.mempool_size", &d.MempoolSize, DefaultMempoolSize}} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < MinDesc || *f.v > MaxDesc {
			ck.bad(f.p, "%d is outside %d..%d", *f.v, MinDesc, MaxDesc)
		}
	}
	if d.IdleBackoff == nil {
		d.IdleBackoff = boolPtr(true)
	}
	if d.IdleMaxSleep.Duration == 0 {
		d.IdleMaxSleep.Duration = DefaultIdleMaxSleep
	}
	if d.IdleMaxSleep.Duration < 0 || d.IdleMaxSleep.Duration > MaxIdleMaxSleep {
		ck.bad("dataplane.idle_max_sleep", "%v is outside 0..%v", d.IdleMaxSleep.Duration, MaxIdleMaxSleep)
	}
	if d.Exception == nil {
		d.Exception = boolPtr(true)
	}
	if d.ExceptionIf == "" {
		d.ExceptionIf = DefaultExceptionName
	}
	if len(d.ExceptionIf) > MaxIfaceNameLen || strings.ContainsFunc(d.ExceptionIf, badNameRune) {
		ck.bad("dataplane.exception_iface", "%q is not an interface name of at most %d characters (Linux IFNAMSIZ)", d.ExceptionIf, MaxIfaceNameLen)
	}
	if !d.LBIPv4.IsValid() && !d.LBIPv6.IsValid() {
		ck.bad("dataplane", "needs lb_ipv4 or lb_ipv6: the LB's own address, used as the tunnels' outer source")
	}
	for _, a := range []struct {
		p  string
		v  Addr
		v4 bool
	}{{"dataplane.lb_ipv4", d.LBIPv4, true}, {"dataplane.lb_ipv6", d.LBIPv6, false}, {"dataplane.gateway_ipv4", d.GatewayIPv4, true}, {"dataplane.gateway_ipv6", d.GatewayIPv6, false}} {
		if a.v.IsValid() && a.v.Is4() != a.v4 {
			ck.bad(a.p, "%v is not an IPv%d address", a.v, map[bool]int{true: 4, false: 6}[a.v4])
		}
	}
	if d.LBPrefix4 == 0 {
		d.LBPrefix4 = DefaultLBPrefix4
	}
	if d.LBPrefix6 == 0 {
		d.LBPrefix6 = DefaultLBPrefix6
	}
	if d.LBPrefix4 < 1 || d.LBPrefix4 > 32 {
		ck.bad("dataplane.lb_ipv4_prefix", "%d is outside 1..32", d.LBPrefix4)
	}
	if d.LBPrefix6 < 1 || d.LBPrefix6 > 128 {
		ck.bad("dataplane.lb_ipv6_prefix", "%d is outside 1..128", d.LBPrefix6)
	}
	if d.HashKey == "" {
		ck.bad("dataplane.hash_key", "is required: 32 hex digits, the same on every instance of the fleet (e.g. from `openssl rand -hex 16`)")
	} else if _, err := flow.ParseKey(d.HashKey); err != nil {
		ck.bad("dataplane.hash_key", "%v", err)
	}

	// Encapsulation: package encap's names, defaults and limits.
	if d.Encap == "" {
		d.Encap = encap.GRE.String() // encap's zero Kind
	}
	if _, err := encap.ParseKind(d.Encap); err != nil {
		ck.bad("dataplane.encap", "%v", err)
	}
	if d.DF == "" {
		d.DF = encap.DFInherit.String() // encap's zero DF
	}
	df, err := encap.ParseDF(d.DF)
	if err != nil {
		ck.bad("dataplane.df", "%v", err)
	}
	if d.MTU == 0 {
		d.MTU = encap.DefaultMTU
	}
	if d.MTU < encap.MinMTU || d.MTU > encap.MaxMTU {
		ck.bad("dataplane.mtu", "%d is outside %d..%d", d.MTU, encap.MinMTU, encap.MaxMTU)
	}
	if d.TTL == 0 {
		d.TTL = encap.DefaultTTL
	}
	if d.TTL < 1 || d.TTL > 255 {
		ck.bad("dataplane.ttl", "%d is outside 1..255", d.TTL)
	}
	if d.GUEPort == 0 {
		d.GUEPort = encap.DefaultGUEPort
	}
	if d.GUEPort < 1 || d.GUEPort > 65535 {
		ck.bad("dataplane.gue_port", "%d is not a UDP port", d.GUEPort)
	}
	if len(ck.errs) > n {
		return false
	}
	// Whatever else encap.New refuses (a multicast lb_ipv4, ...) the
	// dataplane would refuse at start: refuse it here.
	enc, err := encap.New(c.EncapConfig(df))
	if err != nil {
		ck.bad("dataplane", "%v", err)
		return false
	}
	ck.enc = enc
	return true
}

// EncapConfig is the encapsulator's configuration of [dataplane], with df
// as encap.ParseDF read dataplane.df.
func (c *Config) EncapConfig(df encap.DF) encap.Config {
	d := &c.Dataplane
	return encap.Config{SrcV4: d.LBIPv4.Addr, SrcV6: d.LBIPv6.Addr, TTL: uint8(d.TTL), DF: df, MTU: d.MTU, GUEPort: uint16(d.GUEPort)}
}

// finishConntrack fills conntrack's defaults and has package conntrack
// check each value, one key at a time so the error names its key.
func (ck *checker) finishConntrack(ct *Conntrack) {
	def := conntrack.DefaultConfig()
	if ct.Capacity == 0 {
		ct.Capacity = def.Capacity
	}
	probe := def
	probe.Capacity = ct.Capacity
	if err := probe.Validate(); err != nil {
		ck.bad("conntrack.capacity", "%v", err)
	}
	for _, f := range []struct {
		p   string
		v   *Duration
		def time.Duration
		set func(*conntrack.Config, time.Duration)
	}{
		{"conntrack.tcp_established", &ct.TCPEstablished, def.TCPEstablishedTimeout, func(c *conntrack.Config, d time.Duration) { c.TCPEstablishedTimeout = d }},
		{"conntrack.tcp_syn", &ct.TCPSyn, def.TCPNewTimeout, func(c *conntrack.Config, d time.Duration) { c.TCPNewTimeout = d }},
		{"conntrack.tcp_closing", &ct.TCPClosing, def.TCPClosingTimeout, func(c *conntrack.Config, d time.Duration) { c.TCPClosingTimeout = d }},
		{"conntrack.udp", &ct.UDP, def.OtherTimeout, func(c *conntrack.Config, d time.Duration) { c.OtherTimeout = d }},
	} {
		if f.v.Duration == 0 {
			f.v.Duration = f.def
		}
		probe := def
		f.set(&probe, f.v.Duration)
		if err := probe.Validate(); err != nil {
			ck.bad(f.p, "%v", err)
		}
	}
}

// unit reports whether x is a finite number in [lo, hi] (NaN is not).
func unit(x, lo, hi float64) bool { return x >= lo && x <= hi && !math.IsInf(x, 0) }

func (ck *checker) finishControl(ct *Control) {
	// 0 disables panic mode, so the default applies only when the key is
	// absent.
	if !ck.defined("control", "panic_threshold") {
		ct.PanicThreshold = DefaultPanicThreshold
	}
	if !unit(ct.PanicThreshold, 0, 1) {
		ck.bad("control.panic_threshold", "%v is outside 0..1 (0: no panic mode)", ct.PanicThreshold)
	}
	if ct.SlowStart.Duration < 0 || ct.SlowStart.Duration > MaxSlowStart {
		ck.bad("control.slow_start", "%v is outside 0..%v (0: off)", ct.SlowStart.Duration, MaxSlowStart)
	}
	if ct.SlowStartMin == 0 {
		ct.SlowStartMin = DefaultSlowStartMin
	}
	if !unit(ct.SlowStartMin, 0, 1) || ct.SlowStartMin == 0 {
		ck.bad("control.slow_start_min", "%v is outside (0, 1]", ct.SlowStartMin)
	}
	if ct.DrainTimeout.Duration < 0 || ct.DrainTimeout.Duration > MaxDrainTimeout {
		ck.bad("control.drain_timeout", "%v is outside 0..%v (0: drained flows stay until they end)", ct.DrainTimeout.Duration, MaxDrainTimeout)
	}
}

// finishAdmin fills and checks [admin], stopping at its first problem.
func (c *Config) finishAdmin() error {
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
	return nil
}

// finishBGP fills the [bgp] defaults and has package bgp check it; each of
// its problems is reported at its key's line.
func (ck *checker) finishBGP(b *bgp.Config) {
	*b = b.WithDefaults()
	err := b.Validate()
	if err == nil {
		return
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var fe *bgp.FieldError
		if errors.As(e, &fe) {
			ck.add(&fieldError{path: "bgp." + fe.Key, msg: "bgp." + fe.Key + ": " + fe.Msg})
			continue
		}
		ck.bad("bgp", "%v", e)
	}
}

// badNameRune reports runes a name may not hold: '/' (it is a path
// segment of the admin API), spaces and control characters.
func badNameRune(r rune) bool {
	return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
}

// checkName checks an operator-given VIP or backend name.
func checkName(s string) error {
	if len(s) < 1 || len(s) > MaxNameLen || strings.ContainsFunc(s, badNameRune) {
		return fmt.Errorf("%q is not a name: 1..%d bytes, no '/', spaces or control characters (it is a path segment of the admin API)", s, MaxNameLen)
	}
	return nil
}

func (ck *checker) finishVIP(c *Config, i int, keys map[flow.VIPKey]int, names map[string]int) {
	v := &c.VIPs[i]
	at := fmt.Sprintf("vip[%d]", i)
	d := &c.Dataplane
	addrOK := true
	if !v.Address.IsValid() {
		ck.bad(at+".address", "is required")
		addrOK = false
	}
	if v.Port < 0 || v.Port > 65535 {
		ck.bad(at+".port", "%d is not a port (0 means every port)", v.Port)
	}
	if v.Protocol == "" {
		v.Protocol = "tcp"
	}
	if v.Protocol != "tcp" && v.Protocol != "udp" {
		ck.bad(at+".protocol", "%q is not tcp or udp", v.Protocol)
	}
	key := v.Key()
	if addrOK {
		if j, dup := keys[key]; dup {
			ck.bad(at+".address", "VIP %s at line %d is already configured at line %d (vip #%d)", key, ck.line(at+".address"), ck.line(fmt.Sprintf("vip[%d].address", j)), j+1)
		}
		keys[key] = i
		if v.Address.Addr == d.LBIPv4.Addr || v.Address.Addr == d.LBIPv6.Addr {
			ck.bad(at+".address", "%v is the LB's own address; a VIP must be a separate address", v.Address)
		}
	}
	// The default name is the VIP's key; it has a '/', and the admin API
	// resolves it by key (the effective config writes it back, so it is
	// accepted as written). Any other name must be a plain path segment.
	// A name that is the key repeats only with the key, reported above.
	if v.Name == "" || v.Name == key.String() {
		v.Name = key.String()
	} else if err := checkName(v.Name); err != nil {
		ck.bad(at+".name", "%v", err)
	} else if j, dup := names[v.Name]; dup {
		ck.bad(at+".name", "vip name %q at line %d is already used at line %d", v.Name, ck.line(at+".name"), ck.line(fmt.Sprintf("vip[%d].name", j)))
	}
	names[v.Name] = i
	if v.Encap == "" {
		v.Encap = d.Encap
	}
	if _, err := encap.ParseKind(v.Encap); err != nil && v.Encap != d.Encap {
		ck.bad(at+".encap", "%v", err) // a bad dataplane.encap is reported there
	}
	if v.TableSize == 0 {
		v.TableSize = maglev.DefaultSize
	}
	if v.TableSize < 3 || v.TableSize > maglev.MaxSize || !maglev.IsPrime(uint64(v.TableSize)) {
		ck.bad(at+".table_size", "%d is not a prime in 3..%d: Maglev's permutation needs a prime table size (e.g. 65537, 655373)", v.TableSize, maglev.MaxSize)
	}
	if v.OnDown == "" {
		v.OnDown = "keep"
	}
	if v.OnDown != "keep" && v.OnDown != "move" {
		ck.bad(at+".on_down", "%q is not keep or move", v.OnDown)
	}
	if v.Scheduler == "" {
		v.Scheduler = sched.Maglev.String()
	}
	if v.Draws == 0 {
		v.Draws = sched.DefaultDraws
	}
	if v.Penalty.Duration == 0 {
		v.Penalty.Duration = sched.DefaultPenalty
	}
	if kind, err := sched.ParseKind(v.Scheduler); err != nil {
		ck.bad(at+".scheduler", "%v", err)
	} else if _, err := sched.New(kind, sched.Options{Draws: v.Draws, Penalty: v.Penalty.Duration}); err != nil && !errors.Is(err, sched.ErrNotPicker) {
		p := at + ".draws"
		if errors.Is(err, sched.ErrPenalty) {
			p = at + ".ewma_penalty"
		}
		ck.bad(p, "%v", err)
	}
	ck.finishHealth(at+".health", &v.Health, &c.Health, v.Port)
	if len(v.Backends) == 0 {
		ck.bad(at, "has no [[vip.backend]]")
		return
	}
	if len(v.Backends) >= v.TableSize {
		ck.bad(at+".table_size", "%d slots for %d backends: the table needs more slots than backends (100x for 1%% balance)", v.TableSize, len(v.Backends))
	}
	bnames := map[string]int{}
	addrs := map[netip.Addr]int{}
	live, badWeight := 0, false
	for j := range v.Backends {
		b := &v.Backends[j]
		bat := fmt.Sprintf("%s.backend[%d]", at, j)
		addrDup := false
		switch {
		case !b.Address.IsValid():
			ck.bad(bat+".address", "is required")
		case b.Address.Is4() && !d.LBIPv4.IsValid():
			ck.bad(bat+".address", "backend %v is IPv4 but dataplane.lb_ipv4 is not set: no outer source address for an IPv4 tunnel", b.Address)
		case b.Address.Is6() && !d.LBIPv6.IsValid():
			ck.bad(bat+".address", "backend %v is IPv6 but dataplane.lb_ipv6 is not set: no outer source address for an IPv6 tunnel", b.Address)
		default:
			if ck.enc != nil {
				if _, err := ck.enc.Backend(b.Address.Addr); err != nil {
					ck.bad(bat+".address", "%v", err)
				}
			}
			if k, dup := addrs[b.Address.Addr]; dup {
				addrDup = true
				ck.bad(bat+".address", "backend %v is listed twice (also backend #%d, line %d)", b.Address, k+1, ck.line(fmt.Sprintf("%s.backend[%d].address", at, k)))
			}
			addrs[b.Address.Addr] = j
		}
		defaulted := b.Name == ""
		if defaulted {
			b.Name = b.Address.String()
		} else if err := checkName(b.Name); err != nil {
			ck.bad(bat+".name", "%v", err)
		}
		// A defaulted name (the address) repeats only with the address,
		// reported above.
		if k, dup := bnames[b.Name]; dup && !(defaulted && addrDup) {
			ck.bad(bat+".name", "name %q is already used by backend #%d (line %d)", b.Name, k+1, ck.line(fmt.Sprintf("%s.backend[%d]", at, k)))
		}
		bnames[b.Name] = j
		if b.Weight == nil {
			w := 1
			b.Weight = &w
		}
		if *b.Weight < 0 || *b.Weight > MaxWeight {
			ck.bad(bat+".weight", "backend %q: weight %d is outside 0..%d", b.Name, *b.Weight, MaxWeight)
			badWeight = true
		}
		if *b.Weight > 0 {
			live++
		}
	}
	if live == 0 && !badWeight {
		ck.bad(at, "every backend has weight 0: the VIP could not take a new flow")
	}
}

// CheckConfig is the active check a [vip.health] (defaults filled in)
// asks for, in package health's terms. For kind "none" it is an http
// check of the same values, so that they are validated all the same.
func (h *Health) CheckConfig() health.Config {
	c := health.DefaultConfig()
	c.Kind = h.Kind
	if c.Kind == HealthNone {
		c.Kind = health.KindHTTP
	}
	c.Port = h.Port
	c.Path = h.Path
	c.Host = h.Host
	c.ExpectStatus = h.Expect
	c.Interval = h.Interval.Duration
	c.Timeout = h.Timeout.Duration
	c.Rise = h.Rise
	c.Fall = h.Fall
	c.Jitter = h.Jitter
	c.BackoffBase = h.Backoff.Duration
	c.BackoffMax = h.BackoffMax.Duration
	c.FlapWindow = h.FlapWindow // in checks, as health counts it
	return c
}

// healthKeys maps package health's field names to this file's keys where
// they differ.
var healthKeys = map[string]string{"expect_status": "expect", "backoff_base": "flap_backoff", "backoff_max": "flap_backoff_max"}

// finishHealth fills h from def (the [health] defaults) and then package
// health's defaults, and has package health validate the check. The
// passive checks and the flap window are config's own.
func (ck *checker) finishHealth(at string, h, def *Health, vipPort int) {
	if def != nil {
		inherit(&h.Kind, def.Kind)
		inherit(&h.Port, def.Port)
		inherit(&h.Path, def.Path)
		inherit(&h.Host, def.Host)
		inherit(&h.Expect, def.Expect)
		inherit(&h.Interval, def.Interval)
		inherit(&h.Timeout, def.Timeout)
		inherit(&h.Backoff, def.Backoff)
		inherit(&h.BackoffMax, def.BackoffMax)
		inherit(&h.Rise, def.Rise)
		inherit(&h.Fall, def.Fall)
		inherit(&h.Jitter, def.Jitter)
		inherit(&h.FlapWindow, def.FlapWindow)
		inherit(&h.Passive, def.Passive)
		inherit(&h.PassiveWindow, def.PassiveWindow)
		inherit(&h.PassiveMin, def.PassiveMin)
		inherit(&h.PassiveThreshold, def.PassiveThreshold)
	}
	hd := health.DefaultConfig()
	inherit(&h.Kind, HealthNone)
	inherit(&h.Path, hd.Path)
	inherit(&h.Expect, hd.ExpectStatus)
	inherit(&h.Interval, Duration{hd.Interval})
	inherit(&h.Timeout, Duration{hd.Timeout})
	inherit(&h.Rise, hd.Rise)
	inherit(&h.Fall, hd.Fall)
	inherit(&h.Jitter, hd.Jitter)
	inherit(&h.Backoff, Duration{hd.BackoffBase})
	inherit(&h.BackoffMax, Duration{hd.BackoffMax})
	inherit(&h.FlapWindow, DefaultHealthFlapWindow)
	inherit(&h.Passive, "on")
	inherit(&h.PassiveWindow, Duration{DefaultPassiveWindow})
	inherit(&h.PassiveMin, DefaultPassiveMin)
	inherit(&h.PassiveThreshold, DefaultPassiveThreshold)

	// A VIP inherits the [health] defaults; when they are bad, that is
	// reported at [health], and the VIP reports only its own keys.
	n := len(ck.errs)
	bad := func(path, format string, args ...any) {
		if def != nil && ck.healthDefaultsBad && !ck.loc.has(path) {
			return
		}
		ck.bad(path, format, args...)
	}
	if h.Kind != HealthNone && h.Port == 0 && vipPort == 0 && def != nil {
		bad(at+".port", "is required: the VIP serves every port, so the check needs one")
	}
	if err := h.CheckConfig().Validate(); err != nil {
		var ce *health.ConfigError
		switch {
		case !errors.As(err, &ce):
			bad(at, "%v", err)
		case ce.Field == "kind":
			bad(at+".kind", "%s, or %s", ce.Msg, HealthNone)
		default:
			k := ce.Field
			if m, ok := healthKeys[k]; ok {
				k = m
			}
			bad(at+"."+k, "%s", ce.Msg)
		}
	}
	if h.FlapWindow < MinHealthFlapWindow || h.FlapWindow > MaxHealthFlapWindow {
		bad(at+".flap_window", "%d is outside %d..%d checks", h.FlapWindow, MinHealthFlapWindow, MaxHealthFlapWindow)
	}
	if h.Passive != "on" && h.Passive != "off" {
		bad(at+".passive", "%q is not on or off", h.Passive)
	}
	if w := h.PassiveWindow.Duration; w < MinPassiveWindow || w > MaxPassiveWindow {
		bad(at+".passive_window", "%v is outside %v..%v", w, MinPassiveWindow, MaxPassiveWindow)
	}
	if h.PassiveMin < 1 || h.PassiveMin > MaxPassiveMin {
		bad(at+".passive_min", "%d is outside 1..%d", h.PassiveMin, MaxPassiveMin)
	}
	if !unit(h.PassiveThreshold, 0, 1) || h.PassiveThreshold == 0 {
		bad(at+".passive_threshold", "%v is outside (0, 1]", h.PassiveThreshold)
	}
	if def == nil && len(ck.errs) > n {
		ck.healthDefaultsBad = true
	}
}

// inherit sets *v to def when *v is the zero value (the key was absent).
func inherit[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
