package health

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Defaults. Where a number comes from is said beside it.
const (
	DefaultKind         = KindTCP
	DefaultPath         = "/"
	DefaultExpectStatus = "200-399"        // HAProxy's httpchk: 2xx and 3xx pass
	DefaultInterval     = 2 * time.Second  // HAProxy's "inter" default
	DefaultTimeout      = 1 * time.Second  // half the interval: a check ends before the next starts
	DefaultRise         = 2                // HAProxy's "rise" default
	DefaultFall         = 3                // HAProxy's "fall" default
	DefaultJitter       = 0.1              // ±10% per delay: enough to spread a fleet's checks
	DefaultBackoffBase  = 10 * time.Second // first flapping ejection
	DefaultBackoffMax   = 5 * time.Minute  // Envoy's max_ejection_time default (300 s)
	DefaultThrough      = ThroughDirect    // until the lab has proven the tunnel mode everywhere
)

// Paths a check can take (Config.Through).
const (
	// ThroughDirect connects to the backend's own address: it proves the
	// service listens.
	ThroughDirect = "direct"
	// ThroughTunnel connects to the VIP from the LB's address, and the
	// dataplane encapsulates the connection to one chosen backend exactly
	// as client traffic (Maglev, GLB): it proves the backend decapsulates
	// the tunnel and answers for the VIP. See Tunnel.
	ThroughTunnel = "tunnel"
)

// The source ports of checks through the tunnel: one per checked backend,
// over all VIPs, so that the dataplane can tell which backend a check
// packet from the kernel is for (package dataplane keeps the same values,
// HealthPortBase and HealthSlots, and tests that they agree). The range
// begins just above Linux's default ephemeral ports (32768-60999).
const (
	TunnelPortBase = 61000
	TunnelSlots    = 4096 // ports TunnelPortBase..TunnelPortBase+TunnelSlots-1
)

// Limits. Values outside them are typos, not plans.
const (
	MinInterval = 10 * time.Millisecond
	MaxInterval = time.Hour
	MaxRiseFall = 100
	MaxJitter   = 0.5 // beyond, two checks could start almost together
	// MaxBackoff caps BackoffMax: an hour-long ejection of a backend that
	// flapped is already more than any operator waits for.
	MaxBackoff = time.Hour
)

// Config says how to check one backend. Start from DefaultConfig and
// overwrite what the operator set; Validate rejects every zero duration and
// count, so a zero value is never silently used. It is also what a
// [health] or [vip.health] section says: package config decodes the
// section into it, and the toml tags are the keys (package config adds the
// kind "none" and the passive checks).
type Config struct {
	// Kind is the check, one of Kinds: "tcp", "http", "https".
	Kind string `toml:"kind"`
	// Port is the port checked; 0 means the backend's service port (the
	// port of Target.Addr).
	Port int `toml:"port"`
	// Path is the request target of http and https checks; it starts with
	// "/" and may carry a query, but no fragment ('#').
	Path string `toml:"path"`
	// Host is the Host header (and TLS server name) of http and https
	// checks; empty means the backend's address.
	Host string `toml:"host"`
	// ExpectStatus lists the status codes that pass, as ranges and single
	// codes: "200-299,301".
	ExpectStatus string `toml:"expect"`
	// Interval is the time from the start of one check to the start of the
	// next, before jitter.
	Interval time.Duration `toml:"interval"`
	// Timeout bounds one check (connect, TLS, request, response headers
	// and body); it must be shorter than Interval.
	Timeout time.Duration `toml:"timeout"`
	// Rise is the number of consecutive passing checks that take a
	// backend Up.
	Rise int `toml:"rise"`
	// Fall is the number of consecutive failing checks that take a
	// backend Down.
	Fall int `toml:"fall"`
	// Jitter randomises each delay between checks by ±Jitter×Interval
	// (0 disables; at most 0.5).
	Jitter float64 `toml:"jitter"`
	// TLSVerify makes https checks verify the backend's certificate
	// against the system roots and Host (or the backend's IP). The
	// default, false, skips verification: backends are addressed by IP,
	// rarely hold certificates for their IPs, and the check asks whether
	// the server answers, not who it is. Not a configuration key.
	TLSVerify bool `toml:"-"`
	// StartUp makes a new backend start Up instead of Unknown (HAProxy's
	// "init-state up"); its first failing check takes it Down. Not a
	// configuration key.
	StartUp bool `toml:"-"`
	// FlapWindow is a number of checks: a backend that goes Down fewer
	// than FlapWindow checks after it came Up has flapped, and one that
	// stays Up for FlapWindow checks is forgiven its past flaps; 0 means
	// DefaultFlapWindow, otherwise MinFlapWindow..MaxFlapWindow. Counted in
	// checks, not derived from Rise and Fall, so that any flap whose period
	// is shorter than the window is damped: the old window,
	// 2×(Rise+Fall)×Interval, was 1.6 s in the lab and never caught a 2 s
	// flap.
	FlapWindow int `toml:"flap_window"`
	// BackoffBase is the first flapping ejection; each further one doubles
	// it.
	BackoffBase time.Duration `toml:"flap_backoff"`
	// BackoffMax caps the ejection time.
	BackoffMax time.Duration `toml:"flap_backoff_max"`
	// Through is the path of the check: ThroughDirect (to the backend's
	// address; "" means the same) or ThroughTunnel (to the VIP, through
	// the dataplane's tunnel to the backend; Target.Tunnel says from
	// where).
	Through string `toml:"through"`
}

// DefaultConfig returns a TCP check with every default filled in.
func DefaultConfig() Config {
	return Config{
		Kind:         DefaultKind,
		Path:         DefaultPath,
		ExpectStatus: DefaultExpectStatus,
		Interval:     DefaultInterval,
		Timeout:      DefaultTimeout,
		Rise:         DefaultRise,
		Fall:         DefaultFall,
		Jitter:       DefaultJitter,
		BackoffBase:  DefaultBackoffBase,
		BackoffMax:   DefaultBackoffMax,
		Through:      DefaultThrough,
	}
}

// ErrConfig is wrapped by every validation error.
var ErrConfig = errors.New("invalid health check configuration")

// ConfigError is a validation error of one Config field. Field is the
// configuration key ("interval", "expect", ...), so that the config
// loader can point at the line.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrConfig) hold.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func fieldErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks every field and returns the first problem, as a
// *ConfigError that wraps ErrConfig. Path, Host and ExpectStatus are checked
// only for the kinds that send a request (http and https), which use them.
func (c Config) Validate() error {
	k := lookupKind(c.Kind)
	if k == nil {
		return fieldErr("kind", "%q is not one of %s", c.Kind, kindList())
	}
	if c.Port < 0 || c.Port > 65535 {
		return fieldErr("port", "%d is outside 0..65535 (0: the backend's port)", c.Port)
	}
	if k.request {
		if err := checkPath(c.Path); err != nil {
			return fieldErr("path", "%q %v", c.Path, err)
		}
		if err := checkHost(c.Host); err != nil {
			return fieldErr("host", "%q %v", c.Host, err)
		}
		if _, err := ParseStatusCodes(c.ExpectStatus); err != nil {
			return fieldErr("expect", "%v", err)
		}
	}
	if c.Interval < MinInterval || c.Interval > MaxInterval {
		return fieldErr("interval", "%v is outside %v..%v", c.Interval, MinInterval, MaxInterval)
	}
	if c.Timeout <= 0 || c.Timeout >= c.Interval {
		return fieldErr("timeout", "%v must be positive and shorter than the interval (%v)", c.Timeout, c.Interval)
	}
	if c.Rise < 1 || c.Rise > MaxRiseFall {
		return fieldErr("rise", "%d is outside 1..%d", c.Rise, MaxRiseFall)
	}
	if c.Fall < 1 || c.Fall > MaxRiseFall {
		return fieldErr("fall", "%d is outside 1..%d", c.Fall, MaxRiseFall)
	}
	if !(c.Jitter >= 0 && c.Jitter <= MaxJitter) { // also rejects NaN
		return fieldErr("jitter", "%v is outside 0..%v", c.Jitter, MaxJitter)
	}
	if c.FlapWindow != 0 && (c.FlapWindow < MinFlapWindow || c.FlapWindow > MaxFlapWindow) {
		return fieldErr("flap_window", "%d is outside %d..%d checks (0: %d)", c.FlapWindow, MinFlapWindow, MaxFlapWindow, DefaultFlapWindow)
	}
	if c.BackoffBase <= 0 || c.BackoffBase > MaxBackoff {
		return fieldErr("flap_backoff", "%v is outside (0, %v]", c.BackoffBase, MaxBackoff)
	}
	if c.BackoffMax < c.BackoffBase || c.BackoffMax > MaxBackoff {
		return fieldErr("flap_backoff_max", "%v is outside backoff_base (%v)..%v", c.BackoffMax, c.BackoffBase, MaxBackoff)
	}
	if c.Through != "" && c.Through != ThroughDirect && c.Through != ThroughTunnel {
		return fieldErr("through", "%q is not %s or %s", c.Through, ThroughDirect, ThroughTunnel)
	}
	return nil
}

// Flap window, in checks (Config.FlapWindow). The default, 20 checks, is
// 4 s at the lab's 200 ms interval (a 2 s flap is caught) and 40 s at the
// default 2 s interval. They are flap_window's default and limits in the
// configuration file too (package config asks Validate).
const (
	DefaultFlapWindow = 20
	MinFlapWindow     = 2
	MaxFlapWindow     = 1000
)

// Tunnelled reports whether checks go through the tunnel.
func (c Config) Tunnelled() bool { return c.Through == ThroughTunnel }

// EffectiveFlapWindow is FlapWindow, or DefaultFlapWindow when it is 0, in
// checks.
func (c Config) EffectiveFlapWindow() int {
	if c.FlapWindow > 0 {
		return c.FlapWindow
	}
	return DefaultFlapWindow
}

// Longest path and Host a check sends: servers refuse longer request
// lines (nginx's default buffer is 8 KiB for a whole header line, Apache's
// LimitRequestLine 8190 bytes), and a DNS name is at most 253 bytes.
const (
	MaxPathLen = 4096
	MaxHostLen = 253
)

func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New("must start with /")
	}
	if len(p) > MaxPathLen {
		return fmt.Errorf("is %d bytes long, longer than %d", len(p), MaxPathLen)
	}
	if strings.ContainsFunc(p, isSpaceOrControl) {
		return errors.New("must not contain spaces or control characters")
	}
	if strings.Contains(p, "#") {
		return errors.New("must not contain '#' (a fragment is never sent to the backend; write %23 for a literal #)")
	}
	if _, err := url.ParseRequestURI(p); err != nil {
		return errors.New("is not a request path")
	}
	// The client percent-encodes the path but sends the query as
	// written, and raw non-ASCII bytes are not allowed in a request line.
	if _, q, ok := strings.Cut(p, "?"); ok && strings.ContainsFunc(q, func(r rune) bool { return r >= utf8.RuneSelf }) {
		return errors.New("has non-ASCII characters in its query, which would be sent as raw bytes: percent-encode them (%C3%A9 for \u00e9)")
	}
	return nil
}

func checkHost(h string) error {
	if h == "" {
		return nil
	}
	// Beyond ASCII, what is not a visible character (a line separator,
	// a bidi control, a zero-width or wide space) would be punycoded
	// into a name the operator never wrote.
	if strings.ContainsFunc(h, func(r rune) bool {
		return isSpaceOrControl(r) || r >= utf8.RuneSelf && (!unicode.IsGraphic(r) || unicode.IsSpace(r))
	}) || strings.ContainsAny(h, "/?#@") {
		return errors.New("is not a host name (no spaces, invisible characters, '/', '?', '#' or '@')")
	}
	name := h
	if n, _, err := net.SplitHostPort(h); err == nil {
		name = n
	}
	if len(name) > MaxHostLen {
		return fmt.Errorf("is %d bytes long before its port, longer than a DNS name's %d", len(name), MaxHostLen)
	}
	if _, err := url.Parse("http://" + h + "/"); err != nil {
		return errors.New("is not a host[:port]")
	}
	return nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// serverName is the TLS server name for a Host header value: the host
// without its port.
//
// A non-ASCII name is punycoded as net/http does for the Host header (SNI
// carries A-labels only), so that both name the same host.
func serverName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if a, err := idna.ToASCII(host); err == nil {
		return a
	}
	return host
}

// StatusRange is an inclusive range of HTTP status codes.
type StatusRange struct{ Lo, Hi int }

// StatusCodes is a set of HTTP status codes, as ranges.
type StatusCodes []StatusRange

// ParseStatusCodes parses "200-299,301": comma-separated codes and
// inclusive ranges, each within 100..599.
func ParseStatusCodes(s string) (StatusCodes, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no status codes (e.g. \"200-399\")")
	}
	var sc StatusCodes
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q is not a status code or range (e.g. \"200-299\")", part)
		}
		if a < 100 || b > 599 || a > b {
			return nil, fmt.Errorf("%q is not an ascending range within 100..599", part)
		}
		sc = append(sc, StatusRange{a, b})
	}
	return sc, nil
}

// Contains reports whether code is in the set.
func (sc StatusCodes) Contains(code int) bool {
	for _, r := range sc {
		if code >= r.Lo && code <= r.Hi {
			return true
		}
	}
	return false
}

// String formats the set as ParseStatusCodes reads it.
func (sc StatusCodes) String() string {
	var b strings.Builder
	for i, r := range sc {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.Lo))
		if r.Hi != r.Lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.Hi))
		}
	}
	return b.String()
}

// jitterDelay is the delay from one check's start to the next: interval
// scaled by 1 + jitter×(2r−1), so with r uniform in [0,1) it is uniform in
// [interval×(1−jitter), interval×(1+jitter)).
func jitterDelay(interval time.Duration, jitter, r float64) time.Duration {
	return interval + time.Duration(float64(interval)*jitter*(2*r-1))
}

// firstDelay is the delay before a new checker's first check: uniform in
// [0, jitter×interval), so a config load does not fire every check at once,
// and a new backend is still checked almost at once.
func firstDelay(interval time.Duration, jitter, r float64) time.Duration {
	return time.Duration(float64(interval) * jitter * r)
}
