// Package config reads and validates Fulcrum's TOML configuration.
//
// Decoding is strict: an unknown key is an error, and so is every value that
// would make the dataplane misbehave (a bad address, a table size that is not
// prime, two VIPs with the same address, port and protocol, a backend whose
// address family the LB has no source address for). Errors name the file,
// the line and the thing that is wrong, and Parse reports every problem of
// a file (Errors), not just the first. Each setting has one owner: config
// decodes a section straight into the owning package's type (encap.Config,
// conntrack.Config, health.Config, sched.Kind and sched.Options,
// bgp.Config; their toml tags are the keys, their text unmarshalers read
// the kinds) and has that package fill its defaults and validate it,
// wrapping each problem with its file and line; see limits.go for what
// config owns itself. A Config that Load returns is complete: every
// default is filled in, so `fulcrum check` can print the effective
// configuration and the daemon never guesses.
package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/fulcrumlb/fulcrum/bgp"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/health"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/punt"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Config is the whole configuration of one fulcrum process.
type Config struct {
	EAL       EAL              `toml:"eal"`
	Dataplane Dataplane        `toml:"dataplane"`
	Conntrack conntrack.Config `toml:"conntrack"` // package conntrack documents and validates every key
	Control   Control          `toml:"control"`
	Health    Health           `toml:"health"` // defaults for every VIP's [vip.health]
	Admin     Admin            `toml:"admin"`
	BGP       *bgp.Config      `toml:"bgp"` // nil: no BGP speaker; package bgp documents and validates every key
	VIPs      []VIP            `toml:"vip"`

	// File is the path the config was read from (not a TOML key).
	File string `toml:"-"`
	// puntNeed is the health budget the checks need (checkPuntHealth),
	// before it is capped at punt.MaxRate.
	puntNeed float64
	// Warnings are what Load saw that is allowed but unsafe: a secret
	// written inline in a file every user can read. `fulcrum check`
	// prints them, `fulcrum run` logs them at start and on each reload.
	Warnings []string `toml:"-"`
}

// EAL holds DPDK's Environment Abstraction Layer settings.
type EAL struct {
	MainLcore    int      `toml:"main_lcore"`    // control-plane lcore
	WorkerLcores []int    `toml:"worker_lcores"` // one forwarding loop each; empty: one loop on the main lcore
	MemoryMB     int      `toml:"memory_mb"`     // memory to reserve (-m)
	Hugepages    bool     `toml:"hugepages"`     // false: --no-huge (tests, small labs)
	FilePrefix   string   `toml:"file_prefix"`   // --file-prefix, unique per process on one host
	PCI          []string `toml:"pci"`           // PCI devices to use (-a); none: --no-pci
	Vdevs        []string `toml:"vdevs"`         // virtual devices (--vdev), e.g. "net_pcap0,rx_pcap=in.pcap"
	ExtraArgs    []string `toml:"extra_args"`    // appended verbatim
	// LcoreMap places lcores on CPUs ("0@0,1@0,2@1": DPDK's --lcores), for
	// more lcores than CPUs (tests, small labs); empty: lcore N on CPU N.
	// It must name the main lcore and every worker lcore.
	LcoreMap string `toml:"lcore_map"`
}

// Dataplane holds the forwarding settings.
type Dataplane struct {
	Port         string        `toml:"port"`           // the wire port: DPDK device name (vdev name or PCI address)
	TxPort       string        `toml:"tx_port"`        // optional separate egress port (e.g. a pcap writer); default: Port
	Burst        int           `toml:"burst"`          // packets per rx/tx burst (1..conntrack.MaxBurst)
	RxDesc       int           `toml:"rx_desc"`        // rx descriptors per queue
	TxDesc       int           `toml:"tx_desc"`        // tx descriptors per queue
	MempoolSize  int           `toml:"mempool_size"`   // mbufs per worker pool
	IdleBackoff  *bool         `toml:"idle_backoff"`   // back off when idle (default true); false for benchmarks
	IdleMaxSleep time.Duration `toml:"idle_max_sleep"` // longest sleep when idle
	Exception    *bool         `toml:"exception"`      // create the net_tap exception path (default true)
	ExceptionIf  string        `toml:"exception_iface"`
	LBIPv4       Addr          `toml:"lb_ipv4"`        // outer source for IPv4 tunnels; the host's address
	LBIPv6       Addr          `toml:"lb_ipv6"`        // outer source for IPv6 tunnels
	LBPrefix4    int           `toml:"lb_ipv4_prefix"` // prefix length put on the exception interface (default 24)
	LBPrefix6    int           `toml:"lb_ipv6_prefix"` // (default 64)
	GatewayIPv4  Addr          `toml:"gateway_ipv4"`   // next hop toward backends (its MAC from the kernel)
	GatewayIPv6  Addr          `toml:"gateway_ipv6"`
	NextHopMAC   MAC           `toml:"next_hop_mac"` // static next-hop MAC; overrides neighbour lookup
	Encap        encap.Kind    `toml:"encap"`        // default encapsulation (the zero Kind, gre)
	HashKey      string        `toml:"hash_key"`     // 32 hex digits; the same on every instance of a fleet
	// SecondChance names the previous table's choice in the tunnel of a
	// mid-connection packet of an unknown flow (docs/second-chance.md);
	// default false. SecondChanceWindow: how long a VIP keeps its
	// previous table after a change (default 5m).
	SecondChance       *bool         `toml:"second_chance"`
	SecondChanceWindow time.Duration `toml:"second_chance_window"`
	// Punt: the exception path's budgets ([dataplane.punt]), package
	// punt's, which documents and validates them.
	Punt punt.Config `toml:"punt"`
	// The tunnel settings (mtu, ttl, df, gue_port) are package encap's,
	// which documents and validates them; config sets SrcV4 and SrcV6
	// from lb_ipv4 and lb_ipv6.
	encap.Config
}

// Control sets how the control plane turns health and operator actions
// into tables.
type Control struct {
	// PanicThreshold: when fewer than this share of a VIP's (undrained)
	// backends are healthy, all of them are used as if healthy (fail open,
	// seed chapter 5.4). 0 disables panic mode.
	PanicThreshold float64 `toml:"panic_threshold"`
	// SlowStart ramps a backend that was added, undrained or came back up
	// from SlowStartMin of its weight to all of it over this time (0: off).
	SlowStart    time.Duration `toml:"slow_start"`
	SlowStartMin float64       `toml:"slow_start_min"`
	// DrainTimeout: a drained backend's established flows are moved away
	// after this long (0: they stay until they end).
	DrainTimeout time.Duration `toml:"drain_timeout"`
	// StallTimeout: a worker (forwarding lcore) that has answered no
	// counter snapshot for this long is stalled, and the instance
	// withdraws every VIP until all its workers answer again (default
	// 5s; 0: the stall is reported, the VIPs stay announced).
	StallTimeout time.Duration `toml:"stall_timeout"`
}

// Health is an active health check. In [health] it sets the defaults; in
// [vip.health] it overrides them per VIP. The active check's keys are
// package health's Config (kind, port, path, host, expect, interval,
// timeout, rise, fall, jitter, flap_window, flap_backoff,
// flap_backoff_max), which documents and validates them; config adds the
// kind "none" (HealthNone, the default), which turns active checks off,
// and the passive checks.
type Health struct {
	health.Config

	// Passive checks at L4: a backend whose TCP handshakes fail (SYNs
	// unanswered or refused: the client never sends its first ACK) is
	// ejected as an outlier for flap_backoff, doubling up to
	// flap_backoff_max, however its active checks answer (the chapter's
	// "check that says 200", section 5.2). "off" disables them.
	Passive          string        `toml:"passive"`           // on (default) or off
	PassiveWindow    time.Duration `toml:"passive_window"`    // sliding window (default 10s)
	PassiveMin       int           `toml:"passive_min"`       // handshakes needed in the window to judge (default 20)
	PassiveThreshold float64       `toml:"passive_threshold"` // failed share that ejects (default 0.5)
}

// Admin is the HTTP admin API (JSON, Prometheus /metrics).
type Admin struct {
	// Listen is "host:port" or "unix:/path". Default 127.0.0.1:9180.
	// "" keeps the default; "off" disables the API.
	Listen string `toml:"listen"`
	// Token is required (Authorization: Bearer ...) for mutating calls when
	// Listen is not loopback or a unix socket; the config is rejected
	// without one then.
	Token string `toml:"token"`
	// TokenFile reads the token from a file (first line), so the secret
	// need not live in the main config. Exclusive with Token.
	TokenFile string `toml:"token_file"`
	// TLSCert and TLSKey serve the API over TLS (both or neither).
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// MaxConns caps concurrent API connections (default 64), so a peer
	// cannot exhaust the process's file descriptors.
	MaxConns int `toml:"max_conns"`

	secret  string           // the token read from TokenFile; see Secret
	cert    *tls.Certificate // the pair TLSCert and TLSKey hold, as Load read it; see Certificate
	keyPerm fs.FileMode      // TLSKey's permission bits, as Load read it (secretWarnings)
}

// VIP is one virtual service: an address, a port (0: every port) and a
// protocol, with its backends.
type VIP struct {
	Name      string      `toml:"name"`
	Address   Addr        `toml:"address"`
	Port      int         `toml:"port"`
	Protocol  string      `toml:"protocol"` // tcp or udp
	Encap     *encap.Kind `toml:"encap"`    // absent: dataplane.encap (always set after Parse)
	TableSize int         `toml:"table_size"`
	// Scheduler picks the backend of a new flow: maglev (the zero Kind,
	// the default; the same answer on every instance) or another of
	// package sched's kinds. See README "Choosing a scheduler".
	Scheduler sched.Kind `toml:"scheduler"`
	// The scheduler's options (draws, ewma_penalty) are package sched's.
	sched.Options
	// Hash is which fields of a flow the Maglev slot is hashed from
	// (package flow's Mode: "5-tuple", the default, "3-tuple", "src-ip",
	// "src-ip-prefix"); HashPrefix and HashPrefix6 are src-ip-prefix's
	// source prefix lengths (default 24 and 48). See README "Hash fields".
	Hash        flow.Mode `toml:"hash"`
	HashPrefix  *int      `toml:"hash_prefix"`
	HashPrefix6 *int      `toml:"hash_prefix6"`

	Health Health `toml:"health"`
	// OnDown is what happens to a backend's tracked flows when it goes
	// down or is ejected: "keep" (default; IPVS expire_nodest_conn=0,
	// HAProxy without shutdown-sessions) leaves them pinned until they end
	// or the backend is removed from the config; "move" re-selects them.
	// Either way a down backend gets no new flows.
	OnDown   string    `toml:"on_down"`
	Backends []Backend `toml:"backend"`

	// QUIC (UDP VIPs only) routes short-header packets by the server id
	// in their connection ID, whatever the client's address (docs/quic.md);
	// the layout keys (quic_cid_len, quic_server_id_len, quic_config_id)
	// are package packet's QUICConfig, set only with quic = true.
	QUIC bool `toml:"quic,omitempty"`
	packet.QUICConfig

	// SecondChance overrides dataplane.second_chance for this VIP (always
	// set after Parse; docs/second-chance.md).
	SecondChance *bool `toml:"second_chance"`
}

// Key is what identifies the VIP: two VIPs may not share it, and the
// dataplane keeps a VIP's id across reloads by it. Its String,
// "address:port/protocol", is the name of a VIP that has none.
func (v *VIP) Key() flow.VIPKey {
	return flow.VIPKey{Addr: v.Address.Addr, Port: uint16(v.Port), Proto: v.Proto()}
}

// Proto is the IP protocol number of Protocol: 6 for "tcp" (the default),
// 17 for "udp", 0 for anything else (which validation refuses).
func (v *VIP) Proto() uint8 {
	switch v.Protocol {
	case "tcp", "":
		return 6
	case "udp":
		return 17
	}
	return 0
}

// Backend is one real server behind a VIP.
type Backend struct {
	Name    string `toml:"name"` // stable identity in the Maglev table; default: the address
	Address Addr   `toml:"address"`
	Weight  *int   `toml:"weight"` // default 1; 0 = no new flows
	Drain   bool   `toml:"drain"`  // drained: no new flows, established flows stay
	// QUICID is the server id the backend writes in its QUIC connection
	// IDs (a quic VIP's backends; unique within the VIP). A backend
	// without one gets only what the hash gives it.
	QUICID *int64 `toml:"quic_id,omitempty"`
}

// Addr is a netip.Addr that decodes from a TOML string.
type Addr struct{ netip.Addr }

// UnmarshalText parses an IPv4 or IPv6 address without zone, and not an
// IPv4-mapped IPv6 one.
func (a *Addr) UnmarshalText(b []byte) error {
	if len(b) == 0 { // unset, as Encode writes it
		*a = Addr{}
		return nil
	}
	p, err := netip.ParseAddr(string(b))
	if err != nil {
		return fmt.Errorf("%q is not an IP address", b)
	}
	if p.Zone() != "" {
		return fmt.Errorf("%q: zones are not allowed", b)
	}
	if p.Is4In6() {
		// Which family is meant? Read as IPv4 it would silently turn an
		// IPv6 VIP (announced as a /128) into an IPv4 one (a /32).
		return fmt.Errorf("%q is an IPv4-mapped IPv6 address: write the IPv4 address %v, or a real IPv6 one", b, p.Unmap())
	}
	a.Addr = p
	return nil
}

// MarshalText formats the address ("" when unset).
func (a Addr) MarshalText() ([]byte, error) {
	if !a.IsValid() {
		return []byte{}, nil
	}
	return a.Addr.MarshalText()
}

// MAC is an Ethernet address that decodes from "aa:bb:cc:dd:ee:ff".
type MAC struct {
	HW  [6]byte
	Set bool
}

// UnmarshalText parses a 48-bit MAC address.
func (m *MAC) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*m = MAC{}
		return nil
	}
	hw, err := net.ParseMAC(string(b))
	if err != nil || len(hw) != 6 {
		return fmt.Errorf("%q is not a 48-bit MAC address", b)
	}
	copy(m.HW[:], hw)
	m.Set = true
	return nil
}

// MarshalText formats the MAC ("" when unset).
func (m MAC) MarshalText() ([]byte, error) {
	if !m.Set {
		return []byte{}, nil
	}
	return []byte(net.HardwareAddr(m.HW[:]).String()), nil
}

// Load reads, decodes and validates the file at path.
func Load(path string) (*Config, error) {
	// Opened without blocking and checked before it is read: a FIFO, a
	// device or a directory named by mistake (or by a reload's typo) must
	// get an error, not hang the daemon's main loop, where a SIGTERM would
	// wait behind it, or read /dev/zero for ever.
	f, err := openRegular(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("config: %s is larger than %d MiB", path, MaxFileSize>>20)
	}
	c, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil {
		c.Warnings = secretWarnings(c, fi.Mode().Perm())
	}
	c.Warnings = append(c.Warnings, keyWarnings(c)...)
	c.Warnings = append(c.Warnings, puntWarnings(c)...)
	return c, nil
}

// puntWarnings says when the health checks' answers need more of the
// exception path's health budget than it can be (punt.MaxRate): some are
// dropped in every round, and healthy backends may be called down.
func puntWarnings(c *Config) []string {
	if c.puntNeed <= punt.MaxRate {
		return nil
	}
	return []string{fmt.Sprintf("dataplane.punt.health: the health checks' answers need %.0f packets a second (twice their packets at every checked backend's interval, and a whole round starting within jitter × interval), over the most a budget can be (%d): some are dropped and healthy backends may be called down; lengthen the checks' interval, raise their jitter, or check fewer backends", c.puntNeed, punt.MaxRate)}
}

// publishedKeys are hash keys anyone can read: the one of the examples,
// the shipped /etc/fulcrum/fulcrum.toml and docs/flow-hash.md's test
// vectors, and all zeros.
var publishedKeys = map[string]bool{
	"000102030405060708090a0b0c0d0e0f": true,
	"00000000000000000000000000000000": true,
}

// keyWarnings warns of a published dataplane.hash_key. It is not
// refused: the examples and labs run with it, and a fleet upgraded into a
// refusal would stop. But with it anyone can aim flows at one conntrack
// bucket or one backend, which the key is there to prevent.
func keyWarnings(c *Config) []string {
	if !publishedKeys[strings.ToLower(c.Dataplane.HashKey)] {
		return nil
	}
	return []string{fmt.Sprintf("dataplane.hash_key %s is published (Fulcrum's examples and documentation): anyone can aim flows at a chosen backend with it; write a key of your own (head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'), the same on every instance", c.Dataplane.HashKey)}
}

// secretWarnings names each secret written inline in a file of mode perm
// that every user can read. A token_file so readable is refused; an
// inline secret is not, since refusing it would stop a fleet on upgrade,
// but it guards nothing either, and the operator is told.
func secretWarnings(c *Config, perm fs.FileMode) []string {
	var w []string
	if c.Admin.cert != nil && c.Admin.keyPerm&0o004 != 0 {
		// Not refused, as an inline token is not: a fleet upgraded into
		// a refusal would stop.
		w = append(w, fmt.Sprintf("admin.tls_key %s is a private key every user can read (mode %04o): anyone on the host can impersonate the admin API to fulcrumctl; chmod o-r it", showPath(c.Admin.TLSKey), c.Admin.keyPerm))
	}
	if perm&0o004 == 0 {
		return w
	}
	say := func(key, instead string) {
		w = append(w, fmt.Sprintf("%s is written in %s, which every user can read (mode %04o): chmod o-r the file%s", key, showPath(c.File), perm, instead))
	}
	if c.Admin.Token != "" {
		say("admin.token", ", or move the token to token_file")
	}
	if c.BGP != nil {
		for i, n := range c.BGP.Neighbors {
			if n.Password != "" {
				say(fmt.Sprintf("bgp.neighbor[%d].password", i), "")
			}
		}
	}
	return w
}

// openRegular opens path for reading without blocking and returns it if
// it is a regular file. Every file a Load reads (the configuration, the
// admin token and TLS files) is opened so: a FIFO, a device or a
// directory named by mistake gets an error instead of hanging the
// daemon's main loop, where a reload reads them and a SIGTERM would wait
// behind it.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.IsDir():
		err = &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// MaxFileSize bounds a configuration file: 65,536 backends take about
// 4 MiB of TOML.
const MaxFileSize = 64 << 20

// Parse decodes and validates a configuration; name is used in errors.
// It is the one place that validates: everything `fulcrum run` would
// reject, it rejects, and an invalid configuration comes back as Errors,
// every problem with its line.
func Parse(data []byte, name string) (*Config, error) {
	// A byte order mark (which some editors write, and the decoder skips)
	// is no content either.
	if len(strings.TrimSpace(stripComments(strings.TrimPrefix(string(data), "\ufeff")))) == 0 {
		return nil, Errors{{File: name, Line: 1, Msg: "empty file: a configuration needs at least [dataplane] and one [[vip]]"}}
	}
	// Before the decoder: what nests thousands deep costs it (and the
	// locator) gigabytes and minutes, and is refused at once.
	if p := checkShape(data, name); p != nil {
		return nil, Errors{p}
	}
	var c Config
	md, err := toml.Decode(string(data), &c)
	if err != nil {
		// The decoder stops at its first error: nothing after it can be
		// trusted, so this is the only problem reported.
		p := &Problem{File: name, Line: 1, Msg: err.Error()}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			p.Line, p.Msg = pe.Position.Line, pe.Message
			if d, ok := strings.CutPrefix(pe.Message, "invalid duration: "); ok {
				// The decoder's own words for a time.Duration; config's
				// say what one looks like.
				p.Msg = d + ` is not a duration (e.g. "300s", "200us")`
			}
			// A value its type refused (an owning package's
			// UnmarshalText: a kind, a DF mode, an address) names its
			// key, indexed ("vip[1].encap"), as every other problem does.
			if path := newLocator(data).pathAt(p.Line, pe.LastKey); path != "" {
				p.Key, p.Msg = path, path+": "+p.Msg
			}
			if strings.HasPrefix(pe.LastKey, "dataplane.hash_key") {
				// The decoder's words quote the value (a key written
				// as 0x...: "... is out of range for int64"): the
				// fleet's secret, in the journal.
				p.Key = "dataplane.hash_key"
				p.Msg = p.Key + ": not a string of 32 hex digits (the TOML decoder refused it; its message is left out, as it would quote the key)"
			}
		} else if m := typeErrRE.FindStringSubmatch(err.Error()); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Key, p.Msg = m[2], m[2]+": "+m[3]
		}
		p.Line = max(p.Line, 1)
		return nil, Errors{p}
	}
	ck := &checker{file: name, loc: newLocator(data), md: md, data: data}
	// Undecoded and the parent set are computed once: per key they would
	// make a file of many unknown keys quadratic (minutes for 20000).
	und := md.Undecoded()
	parents := map[string]bool{} // keys with an undecoded key below them
	for _, k := range und {
		for i := 1; i < len(k); i++ {
			parents[k[:i].String()] = true
		}
	}
	// A key is undecoded once per occurrence, in the file's order (the
	// same typo in two backends is two keys): each is reported at its
	// own line.
	seen := map[string]int{} // unknown key -> occurrences reported
	for _, k := range und {
		s := k.String()
		if parents[s] {
			continue // report the leaf keys, not the unknown table itself
		}
		line := ck.loc.lineOfKey(k, seen[s])
		seen[s]++
		ck.errs = append(ck.errs, &Problem{File: name, Line: max(line, 1), Key: s, Msg: fmt.Sprintf("unknown key %q", s)})
	}
	c.File = name
	// Unknown keys do not stop validation: the rest decoded, and the
	// operator gets every problem at once.
	ck.checkRawKeys() // durations.go
	ck.finish(&c)
	if len(ck.errs) > 0 {
		return nil, ck.errs.sorted()
	}
	return &c, nil
}

// stripComments drops TOML comments well enough to tell an empty file.
func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		b.WriteString(l)
	}
	return b.String()
}

// typeErrRE matches the decoder's type-mismatch errors, to put them in the
// same file:line: form as every other error.
var typeErrRE = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// RedactedSecret is what Redacted writes in place of a secret the file
// holds (admin.token, a [[bgp.neighbor]]'s password). Parse refuses it
// in either key, naming the key: effective configuration copied from
// `fulcrum check` must not silently run with the placeholder as the
// secret (an MD5 key no router has) or without one.
const RedactedSecret = "(not shown by fulcrum check: write the secret here)"

// Redacted is a copy of c with every secret written in the file replaced
// by RedactedSecret, for printing (`fulcrum check`): its output goes to
// terminals, CI logs and tickets. A token_file's token is never in c's
// keys, so it needs no redaction. c is not changed.
func (c *Config) Redacted() *Config {
	r := *c
	if r.Admin.Token != "" {
		r.Admin.Token = RedactedSecret
	}
	if c.BGP != nil {
		b := *c.BGP
		b.Neighbors = append([]bgp.Neighbor(nil), c.BGP.Neighbors...)
		for i := range b.Neighbors {
			if b.Neighbors[i].Password != "" {
				b.Neighbors[i].Password = RedactedSecret
			}
		}
		r.BGP = &b
	}
	return &r
}

// Encode writes the effective configuration as TOML (for `fulcrum check`,
// which encodes it Redacted).
func (c *Config) Encode() (string, error) {
	var b strings.Builder
	err := toml.NewEncoder(&b).Encode(c)
	return b.String(), err
}
