package encap

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Defaults and limits. Each number says where it comes from; an operator
// reading this block knows every value Encap uses that the config does not
// set.
const (
	// DefaultTTL is the outer TTL / hop limit, and the TTL of ICMP errors:
	// the Linux default (net.ipv4.ip_default_ttl), RFC 1700's recommendation.
	DefaultTTL = 64

	// DefaultMTU is the L3 MTU of the wire toward the backends: plain
	// Ethernet (RFC 894).
	DefaultMTU = 1500

	// MinMTU is the smallest accepted MTU: 576 bytes, the datagram size
	// every IPv4 host must accept (RFC 791), so the 576-byte ICMP errors
	// this package builds always fit. See the package doc for IPv6 and
	// MTUs below 1280 + Overhead.
	MinMTU = 576

	// MaxMTU is the largest IPv4/IPv6 packet without jumbograms.
	MaxMTU = 65535

	// DefaultGUEPort is the GUE destination port: 6080, the port IANA
	// registered for GUE (draft-ietf-intarea-gue), also the default of
	// OpenConfig's GUE decapsulation tests. Linux's `ip fou add port N
	// gue` has no default: configure the backends with this port.
	DefaultGUEPort = 6080

	// DefaultGUESrcPortMin and DefaultGUESrcPortMax bound the outer UDP
	// source port, which carries the flow's entropy: the dynamic port
	// range of RFC 6335 §6, as RFC 8086 §3.2.1 (GRE-in-UDP) recommends.
	DefaultGUESrcPortMin = 49152
	DefaultGUESrcPortMax = 65535

	// MaxHeaderLen is the most headroom Encap needs in front of the inner
	// IP header: Ethernet (14) + IPv6 (40) + UDP (8) + GUE (4) + a GUE
	// second chance naming an IPv6 backend (20, see EncapChance). The ICMP
	// replies need less (14+40+8). The original Ethernet header counts
	// toward it, so the mbuf headroom must be at least
	// MaxHeaderLen - 14 = 72 bytes (DPDK's default is 128).
	MaxHeaderLen = ethLen + ipv6Len + udpLen + gueLen + gueChanceLen6
)

// ErrConfig is wrapped by every error New, Backend, ParseKind and ParseDF
// return, so callers can test for a configuration problem with errors.Is.
var ErrConfig = errors.New("invalid encap config")

// DF says how the outer IPv4 header's don't-fragment bit is set. IPv6 has no
// DF bit: routers never fragment IPv6.
type DF uint8

const (
	// DFInherit (the default) copies DF from an inner IPv4 packet, as RFC
	// 2003 §3.1 asks, and sets it for an inner IPv6 packet, whose sender
	// expects Packet Too Big rather than fragmentation (RFC 8200 §5).
	DFInherit DF = iota
	// DFSet always sets DF: a path MTU smaller than Config.MTU then drops
	// packets instead of fragmenting them at the routers.
	DFSet
	// DFClear never sets DF: routers on a path smaller than Config.MTU
	// fragment the outer packet and the backend reassembles it. The outer
	// IPv4 ID is derived from the flow hash and the inner packet's ID, so
	// packets of one flow whose inner ID does not change (an inner IPv6
	// packet, or an inner IPv4 one with DF and ID 0, RFC 6864) share an
	// outer ID: after a lost fragment the backend may join the next
	// packet's fragments to the stale ones (dropped as overlapping, or
	// at worst misassembled, which the inner checksum catches). Use it
	// only where a path really fragments, for flows that set inner IDs.
	DFClear

	numDF
)

var dfNames = [numDF]string{DFInherit: "inherit", DFSet: "set", DFClear: "clear"}

// String is the mode's config name: "inherit", "set" or "clear".
func (d DF) String() string { return enumName(dfNames[:], d, "df") }

// UnmarshalText reads the mode's config name, as ParseDF does, so that
// package config decodes dataplane.df straight into a DF.
func (d *DF) UnmarshalText(b []byte) (err error) {
	*d, err = ParseDF(string(b))
	return err
}

// MarshalText writes the mode's config name.
func (d DF) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// enumName is v's config name, or what(v) for a value out of range.
func enumName[T ~uint8](names []string, v T, what string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, uint8(v))
}

// ParseDF reads a DF mode's config name ("inherit", "set", "clear").
func ParseDF(s string) (DF, error) { return parseName[DF]("df", s, dfNames[:]) }

// parseName finds s among an enum's config names.
func parseName[T ~uint8](what, s string, names []string) (T, error) {
	for i, name := range names {
		if s == name {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("encap %s %q: want one of %s: %w", what, s, strings.Join(names, ", "), ErrConfig)
}

// Config is the encapsulator's configuration. Zero fields take the defaults
// above; New fills them in (WithDefaults) and checks the rest (Validate).
// It is also the tunnel part of the configuration file's [dataplane]
// section, which package config decodes into it: the toml tags are the
// keys. The source addresses are lb_ipv4 and lb_ipv6, which the exception
// path uses too, so package config decodes those and sets SrcV4/SrcV6.
type Config struct {
	// SrcV4 and SrcV6 are the LB's own addresses, the outer source toward
	// IPv4 and IPv6 backends. At least one must be set; a backend whose
	// family has no source address is refused by Backend.
	SrcV4, SrcV6 netip.Addr `toml:"-"`

	// TTL is the outer TTL / hop limit, 1..255 (0: DefaultTTL).
	TTL int `toml:"ttl"`

	// DF is the outer IPv4 DF policy (zero value: DFInherit).
	DF DF `toml:"df"`

	// MTU is the L3 MTU toward the backends, in bytes (0: DefaultMTU).
	// An encapsulated packet longer than MTU is not sent; see Encap.
	MTU int `toml:"mtu"`

	// GUEPort is the GUE destination port, 1..65535 (0: DefaultGUEPort).
	GUEPort int `toml:"gue_port"`

	// GUESrcPortMin and GUESrcPortMax bound the outer UDP source port,
	// chosen from the flow hash (both 0: the RFC 6335 dynamic range).
	GUESrcPortMin, GUESrcPortMax uint16 `toml:"-"`

	// GUEZeroChecksumV6 sends GUE over IPv6 with a zero UDP checksum, as
	// RFC 6935 allows for tunnels whose decapsulator is configured to
	// accept it (RFC 6936 §5). Off by default: the checksum is computed,
	// in constant time for TCP, UDP and ICMP inner packets (see the
	// package doc).
	GUEZeroChecksumV6 bool `toml:"-"`
}

// FieldError is a problem of one Config setting. Key is its configuration
// key ("mtu"), so that the config loader can point at its line; Msg says
// what is wrong with the value.
type FieldError struct {
	Key string
	Msg string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrConfig) hold.
func (e *FieldError) Unwrap() error { return ErrConfig }

// WithDefaults is c with every zero field taken from the defaults above.
func (c Config) WithDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.GUEPort == 0 {
		c.GUEPort = DefaultGUEPort
	}
	if c.GUESrcPortMin == 0 && c.GUESrcPortMax == 0 {
		c.GUESrcPortMin, c.GUESrcPortMax = DefaultGUESrcPortMin, DefaultGUESrcPortMax
	}
	return c
}

// Validate reports every problem of the keyed settings of c (defaults
// filled in), each a *FieldError (errors.Join of them). New checks the
// source addresses and the GUE source ports too.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if c.MTU < MinMTU || c.MTU > MaxMTU {
		bad("mtu", "%d is outside %d..%d", c.MTU, MinMTU, MaxMTU)
	}
	if c.TTL < 1 || c.TTL > 255 {
		bad("ttl", "%d is outside 1..255", c.TTL)
	}
	if c.DF >= numDF {
		bad("df", "%d is not one of %s", c.DF, strings.Join(dfNames[:], ", "))
	}
	if c.GUEPort < 1 || c.GUEPort > 65535 {
		bad("gue_port", "%d is not a UDP port", c.GUEPort)
	}
	return errors.Join(errs...)
}

// Encapsulator writes tunnel headers in front of packets. It is immutable
// after New, so one value can be shared by every lcore without locks.
type Encapsulator struct {
	cfg Config // with defaults filled in

	src4    [4]byte
	hasV4   bool
	src4Sum uint64 // sum of src4's 16-bit words (outer IPv4 header checksum)
	src6    [16]byte
	hasV6   bool
	src6Sum uint64 // ones'-complement sum of src6's 16-bit words (UDP pseudo-header)

	ttl      uint8
	df       DF
	mtu      int
	guePort  uint16
	portMin  uint16
	portSpan uint64 // GUESrcPortMax - GUESrcPortMin + 1
	zeroCsum bool
}

// New checks cfg, fills in its defaults and returns the Encapsulator.
func New(cfg Config) (*Encapsulator, error) {
	e := &Encapsulator{}
	if cfg.SrcV4.IsValid() {
		a := cfg.SrcV4.Unmap()
		if !a.Is4() {
			return nil, fmt.Errorf("encap config: SrcV4 %s: not an IPv4 address: %w", cfg.SrcV4, ErrConfig)
		}
		if !IsUnicast(a) {
			return nil, fmt.Errorf("encap config: SrcV4 %s: not a unicast address: %w", cfg.SrcV4, ErrConfig)
		}
		cfg.SrcV4 = a
		e.src4, e.hasV4 = a.As4(), true
		e.src4Sum = sumBytes(e.src4[:])
	}
	if cfg.SrcV6.IsValid() {
		a := cfg.SrcV6
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("encap config: SrcV6 %s: not an IPv6 address: %w", cfg.SrcV6, ErrConfig)
		}
		if !IsUnicast(a) {
			return nil, fmt.Errorf("encap config: SrcV6 %s: not a unicast address: %w", cfg.SrcV6, ErrConfig)
		}
		if a.Zone() != "" {
			return nil, fmt.Errorf("encap config: SrcV6 %s: zoned address: %w", cfg.SrcV6, ErrConfig)
		}
		e.src6, e.hasV6 = a.As16(), true
		e.src6Sum = sumBytes(e.src6[:])
	}
	if !e.hasV4 && !e.hasV6 {
		return nil, fmt.Errorf("encap config: SrcV4 and SrcV6 both unset: need the LB's own address of at least one family: %w", ErrConfig)
	}

	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("encap config: %w", err)
	}
	switch {
	case cfg.GUESrcPortMin == 0:
		return nil, fmt.Errorf("encap config: GUESrcPortMin 0: port 0 is reserved: %w", ErrConfig)
	case cfg.GUESrcPortMin > cfg.GUESrcPortMax:
		return nil, fmt.Errorf("encap config: GUESrcPortMin %d > GUESrcPortMax %d: %w", cfg.GUESrcPortMin, cfg.GUESrcPortMax, ErrConfig)
	}

	e.cfg = cfg
	e.ttl = uint8(cfg.TTL)
	e.df = cfg.DF
	e.mtu = cfg.MTU
	e.guePort = uint16(cfg.GUEPort)
	e.portMin = cfg.GUESrcPortMin
	e.portSpan = uint64(cfg.GUESrcPortMax) - uint64(cfg.GUESrcPortMin) + 1
	e.zeroCsum = cfg.GUEZeroChecksumV6
	return e, nil
}

// Config is the configuration in effect, defaults filled in.
func (e *Encapsulator) Config() Config { return e.cfg }

// Backend is a tunnel destination resolved once, on the slow path, into the
// fixed layout the per-packet path writes (no netip work per packet). It is
// a small comparable value; the zero Backend is invalid and Encap drops
// packets sent to it (DropBadBackend).
type Backend struct {
	addr [16]byte // IPv4 in addr[:4]
	sum  uint64   // ones'-complement sum of the address's 16-bit words
	fam  uint8    // 0 (invalid), 4 or 6
}

// Backend resolves a backend address for e. An IPv4-mapped IPv6 address
// counts as IPv4. It fails when the address is not a unicast address or when
// e has no source address of its family.
func (e *Encapsulator) Backend(a netip.Addr) (Backend, error) {
	if !a.IsValid() {
		return Backend{}, fmt.Errorf("encap backend: invalid address: %w", ErrConfig)
	}
	orig := a
	a = a.Unmap()
	if !IsUnicast(a) {
		return Backend{}, fmt.Errorf("encap backend %s: not a unicast address: %w", orig, ErrConfig)
	}
	var b Backend
	if a.Is4() {
		if !e.hasV4 {
			return Backend{}, fmt.Errorf("encap backend %s: IPv4 backend but SrcV4 is not configured: %w", orig, ErrConfig)
		}
		a4 := a.As4()
		copy(b.addr[:4], a4[:])
		b.sum = sumBytes(a4[:])
		b.fam = 4
		return b, nil
	}
	if !e.hasV6 {
		return Backend{}, fmt.Errorf("encap backend %s: IPv6 backend but SrcV6 is not configured: %w", orig, ErrConfig)
	}
	b.addr = a.As16()
	b.sum = sumBytes(b.addr[:])
	b.fam = 6
	return b, nil
}

// Addr is the backend's address (the zero Addr for the zero Backend).
func (b Backend) Addr() netip.Addr {
	switch b.fam {
	case 4:
		return netip.AddrFrom4([4]byte(b.addr[:4]))
	case 6:
		return netip.AddrFrom16(b.addr)
	}
	return netip.Addr{}
}

// IsV6 reports whether the backend is reached over IPv6 (the outer family).
func (b Backend) IsV6() bool { return b.fam == 6 }

// IsUnicast reports whether a can be a tunnel endpoint (package config
// asks the same of a VIP, a gateway and the LB's addresses).
func IsUnicast(a netip.Addr) bool {
	return !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() &&
		!(a.Is4() && (a.As4()[0] >= 240 || a.As4()[0] == 0))
}
