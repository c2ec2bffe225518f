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
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	"golang.org/x/text/unicode/norm"

	"github.com/fulcrumlb/fulcrum/bgp"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/health"
	"github.com/fulcrumlb/fulcrum/maglev"
	"github.com/fulcrumlb/fulcrum/punt"
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
	data []byte         // the file, for setAt
	raw  map[string]any // the file decoded into maps; see setAt
	errs Errors
	// puntHealthSet: [dataplane.punt] health was written (not 0): a rate
	// the checks need more than is refused, where a default is raised
	// (checkPuntHealth).
	puntHealthSet bool
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

// setAt reports whether the file sets the key at the indexed path
// ("vip[1].health.jitter"), however it is written (under a table header,
// as a dotted key, in an inline table). A path without indices is the
// TOML metadata's answer (defined); MetaData cannot look into an array of
// tables, so for one with indices the file is decoded once more, into
// maps, on first use.
func (ck *checker) setAt(path string) bool {
	parts := strings.Split(path, ".")
	if !strings.Contains(path, "[") {
		return ck.defined(parts...)
	}
	if ck.raw == nil {
		ck.raw = map[string]any{}
		if _, err := toml.Decode(string(ck.data), &ck.raw); err != nil {
			return false // cannot happen: the same text decoded before
		}
	}
	var v any = ck.raw
	for _, part := range parts {
		name, idx, indexed := strings.Cut(part, "[")
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[name]; !ok {
			return false
		}
		if !indexed {
			continue
		}
		i, err := strconv.Atoi(strings.TrimSuffix(idx, "]"))
		if err != nil || i < 0 {
			return false
		}
		switch a := v.(type) {
		case []map[string]any: // [[array]] of tables
			if i >= len(a) {
				return false
			}
			v = a[i]
		case []any: // an inline array of tables
			if i >= len(a) {
				return false
			}
			v = a[i]
		default:
			return false
		}
	}
	return true
}

func boolPtr(b bool) *bool { return &b }

// finish fills defaults and validates c, recording every problem.
func (ck *checker) finish(c *Config) {
	ck.finishEAL(&c.EAL)
	dpOK := ck.finishDataplane(c)
	ck.finishConntrack(&c.Conntrack)
	ck.checkMemory(c)
	ck.finishControl(&c.Control)
	if err := c.finishAdmin(); err != nil {
		ck.add(err)
	}
	ck.finishHealth("health", &c.Health, nil, 0)
	if c.BGP != nil {
		ck.finishBGP(c)
	}
	if len(c.VIPs) == 0 {
		ck.bad("vip", "no [[vip]] is configured")
	}
	keys := map[flow.VIPKey]int{} // VIP key -> index
	names := map[string]int{}     // VIP name -> index
	for i := range c.VIPs {
		ck.finishVIP(c, i, keys, names)
	}
	ck.checkLoops(c)
	ck.checkSnapshotLimits(c)
	ck.checkPuntHealth(c)
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

// checkPuntHealth sizes [dataplane.punt] health by the checks: the
// packets a second their answers bring to the LB (health.AnswersPerCheck
// for every checked backend, at its interval), twice over, since all may
// reach one lcore, and enough for a whole round of checks that start
// together (within jitter × interval). Left out (or 0), the rate is raised to that when the
// default is less; written lower, it is refused: the checks' own answers
// would be dropped over the budget and healthy backends called down.
func (ck *checker) checkPuntHealth(c *Config) {
	p := &c.Dataplane.Punt
	if p.Health < 0 || p.Health > punt.MaxRate {
		return // refused at its key already
	}
	need, round, window := 0.0, 0.0, math.Inf(1)
	shared := map[health.Target]bool{} // the checks that run once for several VIPs (health.ShareKey)
	for _, v := range c.VIPs {
		if h := v.Health; h.Kind != HealthNone && h.Interval > 0 {
			checks := 0
			for _, b := range v.Backends {
				if h.Tunnelled() {
					checks++ // from a source port of its own: never shared
					continue
				}
				k := health.ShareKey(health.Target{Addr: netip.AddrPortFrom(b.Address.Addr, uint16(v.Port)), Config: h.Config})
				if !shared[k] {
					shared[k] = true
					checks++
				}
			}
			answers := float64(checks * health.AnswersPerCheck(h.Kind))
			need += answers / h.Interval.Seconds()
			// A configuration's first checks all start within
			// jitter×interval (every round, with jitter 0): the
			// budget's burst (a tenth of a second's worth) and its
			// refill over that window must hold a whole round (a
			// quarter more: random starts bunch).
			round += answers
			window = min(window, h.Jitter*h.Interval.Seconds())
		}
	}
	want := math.Ceil(max(2*need, 1.25*round/(0.1+window)))
	// Over the most a budget may be, the budget is that most, and the
	// checks' answers beyond it are dropped: Load warns (puntWarnings).
	// Not refused, since such a configuration ran before the warning was
	// added.
	c.puntNeed = want
	n := min(int(want), punt.MaxRate)
	switch {
	case n <= p.Health:
	case !ck.puntHealthSet:
		p.Health = n
	default:
		ck.bad("dataplane.punt.health", "%d is below the %d packets a second the configured health checks' answers need (twice their packets at every checked backend's interval, as all may reach one lcore, and a whole round of checks starting within jitter × interval): they would be dropped and healthy backends called down; raise it, or leave it out to have it sized", p.Health, n)
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
	// Maglev tables over all VIPs: each slot 2 bytes, each table built
	// twice by a reload (the dry run, then the snapshot) beside the one in
	// force; 4096 VIPs at the largest table_size were 41 GB and minutes of
	// building, found by running out of memory. As many slots as the most
	// VIPs at the default size (512 MiB, a few seconds to build).
	slots := 0
	for i, v := range c.VIPs[:min(len(c.VIPs), conntrack.MaxVIPs)] { // more VIPs is a problem of its own, above
		size := v.TableSize
		if size == 0 {
			size = maglev.DefaultSize
		}
		if slots += size; slots > MaxTableSlots {
			ck.bad(fmt.Sprintf("vip[%d].table_size", i), "brings the Maglev tables of all VIPs to %d slots: at most %d in all (%d VIPs at the default %d); use smaller tables", slots, MaxTableSlots, conntrack.MaxVIPs, maglev.DefaultSize)
			break
		}
	}
	// Checks through the tunnel: one source port each
	// (health.TunnelSlots of them), over all VIPs.
	n = 0
	for i, v := range c.VIPs {
		if v.Health.Kind == HealthNone || !v.Health.Tunnelled() {
			continue
		}
		if n+len(v.Backends) > health.TunnelSlots {
			j := health.TunnelSlots - n
			ck.bad(fmt.Sprintf("vip[%d].backend[%d]", i, j), `is backend #%d checked through the tunnel (health.through = "tunnel"): at most %d are supported, one check port each (%d-%d)`,
				health.TunnelSlots+1, health.TunnelSlots, health.TunnelPortBase, health.TunnelPortBase+health.TunnelSlots-1)
			return
		}
		n += len(v.Backends)
	}
}

// filePrefixRE is what DPDK's --file-prefix may be here: a plain name. The
// prefix names a directory that shutdown removes (/run/dpdk/PREFIX), so
// "..", "." and anything with a '/' would remove something else.
var filePrefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// ealLongOptions are the long options of DPDK's EAL (22.11's usage, and
// three that older releases took). DPDK parses with getopt_long, which
// takes any unambiguous prefix of one: --file-pre=.. is --file-prefix=..
var ealLongOptions = []string{
	"--allow", "--base-virtaddr", "--block", "--create-uio-dev", "--file-prefix",
	"--force-max-simd-bitwidth", "--help", "--huge-dir", "--huge-unlink",
	"--huge-worker-stack", "--in-memory", "--iova-mode", "--lcores", "--legacy-mem",
	"--log-level", "--main-lcore", "--master-lcore", "--match-allocations",
	"--mbuf-pool-ops-name", "--no-hpet", "--no-huge", "--no-pci", "--no-shconf",
	"--no-telemetry", "--pci-blacklist", "--pci-whitelist", "--proc-type",
	"--single-file-segments", "--socket-limit", "--socket-mem", "--syslog",
	"--telemetry", "--trace", "--trace-bufsz", "--trace-dir", "--trace-mode",
	"--vdev", "--vfio-intr", "--vfio-vf-token", "--vmware-tsc-map",
}

// ealLongOption names the EAL long option that the argument a sets, as
// getopt_long reads it: the option itself, or the options it abbreviates
// when it abbreviates more than one (getopt_long refuses it then). It
// returns nil for a short option, an operand or an unknown option.
func ealLongOption(a string) []string {
	name, _, _ := strings.Cut(a, "=")
	if len(name) <= 2 || !strings.HasPrefix(name, "--") {
		return nil
	}
	var matches []string
	for _, full := range ealLongOptions {
		if full == name {
			return []string{full}
		}
		if strings.HasPrefix(full, name) {
			matches = append(matches, full)
		}
	}
	return matches
}

// ealOwnedLong are the long options that EALArgs writes from the [eal]
// section's keys (the value names them): in extra_args, appended after
// them, one would override the checked value (a --file-prefix of "..",
// which eal.file_prefix refuses, names the directory shutdown removes).
var ealOwnedLong = map[string]string{
	"--file-prefix": "file_prefix", "--lcores": "worker_lcores, main_lcore or lcore_map",
	"--main-lcore": "main_lcore", "--master-lcore": "main_lcore", "--no-huge": "hugepages",
	"--no-pci": "pci", "--allow": "pci", "--pci-whitelist": "pci", "--vdev": "vdevs",
}

// ealOwnedShort are the short options EALArgs writes, likewise.
var ealOwnedShort = map[byte]string{'l': "worker_lcores or lcore_map", 'c': "worker_lcores", 'm': "memory_mb", 'a': "pci", 'w': "pci"}

// ealArgProblem says why extra_args may not hold args[i] (and the value
// after it, for an option given as two arguments), or "" when it may.
func ealArgProblem(args []string, i int) string {
	a := args[i]
	if c, ok := clusterOption(a); ok {
		switch k, owned := ealOwnedShort[c]; {
		case owned:
			return fmt.Sprintf("sets -%c, which the [eal] section sets itself (%s): set it there (DPDK takes the last of two, so -%c would override the checked value)", c, k, c)
		case c == 'h':
			return "asks DPDK for its usage: rte_eal_init would print it and exit 0, and the daemon would never forward"
		}
		return ""
	}
	opts := ealLongOption(a)
	if len(opts) > 1 {
		// Refused by DPDK too, but only once the daemon starts.
		return fmt.Sprintf("abbreviates several EAL options (%s): DPDK would refuse it at start; write the option in full", strings.Join(opts, ", "))
	}
	if len(opts) == 0 {
		return ""
	}
	opt := opts[0]
	if k, owned := ealOwnedLong[opt]; owned {
		return fmt.Sprintf("sets %s, which the [eal] section sets itself (%s): set it there (DPDK takes the last of two, so %s would override the checked value)", opt, k, opt)
	}
	switch opt {
	case "--help":
		return "asks DPDK for its usage: rte_eal_init would print it and exit 0, and the daemon would never forward"
	case "--in-memory", "--no-shconf":
		return fmt.Sprintf("sets %s: Fulcrum needs DPDK's runtime directory, whose lock keeps a second daemon off the same file_prefix (and its NIC) and through which dpdk-dumpcap attaches; leave %s out", opt, opt)
	case "--proc-type":
		_, v, inline := strings.Cut(a, "=")
		if !inline && i+1 < len(args) {
			v = args[i+1]
		}
		if !strings.EqualFold(v, "primary") { // DPDK reads it without case
			return fmt.Sprintf("sets --proc-type %s: Fulcrum runs only as DPDK's primary process (as a secondary, beside a running daemon of the same file_prefix, it would attach to that one's memory, and its exit would remove that one's runtime directory); leave --proc-type out", v)
		}
	}
	return ""
}

// clusterOption is the first short option of the EAL argument a that is
// not -v: getopt takes clustered short options, and -v takes no argument,
// so "-vm512" is -v then -m 512.
func clusterOption(a string) (byte, bool) {
	if len(a) < 2 || a[0] != '-' || a[1] == '-' {
		return 0, false
	}
	for i := 1; i < len(a); i++ {
		if a[i] != 'v' {
			return a[i], true
		}
	}
	return 0, false
}

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
	for i, a := range e.ExtraArgs {
		if why := ealArgProblem(e.ExtraArgs, i); why != "" {
			ck.bad("eal.extra_args", "entry %d (%q) %s", i, a, why)
		}
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
		p        string
		v        *int
		def, max int
	}{{"dataplane.rx_desc", &d.RxDesc, DefaultRxDesc, MaxRingDesc}, {"dataplane.tx_desc", &d.TxDesc, DefaultTxDesc, MaxRingDesc}, {"dataplane.mempool_size", &d.MempoolSize, DefaultMempoolSize, MaxDesc}} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < MinDesc || *f.v > f.max {
			ck.bad(f.p, "%d is outside %d..%d", *f.v, MinDesc, f.max)
		}
	}
	if d.IdleBackoff == nil {
		d.IdleBackoff = boolPtr(true)
	}
	if d.IdleMaxSleep == 0 {
		d.IdleMaxSleep = DefaultIdleMaxSleep
	}
	if d.IdleMaxSleep < 0 || d.IdleMaxSleep > MaxIdleMaxSleep {
		ck.bad("dataplane.idle_max_sleep", "%v is outside 0..%v", d.IdleMaxSleep, MaxIdleMaxSleep)
	}
	if d.Exception == nil {
		d.Exception = boolPtr(true)
	}
	if d.SecondChance == nil {
		d.SecondChance = boolPtr(false)
	}
	if d.SecondChanceWindow == 0 {
		d.SecondChanceWindow = DefaultSecondChanceWindow
	}
	if d.SecondChanceWindow < 0 || d.SecondChanceWindow > MaxSecondChanceWindow {
		ck.bad("dataplane.second_chance_window", "%v is outside 0..%v", d.SecondChanceWindow, MaxSecondChanceWindow)
	}
	ck.puntHealthSet = d.Punt.Health != 0
	d.Punt = d.Punt.WithDefaults()
	ck.addOwned("dataplane.punt", d.Punt.Validate(), fieldOf(func(fe *punt.FieldError) (string, string) { return fe.Key, fe.Msg }))
	if d.ExceptionIf == "" {
		d.ExceptionIf = DefaultExceptionName
	}
	if err := checkIfaceName(d.ExceptionIf); err != nil {
		ck.bad("dataplane.exception_iface", "%v", err)
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
		} else if a.v.IsValid() && !encap.IsUnicast(a.v.Addr) {
			ck.bad(a.p, "%v is not a unicast address", a.v)
		} else if a.v.IsValid() && a.v.IsLinkLocalUnicast() && strings.HasPrefix(a.p, "dataplane.lb_") {
			// The tunnels' outer source: no router forwards a packet
			// from a link-local source (a link-local gateway is fine).
			ck.bad(a.p, "%v is a link-local address: routers do not forward the tunnels from it to the backends", a.v)
		}
	}
	if m := d.NextHopMAC; m.Set && (m.HW == [6]byte{} || m.HW[0]&1 != 0) {
		// A group address would flood every tunnelled packet to the
		// whole segment; the zero address reaches nobody.
		ck.bad("dataplane.next_hop_mac", "%s is not a unicast MAC address (the zero address, or the group bit set: broadcast or multicast)", net.HardwareAddr(m.HW[:]))
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
	if g := d.GatewayIPv6; g.IsValid() && g.Is6() && !g.IsLinkLocalUnicast() && !d.NextHopMAC.Set && d.LBPrefix6 >= 1 && d.LBPrefix6 <= 128 &&
		// Without lb_ipv6 there are no IPv6 tunnels (an IPv6 backend is
		// refused): the gateway is never used, and was always accepted.
		d.LBIPv6.IsValid() && d.LBIPv6.Is6() && !netip.PrefixFrom(d.LBIPv6.Addr, d.LBPrefix6).Contains(g.Addr) {
		// The kernel resolves the gateway on the exception interface,
		// whose on-link prefixes are lb_ipv6/lb_ipv6_prefix and
		// fe80::/10: IPv6 never solicits an address off them, and the
		// gateway would stay unresolved (every IPv6 tunnel no-next-hop).
		ck.bad("dataplane.gateway_ipv6", "%v is not on the LB's link (lb_ipv6 %v/%d, or link-local): the kernel cannot resolve it through the exception interface", g, d.LBIPv6, d.LBPrefix6)
	}
	if d.HashKey == "" {
		ck.bad("dataplane.hash_key", "is required: 32 hex digits, the same on every instance of the fleet (e.g. from `openssl rand -hex 16`)")
	} else if k, err := flow.ParseKey(d.HashKey); err != nil {
		ck.bad("dataplane.hash_key", "%v", err)
	} else {
		// One spelling of the key (lower-case hex), so that the effective
		// configurations of a fleet compare equal and a reload that only
		// changes the digits' case is not refused as a new key.
		d.HashKey = k.String()
	}

	// Encapsulation: package encap's defaults and limits.
	d.SrcV4, d.SrcV6 = d.LBIPv4.Addr, d.LBIPv6.Addr
	d.Config = d.Config.WithDefaults()
	ck.addOwned("dataplane", d.Config.Validate(), fieldOf(func(fe *encap.FieldError) (string, string) { return fe.Key, fe.Msg }))
	if d.LBIPv6.IsValid() && d.Config.MTU >= encap.MinMTU && d.Config.MTU < ipv6MinMTU {
		// The kernel refuses an IPv6 address on a link below it: the
		// exception interface (MTU dataplane.mtu) could not hold
		// lb_ipv6, and a reload to it would remove the address.
		ck.bad("dataplane.mtu", "%d is below %d, IPv6's minimum link MTU (RFC 8200 section 5), and lb_ipv6 is set: the exception interface could not hold lb_ipv6", d.Config.MTU, ipv6MinMTU)
	}
	if len(ck.errs) > n {
		return false
	}
	// Whatever else encap.New refuses (a multicast lb_ipv4, ...) the
	// dataplane would refuse at start: refuse it here.
	enc, err := encap.New(d.Config)
	if err != nil {
		ck.bad("dataplane", "%v", err)
		return false
	}
	ck.enc = enc
	return true
}

// mbufBytes is what one mbuf of a worker's pool takes in the EAL's memory:
// the 2,176-byte data room (dpdk.DefaultDataRoom), the 128-byte rte_mbuf
// and the mempool's object header, rounded up.
const mbufBytes = 2432

// checkMemory refuses, on hugepages, an eal.memory_mb that cannot hold what
// the workers take from it: each worker's mbuf pool and its conntrack
// table (which lives on the hugepages then). The EAL needs some more for
// itself, so passing this check is necessary, not sufficient.
func (ck *checker) checkMemory(c *Config) {
	if !c.EAL.Hugepages || c.Conntrack.Capacity < 1 || c.Conntrack.Capacity > conntrack.MaxCapacity {
		return
	}
	n := len(c.EAL.WorkerLcores)
	pools := n * c.Dataplane.MempoolSize * mbufBytes
	tables := n * conntrack.TableBytes(c.Conntrack.Capacity)
	const mib = 1 << 20
	if need := (pools + tables + mib - 1) / mib; need > c.EAL.MemoryMB {
		ck.bad("eal.memory_mb", "%d MiB cannot hold what %d worker(s) take from the hugepages: %d MiB of conntrack tables (conntrack.capacity %d each) and %d MiB of mbuf pools (dataplane.mempool_size %d each); raise it to more than %d", c.EAL.MemoryMB, n, tables/mib, c.Conntrack.Capacity, pools/mib, c.Dataplane.MempoolSize, need)
	}
}

// finishConntrack fills [conntrack]'s defaults and has package conntrack,
// which owns the section, check it; each problem is at its key's line.
// Package conntrack's messages name its Go fields (OtherTimeout), so the
// bounds it checks, its own limits, are checked here first and told in
// the file's words ("500µs is outside 1ms..168h0m0s"); what package
// conntrack finds beyond them is reported as it says it.
func (ck *checker) finishConntrack(ct *conntrack.Config) {
	*ct = ct.WithDefaults()
	reported := map[string]bool{}
	if ct.Capacity < 1 || ct.Capacity > conntrack.MaxCapacity {
		ck.bad("conntrack.capacity", "%d is outside 1..%d entries", ct.Capacity, conntrack.MaxCapacity)
		reported["capacity"] = true
	}
	for _, t := range []struct {
		key string
		d   time.Duration
	}{
		{"tcp_syn", ct.TCPNewTimeout},
		{"tcp_established", ct.TCPEstablishedTimeout},
		{"tcp_closing", ct.TCPClosingTimeout},
		{"udp", ct.OtherTimeout},
	} {
		if t.d < conntrack.Resolution || t.d > conntrack.MaxTimeout {
			ck.bad("conntrack."+t.key, "%v is outside %v..%v", t.d, conntrack.Resolution, conntrack.MaxTimeout)
			reported[t.key] = true
		}
	}
	ck.addOwned("conntrack", ct.Validate(), func(err error) (string, string, bool) {
		var fe *conntrack.FieldError
		if !errors.As(err, &fe) {
			return "", "", false
		}
		if reported[fe.Key] {
			return "", "", true // told above, in the file's words
		}
		return fe.Key, fe.Error(), true
	})
}

// fieldOf reads an owning package's field error E as addOwned needs it:
// parts gives its key and message; an error that is no E has no key.
func fieldOf[E error](parts func(E) (key, msg string)) func(error) (key, msg string, ok bool) {
	return func(err error) (string, string, bool) {
		var fe E
		if !errors.As(err, &fe) {
			return "", "", false
		}
		k, m := parts(fe)
		return k, m, true
	}
}

// addOwned records the problems an owning package's Validate found in
// section (errors.Join of its field errors): each at section.KEY, where
// keyOf names the key and the message, or at the section when it names
// none (ok false). keyOf drops a problem with ok true and an empty key.
func (ck *checker) addOwned(section string, err error, keyOf func(error) (key, msg string, ok bool)) {
	if err == nil {
		return
	}
	for _, e := range splitJoined(err) {
		if key, msg, ok := keyOf(e); ok {
			if key != "" { // "": keyOf has reported it already
				ck.bad(section+"."+key, "%s", msg)
			}
			continue
		}
		ck.bad(section, "%v", e)
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
	if ct.SlowStart < 0 || ct.SlowStart > MaxSlowStart {
		ck.bad("control.slow_start", "%v is outside 0..%v (0: off)", ct.SlowStart, MaxSlowStart)
	}
	if ct.SlowStartMin == 0 {
		ct.SlowStartMin = DefaultSlowStartMin
	}
	if !unit(ct.SlowStartMin, 0, 1) || ct.SlowStartMin == 0 {
		ck.bad("control.slow_start_min", "%v is outside (0, 1]", ct.SlowStartMin)
	}
	if ct.DrainTimeout < 0 || ct.DrainTimeout > MaxDrainTimeout {
		ck.bad("control.drain_timeout", "%v is outside 0..%v (0: drained flows stay until they end)", ct.DrainTimeout, MaxDrainTimeout)
	}
	// 0 keeps the VIPs announced through a stall, so the default applies
	// only when the key is absent.
	if !ck.defined("control", "stall_timeout") {
		ct.StallTimeout = DefaultStallTimeout
	}
	if ct.StallTimeout != 0 && (ct.StallTimeout < MinStallTimeout || ct.StallTimeout > MaxStallTimeout) {
		ck.bad("control.stall_timeout", "%v is outside %v..%v (0: a stalled worker is reported, the VIPs stay announced)", ct.StallTimeout, MinStallTimeout, MaxStallTimeout)
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
	if a.Listen == "off" {
		return nil // the daemon reads nothing more of [admin]
	}
	if err := a.checkAdminTLS(); err != nil {
		return err
	}
	if path, ok := strings.CutPrefix(a.Listen, "unix:"); ok {
		return checkAdminSocket(path)
	}
	_, port, err := net.SplitHostPort(a.Listen)
	if err != nil {
		return errAt("admin.listen", "%q is not host:port, unix:/path or off", a.Listen)
	}
	// The daemon's net.Listen resolves the port the same way: a number
	// in 0..65535 or a service name ("https").
	if _, err := net.LookupPort("tcp", port); err != nil {
		return errAt("admin.listen", "%q: %q is not a port (0..65535 or a service name)", a.Listen, port)
	}
	if !AdminListenLocal(a.Listen) && a.Secret() == "" {
		return errAt("admin.token", "is required (or token_file) when admin.listen (%s) is not loopback: every call from the network must be authenticated", a.Listen)
	}
	return nil
}

// finishBGP fills the [bgp] defaults and has package bgp check it; each of
// its problems is reported at its key's line. Then it checks [bgp]
// against the [[vip]]s, which package bgp does not see: the control plane
// announces each VIP address as its /32 or /128, so a [[bgp.vip]] prefix
// that is no such prefix would be ignored, and a VIP of a family no
// session carries would be announced to no router.
func (ck *checker) finishBGP(c *Config) {
	b := c.BGP
	// A neighbor's keepalive left out defaults to a third of its
	// hold_time in whole seconds (at most bgp.DefaultKeepalive): a
	// problem package bgp finds with it is the hold_time's, which the
	// operator wrote, not the keepalive's.
	derived := map[string]int{} // "neighbor[i].keepalive" of a keepalive left out -> i
	for i, n := range b.Neighbors {
		if n.Keepalive == 0 {
			derived[fmt.Sprintf("neighbor[%d].keepalive", i)] = i
		}
	}
	*b = b.WithDefaults()
	for i, n := range b.Neighbors {
		if n.Password == RedactedSecret {
			ck.bad(fmt.Sprintf("bgp.neighbor[%d].password", i), "is the placeholder `fulcrum check` prints instead of the password: write the TCP MD5 key itself here")
		}
	}
	err := b.Validate()
	badKeys := map[string]bool{}
	for _, e := range splitJoined(err) {
		var fe *bgp.FieldError
		if errors.As(e, &fe) {
			badKeys[fe.Key] = true
		}
	}
	ck.addOwned("bgp", err, fieldOf(func(fe *bgp.FieldError) (string, string) {
		i, ok := derived[fe.Key]
		if !ok {
			return fe.Key, fe.Msg
		}
		hold := fmt.Sprintf("neighbor[%d].hold_time", i)
		if badKeys[hold] {
			return "", "" // the hold_time's own problem says what to fix
		}
		n := b.Neighbors[i]
		at := fmt.Sprintf("neighbor[%d] %q: ", i, n.Address)
		return hold, fmt.Sprintf("%shold_time %v leaves keepalive, which is not set, at its default of %v (a third of hold_time in whole seconds, at most %v): %s",
			at, n.HoldTime, n.Keepalive, bgp.DefaultKeepalive, strings.TrimPrefix(fe.Msg, at))
	}))

	var vips []netip.Addr // the configured VIP addresses, in config order, once each
	announced := map[netip.Prefix]bool{}
	for _, v := range c.VIPs {
		if a := v.Address.Addr; a.IsValid() && !announced[netip.PrefixFrom(a, a.BitLen())] {
			announced[netip.PrefixFrom(a, a.BitLen())] = true
			vips = append(vips, a)
		}
	}
	for i, v := range b.VIPs {
		p, ok := bgpVIPPrefix(v.Prefix)
		if !ok || announced[p] || len(vips) == 0 {
			continue // a malformed prefix is package bgp's problem; no [[vip]] is reported at vip
		}
		at := fmt.Sprintf("bgp.vip[%d].prefix", i)
		var covered []string
		for _, a := range vips {
			if p.Contains(a) {
				covered = append(covered, netip.PrefixFrom(a, a.BitLen()).String())
			}
		}
		if len(covered) > 0 {
			ck.bad(at, "%q is not the prefix of a VIP: VIPs are announced one address each, so it would be ignored; write one [[bgp.vip]] per VIP it covers: %s", v.Prefix, strings.Join(covered, ", "))
		} else {
			ck.bad(at, "%q is not the prefix of a VIP (no [[vip]] has that address), so it would be ignored; VIPs are announced as the /32 or /128 of their address: %s", v.Prefix, vipPrefixList(vips))
		}
	}

	// Which families the sessions carry, as package bgp decides it: a
	// session carries its own address family, and the other one only when
	// that family's next hop is set (next-hop self would put an address of
	// the wrong family in the UPDATE). An unparsable neighbour or next hop
	// is reported above; the check then does not guess.
	nh4, ok4 := bgpNextHop(b.NextHopV4, netip.Addr.Is4)
	nh6, ok6 := bgpNextHop(b.NextHopV6, netip.Addr.Is6)
	carries4, carries6 := nh4, nh6
	for _, n := range b.Neighbors {
		a, err := netip.ParseAddr(n.Address)
		if err != nil || a.Is4In6() || a.IsUnspecified() || a.IsMulticast() {
			ok4, ok6 = false, false
			break
		}
		carries4, carries6 = carries4 || a.Is4(), carries6 || a.Is6()
	}
	if len(b.Neighbors) == 0 {
		return // "no neighbor" is reported above
	}
	for _, fam := range []struct {
		ok, carries bool
		is          func(netip.Addr) bool
		name, other string
		key         string
	}{
		{ok4, carries4, netip.Addr.Is4, "IPv4", "IPv6", "next_hop_v4"},
		{ok6, carries6, netip.Addr.Is6, "IPv6", "IPv4", "next_hop_v6"},
	} {
		if !fam.ok || fam.carries {
			continue
		}
		var these []netip.Addr
		for _, a := range vips {
			if fam.is(a) {
				these = append(these, a)
			}
		}
		if len(these) == 0 {
			continue
		}
		ck.bad("bgp."+fam.key, "is not set and every [[bgp.neighbor]] is %s, so no session carries %s routes: the %s VIPs (%s) would never be announced to any router; set bgp.%s to the %s address the routers should forward them to (sent over the %s sessions, RFC 4760), or add an %s [[bgp.neighbor]]",
			fam.other, fam.name, fam.name, vipPrefixList(these), fam.key, fam.name, fam.other, fam.name)
	}
}

// bgpVIPPrefix reads a [[bgp.vip]] prefix as package bgp does: an address
// (its /32 or /128) or a prefix. ok is false for what package bgp refuses.
func bgpVIPPrefix(s string) (netip.Prefix, bool) {
	var p netip.Prefix
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return p, false
		}
		p = netip.PrefixFrom(a, a.BitLen())
	} else {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, false
		}
	}
	if !p.IsValid() || p.Addr().Is4In6() || p.Masked() != p {
		return p, false
	}
	return p, true
}

// bgpNextHop reports whether s, a [bgp] next_hop_v4 or next_hop_v6, is
// set (has) and whether it is an address of the family is (ok; an unset
// one is ok).
func bgpNextHop(s string, is func(netip.Addr) bool) (has, ok bool) {
	if s == "" {
		return false, true
	}
	a, err := netip.ParseAddr(s)
	return true, err == nil && is(a) && !a.IsUnspecified() && !a.Is4In6() && a.Zone() == ""
}

// vipPrefixList lists VIP addresses as the prefixes announced for them,
// the first few.
func vipPrefixList(vips []netip.Addr) string {
	const most = 5
	var out []string
	for i, a := range vips {
		if i == most {
			out = append(out, fmt.Sprintf("and %d more", len(vips)-most))
			break
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()).String())
	}
	return strings.Join(out, ", ")
}

// badNameRune reports runes a name may not hold: '/' (it is a path
// segment of the admin API), spaces and control characters.
func badNameRune(r rune) bool {
	return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
}

// invisibleRune reports format characters (Unicode category Cf): they
// print as nothing, so two names that differ by one look the same, and
// the bidirectional controls among them (U+202A..U+202E, U+2066..U+2069)
// reorder the text shown around them. The zero-width characters
// (U+200B..U+200F) and the byte order mark (U+FEFF) are of them.
// So do the other default-ignorable code points, which fonts draw as
// nothing too: variation selectors (U+FE00..U+FE0F, U+E0100..), the
// combining grapheme joiner U+034F and the Hangul fillers (U+115F,
// U+3164, ...).
func invisibleRune(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// CheckName reports why s cannot be a VIP's or backend's name in a
// configuration (nil if it can): tools that take names outside a
// configuration file (fulcrum-sim) refuse what the daemon refuses.
func CheckName(s string) error { return checkName(s) }

// checkName checks an operator-given VIP or backend name.
func checkName(s string) error {
	if len(s) < 1 || len(s) > MaxNameLen || strings.ContainsFunc(s, badNameRune) {
		return fmt.Errorf("%q is not a name: 1..%d bytes, no '/', spaces or control characters (it is a path segment of the admin API)", s, MaxNameLen)
	}
	if s == "." || s == ".." {
		// The admin API's router cleans the URL path: /vip/web/backend/..
		// is redirected elsewhere, so the backend could not be drained
		// by name.
		return fmt.Errorf("%q is not a name: \".\" and \"..\" are path steps, not path segments of the admin API", s)
	}
	if i := strings.IndexFunc(s, invisibleRune); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Errorf("%q is not a name: it holds the invisible format character %U (zero-width, bidirectional control, variation selector or the like), which makes a name look like another", s, r)
	}
	if !norm.NFC.IsNormalString(s) {
		// "caf\u00e9" and "cafe\u0301" print alike and would be two
		// names (two label sets, two API paths).
		return fmt.Errorf("%q is not a name: it is not in Unicode normal form C; write it as %q, the form every output shows", s, norm.NFC.String(s))
	}
	return nil
}

// nameIsAddress reports whether name reads as an IP address (or, for a
// VIP, address:port) other than own (and port): the admin API resolves
// a VIP or backend by name first and by address after, so such a name
// would capture the lookups of the address it spells. It returns what
// the name reads as.
func nameIsAddress(name string, own netip.Addr, port int, withPort bool) (string, bool) {
	if a, err := netip.ParseAddr(name); err == nil {
		if a.WithZone("").Unmap() != own {
			return "the address " + a.String(), true
		}
		return "", false
	}
	if !withPort {
		return "", false
	}
	if ap, err := netip.ParseAddrPort(name); err == nil {
		if ap.Addr().WithZone("").Unmap() != own || int(ap.Port()) != port {
			return "the address and port " + ap.String(), true
		}
	}
	return "", false
}

// checkIfaceName refuses what Linux refuses as an interface name
// (dev_valid_name in net/core/dev.c: empty, "." or "..", IFNAMSIZ bytes
// or more, a '/', ':' or blank, which is a byte isspace takes: tab, LF,
// VT, FF, CR, space and 0xA0) or would rename ('%', a printf format for
// the kernel to fill in), what DPDK's devargs cannot carry (the tap is
// created with "iface=NAME,mac=..."), and control characters.
func checkIfaceName(s string) error {
	const why = "a Linux interface name: 1..%d bytes, not \".\" or \"..\", no '/', ':', '%%', ',', '=', blanks or control characters"
	if s == "" || s == "." || s == ".." || len(s) > MaxIfaceNameLen {
		return fmt.Errorf("%q is not "+why, s, MaxIfaceNameLen)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/' || c == ':' || c == '%' || c == ',' || c == '=',
			c == ' ' || c >= '\t' && c <= '\r' || c == 0xa0:
			return fmt.Errorf("%q is not "+why+" (byte %d is %q)", s, MaxIfaceNameLen, i, c)
		}
	}
	if strings.ContainsFunc(s, badNameRune) {
		return fmt.Errorf("%q is not "+why, s, MaxIfaceNameLen)
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
		} else if why := notAVIP(v.Address.Addr); why != "" {
			ck.bad(at+".address", "%v is %s: routers cannot bring a client's packets to it", v.Address, why)
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
	} else if other, ok := nameIsAddress(v.Name, v.Address.Addr, v.Port, true); ok && addrOK {
		ck.bad(at+".name", "%q is not a name: it reads as %s, not this VIP's %v:%d (the admin API and fulcrumctl resolve a VIP by name before its address, so the name would take that address's lookups)", v.Name, other, v.Address, v.Port)
	} else if j, dup := names[v.Name]; dup {
		ck.bad(at+".name", "vip name %q at line %d is already used at line %d", v.Name, ck.line(at+".name"), ck.line(fmt.Sprintf("vip[%d].name", j)))
	}
	names[v.Name] = i
	if v.Encap == nil {
		k := d.Encap
		v.Encap = &k
	}
	if v.TableSize == 0 {
		v.TableSize = maglev.DefaultSize
	}
	if v.TableSize < 3 || v.TableSize > maglev.MaxSize || !maglev.IsPrime(uint64(v.TableSize)) {
		ck.bad(at+".table_size", "%d is not a prime in 3..%d: Maglev's permutation needs a prime table size (e.g. 65537, 655373)", v.TableSize, maglev.MaxSize)
	}
	if v.SecondChance != nil && *v.SecondChance && *v.Encap == encap.IPIP {
		ck.bad(at+".second_chance", "encap ipip has no field to carry a second chance: use gre or gue (docs/second-chance.md)")
	}
	if v.SecondChance == nil {
		// Inherited, it is off where ipip has no field for it (an explicit
		// true is refused above), so the effective form parses again.
		v.SecondChance = boolPtr(d.SecondChance != nil && *d.SecondChance && *v.Encap != encap.IPIP)
	}
	if v.OnDown == "" {
		v.OnDown = "keep"
	}
	if v.OnDown != "keep" && v.OnDown != "move" {
		ck.bad(at+".on_down", "%q is not keep or move", v.OnDown)
	}
	if v.Draws == 0 {
		v.Draws = sched.DefaultDraws
	}
	if v.Penalty == 0 {
		v.Penalty = sched.DefaultPenalty
	}
	if _, err := sched.New(v.Scheduler, v.Options); err != nil && !errors.Is(err, sched.ErrNotPicker) {
		p := at + ".draws"
		if errors.Is(err, sched.ErrPenalty) {
			p = at + ".ewma_penalty"
		}
		ck.bad(p, "%v", err)
	}
	ck.finishHash(at, v)
	ck.finishHealth(at+".health", &v.Health, &c.Health, v.Port)
	ck.finishQUIC(v, at)
	ck.checkHealthTunnel(c, at, v) // healthtunnel.go
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
		case b.Address.IsLinkLocalUnicast():
			ck.bad(bat+".address", "%v is a link-local address: routers do not forward the tunnel to it", b.Address)
		default:
			if ck.enc != nil {
				if _, err := ck.enc.Backend(b.Address.Addr); err != nil {
					ck.bad(bat+".address", "%v", err)
				}
			}
			if v.Address.Is6() && d.MTU >= ipv6MinMTU {
				// Clients never go below 1280 for a packet-too-big
				// (RFC 8200 section 5): an IPv6 VIP's tunnel must carry
				// a 1280-byte packet.
				if room := d.MTU - encap.Overhead(*v.Encap, b.Address.Is6()); room < ipv6MinMTU {
					ck.bad(bat+".address", "the tunnel to %v carries at most %d bytes of the IPv6 VIP's packets at dataplane.mtu %d, below IPv6's minimum 1280: raise mtu to %d or more", b.Address, room, d.MTU, d.MTU+ipv6MinMTU-room)
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
		} else if other, ok := nameIsAddress(b.Name, b.Address.Addr, 0, false); ok && b.Address.IsValid() {
			ck.bad(bat+".name", "%q is not a name: it reads as %s, not this backend's %v (the admin API and fulcrumctl resolve a backend by name before its address, so the name would take that address's drains and lookups)", b.Name, other, b.Address)
		} else if a, err := netip.ParseAddr(b.Name); err == nil && b.Address.IsValid() && a.WithZone("").Unmap() == b.Address.Addr {
			// The backend's own address in another spelling
			// ("::ffff:10.0.0.1", "2001:DB8::1"): the name is the Maglev
			// key, so it takes the address's one form, the default's, or
			// instances spelling it differently build different tables.
			b.Name = b.Address.String()
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

// ipv6MinMTU is IPv6's minimum link MTU (RFC 8200 section 5).
const ipv6MinMTU = 1280

// notAVIP says why a cannot be a VIP, or "" when it can: a VIP is
// announced to routers and reached by clients from other networks.
func notAVIP(a netip.Addr) string {
	switch {
	case !encap.IsUnicast(a):
		return "not a unicast address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	}
	return ""
}

// checkLoops refuses addresses that would send the LB's own tunnels back
// to it: a backend or a gateway at a VIP's address or the LB's (the
// routers bring packets for a VIP to the LB, which drops GRE, IPIP and
// GUE to its VIPs as traffic of no service). A gateway that is also a
// backend is allowed: a router may serve too.
func (ck *checker) checkLoops(c *Config) {
	d := &c.Dataplane
	own := map[netip.Addr]string{}
	for i, v := range c.VIPs {
		if v.Address.IsValid() {
			if _, dup := own[v.Address.Addr]; !dup {
				own[v.Address.Addr] = fmt.Sprintf("the address of VIP %q (vip #%d)", v.Name, i+1)
			}
		}
	}
	if d.LBIPv4.IsValid() {
		own[d.LBIPv4.Addr] = "the LB's own address (dataplane.lb_ipv4)"
	}
	if d.LBIPv6.IsValid() {
		own[d.LBIPv6.Addr] = "the LB's own address (dataplane.lb_ipv6)"
	}
	for i, v := range c.VIPs {
		for j, b := range v.Backends {
			if what, ok := own[b.Address.Addr]; ok && b.Address.IsValid() {
				ck.bad(fmt.Sprintf("vip[%d].backend[%d].address", i, j), "backend %v is %s: its tunnels would come back to the LB", b.Address, what)
			}
		}
	}
	for _, g := range []struct {
		p string
		a Addr
	}{{"dataplane.gateway_ipv4", d.GatewayIPv4}, {"dataplane.gateway_ipv6", d.GatewayIPv6}} {
		if what, ok := own[g.a.Addr]; ok && g.a.IsValid() {
			ck.bad(g.p, "%v is %s: the next hop must be another host", g.a, what)
		}
	}
}

// finishHealth fills h from def (the [health] defaults) and then package
// health's defaults, and has package health validate the check. The kind
// "none" and the passive checks are config's own.
func (ck *checker) finishHealth(at string, h, def *Health, vipPort int) {
	// Keys whose zero value is a setting of its own, not "absent": port 0
	// checks the backend's own port (the VIP's), host "" sends the
	// backend's address, jitter 0 turns jitter off and through "" is
	// direct. Written, they hold even when zero; left out, they come from
	// [health] (a VIP) or package health's defaults ([health]).
	written := func(key string) func() bool { return func() bool { return ck.setAt(at + "." + key) } }
	hd := health.DefaultConfig()
	jitter := hd.Jitter
	if def != nil {
		jitter = def.Jitter
		inheritUnwritten(&h.Port, def.Port, written("port"))
		inheritUnwritten(&h.Host, def.Host, written("host"))
		inheritUnwritten(&h.Through, def.Through, written("through"))
	}
	inheritUnwritten(&h.Jitter, jitter, written("jitter"))
	if def != nil {
		inherit(&h.Kind, def.Kind)
		inherit(&h.Path, def.Path)
		inherit(&h.ExpectStatus, def.ExpectStatus)
		inherit(&h.Interval, def.Interval)
		inherit(&h.Timeout, def.Timeout)
		inherit(&h.BackoffBase, def.BackoffBase)
		inherit(&h.BackoffMax, def.BackoffMax)
		inherit(&h.Rise, def.Rise)
		inherit(&h.Fall, def.Fall)
		inherit(&h.FlapWindow, def.FlapWindow)
		inherit(&h.Passive, def.Passive)
		inherit(&h.PassiveWindow, def.PassiveWindow)
		inherit(&h.PassiveMin, def.PassiveMin)
		inherit(&h.PassiveThreshold, def.PassiveThreshold)
	}
	inherit(&h.Kind, HealthNone)
	inherit(&h.Path, hd.Path)
	inherit(&h.ExpectStatus, hd.ExpectStatus)
	inherit(&h.Interval, hd.Interval)
	inherit(&h.Timeout, hd.Timeout)
	inherit(&h.Rise, hd.Rise)
	inherit(&h.Fall, hd.Fall)
	inherit(&h.BackoffBase, hd.BackoffBase)
	inherit(&h.BackoffMax, hd.BackoffMax)
	inherit(&h.FlapWindow, health.DefaultFlapWindow)
	inherit(&h.Through, hd.Through) // "" is direct: written so
	inherit(&h.Passive, "on")
	inherit(&h.PassiveWindow, DefaultPassiveWindow)
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
	// Kind "none" is validated as an http check, so that a bad value is
	// refused before it is turned on.
	hc := h.Config
	if hc.Kind == HealthNone {
		hc.Kind = health.KindHTTP
	}
	if err := hc.Validate(); err != nil {
		var ce *health.ConfigError
		switch {
		case !errors.As(err, &ce):
			bad(at, "%v", err)
		case ce.Field == "kind":
			bad(at+".kind", "%s, or %s", ce.Msg, HealthNone)
		case ce.Field == "flap_backoff_max":
			// Package health's message names the bound by its Go
			// field; the key is flap_backoff.
			bad(at+".flap_backoff_max", "%v is outside flap_backoff (%v)..%v", h.BackoffMax, h.BackoffBase, health.MaxBackoff)
		case (ce.Field == "path" || ce.Field == "host") && len(ce.Msg) > MaxProblemLen/2:
			// Package health quotes the value first: a long one is
			// clipped, so that the reason after it stays in the line.
			v := h.Path
			if ce.Field == "host" {
				v = h.Host
			}
			msg := ce.Msg
			if q := strconv.Quote(v); strings.HasPrefix(msg, q) {
				msg = quoteClipped(v) + msg[len(q):]
			}
			bad(at+"."+ce.Field, "%s", msg)
		default:
			bad(at+"."+ce.Field, "%s", ce.Msg)
		}
	}
	if h.Passive != "on" && h.Passive != "off" {
		bad(at+".passive", "%q is not on or off", h.Passive)
	}
	if w := h.PassiveWindow; w < MinPassiveWindow || w > MaxPassiveWindow {
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

// inheritUnwritten is inherit for a key whose zero value means
// something: *v is set to def only when it is zero and the file does not
// write the key (written, asked only then), so an explicit zero is kept.
func inheritUnwritten[T comparable](v *T, def T, written func() bool) {
	var zero T
	if *v == zero && !written() {
		*v = def
	}
}
