package conntrack

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Limits and defaults. An operator sizing a table or reading a timeout looks
// here and nowhere else.
const (
	// DefaultCapacity is the number of entries of one lcore's table: the
	// brief's target of 1M flows per core, 65 MiB (64-byte entries and
	// 1-byte signatures).
	DefaultCapacity = 1 << 20

	// MaxCapacity bounds Capacity at 2^27 entries (8.25 GiB for one lcore):
	// beyond it a value is a typo, not a plan. It also keeps every slot
	// index within an int32.
	MaxCapacity = 1 << 27

	// DefaultTCPEstablishedTimeout is the idle timeout of an established TCP
	// flow. Linux nf_conntrack keeps established flows 5 days
	// (nf_conntrack_tcp_timeout_established = 432000) and IPVS 15 minutes
	// (IP_VS_TCP_S_ESTABLISHED = 15*60), but both see both directions and
	// the FIN that ends a connection; under DSR the LB never sees the
	// server's close, so its entries end by idling out. 300 s is shorter
	// than TCP keepalive's first probe (2 h on Linux), so a long-idle flow
	// loses its pin and is routed by Maglev again, which is the same
	// backend unless the backend set changed meanwhile; under a load-based
	// scheduler it is another backend for most flows, and the connection
	// breaks (README, "Choosing a scheduler": raise it above the clients'
	// keepalive there).
	DefaultTCPEstablishedTimeout = 300 * time.Second

	// DefaultTCPNewTimeout is the idle timeout of a new (SYN-seen) entry.
	// Linux uses 120 s for SYN_SENT and IPVS 60 s for SYN_RECV, timing a
	// handshake they watch complete; here a new entry is the currency of a
	// SYN flood, so it is kept short. A client retransmits its SYN 1, 3, 7
	// and 15 s after the first (1 s initial RTO, RFC 6298, doubled each
	// time): every gap up to the fourth retransmission is under 10 s, and
	// each retransmission refreshes the entry.
	DefaultTCPNewTimeout = 10 * time.Second

	// DefaultTCPClosingTimeout is the idle timeout after a FIN or RST. A
	// FIN ends only the client's half: the server may go on sending for
	// as long as it likes, and the client's ACKs of it must keep reaching
	// the same backend, even after the server pauses. Linux's
	// nf_conntrack keeps FIN_WAIT and TIME_WAIT 120 s, and IPVS its
	// FIN_WAIT 120 s. (Both use 10 s after an RST, their CLOSE state; one
	// timeout serves both here, and a closing entry is the first a full
	// bucket gives up, so the longer one costs occupancy, not room for
	// new flows.) At 10 s, a half-closed download whose server paused
	// longer went, under a load-based scheduler, to another backend.
	DefaultTCPClosingTimeout = 120 * time.Second

	// DefaultOtherTimeout is the idle timeout of UDP and other protocols:
	// Linux nf_conntrack_udp_timeout is 30 s and Katran expires UDP flows
	// after the same 30 s (LRU_UDP_TIMEOUT).
	DefaultOtherTimeout = 30 * time.Second

	// MaxTimeout bounds every timeout at 7 days, well inside the 24.8 days
	// (2^31 ms) that idle times can express; a longer idle pin is not
	// useful.
	MaxTimeout = 7 * 24 * time.Hour

	// Resolution is the unit of Time: timeouts are truncated to it and must
	// be at least one unit.
	Resolution = time.Millisecond

	// MaxBurst is the most packets LookupBurst resolves in one pass; longer
	// slices are taken MaxBurst at a time. DPDK bursts are usually 32. It
	// is the fast path's one burst limit: dataplane.MaxBurst, dpdk.MaxBurst
	// and the config's dataplane.burst bound are this constant.
	MaxBurst = 64

	// DefaultBurst is DPDK's customary burst (testpmd, the samples): large
	// enough to amortise the per-call cost (one cgo call), small enough
	// that a burst's mbufs and headers stay in L1. The one definition:
	// dpdk.DefaultBurst and the config's dataplane.burst default are it.
	DefaultBurst = 32

	// MaxVIPs bounds the VIP ids an entry carries (Entry.VIP is 16 bits;
	// the dataplane's per-VIP counters are sized by it, so it is modest).
	// The one definition: dataplane.MaxVIPs and the config's check of the
	// number of [[vip]] are it.
	MaxVIPs = 4096

	// MaxBackends bounds the backend ids across all VIPs, which entries
	// carry and Config.Backends counts; per-backend counters cost 16 bytes
	// per id per worker. dataplane.MaxBackends and the config's check of
	// the number of [[vip.backend]] are it.
	MaxBackends = 65536
)

// MaxBurst is a power of two: the burst passes index their arrays with
// i&(MaxBurst-1), which the compiler knows is in bounds.
var _ = [1]int{}[MaxBurst&(MaxBurst-1)]

// ErrConfig is wrapped by every error New returns for a bad Config.
var ErrConfig = errors.New("invalid conntrack config")

// Config sets a table's size and idle timeouts. The zero Config is not
// valid: start from DefaultConfig, or fill the zero fields WithDefaults.
// It is also the [conntrack] section of the configuration file, which
// package config decodes into it: the toml tags are the keys.
type Config struct {
	// Capacity is the number of entries, at least 1 and at most
	// MaxCapacity. It is rounded up to a power-of-two number of 8-entry
	// buckets, so a power of two wastes nothing.
	Capacity int `toml:"capacity"`

	// Idle timeouts per state: an entry whose last packet is older than its
	// state's timeout is expired, reclaimed first and never returned.
	TCPNewTimeout         time.Duration `toml:"tcp_syn"`
	TCPEstablishedTimeout time.Duration `toml:"tcp_established"`
	TCPClosingTimeout     time.Duration `toml:"tcp_closing"`
	OtherTimeout          time.Duration `toml:"udp"` // UDP and every other protocol

	// Backends, when positive, makes the table keep a count of its entries
	// per backend id (ids 0..Backends-1): the load signal of the
	// least-loaded schedulers, kept exact at one increment per insert and
	// one decrement per removal. Entries of larger ids are not counted.
	// The dataplane sets it; it is not a configuration key.
	Backends int `toml:"-"`

	// Memory, when set, provides the table's memory (entries and
	// signatures, Bytes() in all, in two calls): the DPDK engine passes
	// the EAL's hugepage heap when the EAL runs on hugepages. It must
	// return zeroed memory of n bytes aligned to 64, which the table uses
	// for its whole life and holds no Go pointers in. When it fails, New
	// fails. nil: the Go heap, with transparent huge pages asked for.
	// The dataplane sets it; it is not a configuration key.
	Memory func(n uintptr) (unsafe.Pointer, error) `toml:"-"`
}

// DefaultConfig is the configuration an operator gets by saying nothing.
func DefaultConfig() Config {
	return Config{
		Capacity:              DefaultCapacity,
		TCPNewTimeout:         DefaultTCPNewTimeout,
		TCPEstablishedTimeout: DefaultTCPEstablishedTimeout,
		TCPClosingTimeout:     DefaultTCPClosingTimeout,
		OtherTimeout:          DefaultOtherTimeout,
	}
}

// WithDefaults is c with every zero field (a key the file leaves out)
// taken from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	for _, f := range []struct{ v, def *time.Duration }{
		{&c.TCPNewTimeout, &d.TCPNewTimeout},
		{&c.TCPEstablishedTimeout, &d.TCPEstablishedTimeout},
		{&c.TCPClosingTimeout, &d.TCPClosingTimeout},
		{&c.OtherTimeout, &d.OtherTimeout},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if c.Capacity == 0 {
		c.Capacity = d.Capacity
	}
	return c
}

// FieldError is a problem of one Config field. Key is the field's
// configuration key ("udp"), so that the config loader can point at its
// line; Error names the field.
type FieldError struct {
	Key string
	msg string
}

func (e *FieldError) Error() string { return e.msg }

// Unwrap makes errors.Is(err, ErrConfig) hold.
func (e *FieldError) Unwrap() error { return ErrConfig }

// Validate reports every problem in c, each a *FieldError naming the
// field (errors.Join of them).
func (c Config) Validate() error {
	var errs []error
	if c.Capacity < 1 || c.Capacity > MaxCapacity {
		errs = append(errs, &FieldError{"capacity", fmt.Sprintf("%v: Capacity %d: must be between 1 and %d entries", ErrConfig, c.Capacity, MaxCapacity)})
	}
	timeouts := [...]struct {
		key, name string
		d         time.Duration
	}{
		{"tcp_syn", "TCPNewTimeout", c.TCPNewTimeout},
		{"tcp_established", "TCPEstablishedTimeout", c.TCPEstablishedTimeout},
		{"tcp_closing", "TCPClosingTimeout", c.TCPClosingTimeout},
		{"udp", "OtherTimeout", c.OtherTimeout},
	}
	for _, t := range timeouts {
		if t.d < Resolution || t.d > MaxTimeout {
			errs = append(errs, &FieldError{t.key, fmt.Sprintf("%v: %s %v: must be between %v and %v", ErrConfig, t.name, t.d, Resolution, MaxTimeout)})
		}
	}
	return errors.Join(errs...)
}

// timeouts converts the validated timeouts to Time units, indexed by State.
func (c Config) timeouts() [numStates]int32 {
	var t [numStates]int32
	t[StateNew] = int32(c.TCPNewTimeout / Resolution)
	t[StateEstablished] = int32(c.TCPEstablishedTimeout / Resolution)
	t[StateClosing] = int32(c.TCPClosingTimeout / Resolution)
	t[StateOther] = int32(c.OtherTimeout / Resolution)
	return t
}
