package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
	"unicode/utf8"
)

// Prober runs one check against target and returns its round-trip time.
// It must return when ctx ends (the Checker gives it a context with the
// check's timeout). Implementations must be safe for use by one goroutine
// at a time; a Checker never calls Probe concurrently.
type Prober interface {
	Probe(ctx context.Context, target netip.AddrPort) (rtt time.Duration, err error)
}

// Kinds of check failure. Probers return *CheckError values that wrap one
// of them, so callers can tell failures apart with errors.Is.
var (
	ErrConnect = errors.New("tcp connect failed")
	ErrTimeout = errors.New("check timed out")
	ErrStatus  = errors.New("unexpected http status")
	ErrRequest = errors.New("request failed") // TLS handshake, reset, malformed response, ...
)

// CheckError is a failed check: Kind is ErrConnect, ErrTimeout, ErrStatus
// or ErrRequest, Msg the operator-facing text used as the event reason, Err
// the underlying error (may be nil).
type CheckError struct {
	Kind error
	Msg  string
	Err  error
}

func (e *CheckError) Error() string { return e.Msg }

// Unwrap returns Kind and Err, so errors.Is matches both.
func (e *CheckError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// timeoutError is the failure of a check that ran out of time.
func timeoutError(d time.Duration) error {
	return &CheckError{Kind: ErrTimeout, Msg: fmt.Sprintf("timeout after %v", d), Err: context.DeadlineExceeded}
}

// connectError names a failed connect by its cause alone ("connection
// refused"), without the dial's addresses the operator already knows.
func connectError(err error) error {
	msg := err.Error()
	var errno syscall.Errno
	var op *net.OpError
	switch {
	case errors.As(err, &errno):
		msg = errno.Error()
	case errors.As(err, &op) && op.Err != nil:
		msg = op.Err.Error()
	}
	return &CheckError{Kind: ErrConnect, Msg: "tcp connect: " + msg, Err: err}
}

// NewProber builds the prober that cfg describes.
func NewProber(cfg Config) (Prober, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return lookupKind(cfg.Kind).newProber(cfg, checkDialer().DialContext), nil // Validate found the kind
}

// NewTargetProber builds the prober of t: NewProber's, and for a check
// through the tunnel one whose connections leave from t.Tunnel.Source
// (tunnel.go).
func NewTargetProber(t Target) (Prober, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return lookupKind(t.Config.Kind).newProber(t.Config, t.dial()), nil
}

// TCPProber checks that the backend accepts a TCP connection; the round
// trip is the connect time (one SYN, SYN-ACK exchange).
type TCPProber struct {
	Dialer net.Dialer
	dial   dialFunc // instead of Dialer, when set (NewTargetProber)
}

// Probe connects to target and closes the connection.
func (p *TCPProber) Probe(ctx context.Context, target netip.AddrPort) (time.Duration, error) {
	dial := p.dial
	if dial == nil {
		d := p.Dialer
		if d.Control == nil && d.ControlContext == nil {
			d.Control = checkSocket
		}
		dial = d.DialContext
	}
	start := time.Now()
	c, err := dial(ctx, "tcp", target.String())
	if err != nil {
		return 0, connectError(err)
	}
	rtt := time.Since(start)
	// Close with a RST, as HAProxy's checks do: a close that sent a FIN
	// first would leave the 4-tuple in TIME_WAIT on the LB for a minute,
	// and Linux reuses such a tuple for a connect only toward loopback,
	// so the checks of one backend address and port could use at most
	// the ephemeral range's ports a minute.
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
	return rtt, nil
}

// UserAgent is sent by HTTP checks, so backends can tell them from traffic.
const UserAgent = "fulcrum-health/1"

// maxBody bounds what a check reads of a response body: enough for a
// health page, and a broken backend cannot make the check read forever.
const maxBody = 64 << 10

// HTTPProber sends GET Path to the backend over HTTP/1.1 (TLS for https),
// one connection per check (no keep-alive: each check exercises the connect
// path as a new flow does), and passes if the status is expected and the
// body arrives whole (up to maxBody, which is read and the rest dropped).
// Redirects are not followed: a 3xx is judged by its own code. The round
// trip is the time from the start of the connect to the response headers.
type HTTPProber struct {
	scheme, path, host string
	codes              StatusCodes
	client             *http.Client
	conns              connCloser
}

// NewHTTPProber builds an http or https prober from cfg.
func NewHTTPProber(cfg Config) (*HTTPProber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Kind != KindHTTP && cfg.Kind != KindHTTPS {
		return nil, fieldErr("kind", "%q is not an http check", cfg.Kind)
	}
	return newHTTPProber(cfg, checkDialer().DialContext), nil
}

// newHTTPProber is NewHTTPProber for a cfg that Validate accepted,
// connecting with dial.
func newHTTPProber(cfg Config, dial dialFunc) *HTTPProber {
	codes, _ := ParseStatusCodes(cfg.ExpectStatus) // Validate parsed it
	p := &HTTPProber{scheme: cfg.Kind, path: cfg.Path, host: cfg.Host, codes: codes}
	tr := &http.Transport{
		Proxy:                  nil, // never through HTTP_PROXY: the backend itself is the question
		DialContext:            p.conns.dialer(dial),
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxBody,
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: !cfg.TLSVerify, // see Config.TLSVerify
			ServerName:         serverName(cfg.Host),
			MinVersion:         tls.VersionTLS12,
		},
	}
	p.client = &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p
}

// Probe sends one request to target.
func (p *HTTPProber) Probe(ctx context.Context, target netip.AddrPort) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.scheme+"://"+target.String()+p.path, nil)
	if err != nil {
		return 0, &CheckError{Kind: ErrRequest, Msg: p.scheme + ": " + err.Error(), Err: err}
	}
	if p.host != "" {
		req.Host = p.host
	}
	req.Header.Set("User-Agent", UserAgent)
	defer p.conns.closeAll() // the transport closes in the background; the next check may need the port
	// The transport dials in a goroutine of its own under a context
	// detached from req's (so that another request could use the
	// connection): a connect to a backend that drops SYNs would outlive
	// the check by the kernel's SYN retries (about two minutes), one per
	// check, and through the tunnel hold the check's source port.
	// CloseIdleConnections cancels the dials no request waits for.
	defer p.client.CloseIdleConnections()
	start := time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, p.requestError(err)
	}
	rtt := time.Since(start)
	// The body must arrive whole (or up to maxBody): a response cut short
	// (EOF before Content-Length, a reset) or stalled until the deadline
	// fails the check, whatever its status said.
	//
	// A 101 (Switching Protocols) has no body: net/http hands over the
	// connection instead, and reading it is no longer bound by the
	// request's context, so it would block for as long as the backend
	// holds the connection. It is judged by its code alone.
	var berr error
	if resp.StatusCode != http.StatusSwitchingProtocols {
		_, berr = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	}
	resp.Body.Close()
	if !p.codes.Contains(resp.StatusCode) {
		return rtt, &CheckError{Kind: ErrStatus, Msg: fmt.Sprintf("http status %d not in %v", resp.StatusCode, p.codes)}
	}
	if berr != nil {
		// A deadline reads as a timeout: Checker.check says so.
		return 0, &CheckError{Kind: ErrRequest, Msg: fmt.Sprintf("%s: reading body after status %d: %s", p.scheme, resp.StatusCode, clip(berr.Error())), Err: berr}
	}
	return rtt, nil
}

func (p *HTTPProber) requestError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return connectError(err)
	}
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err // drop `Get "https://10.0.0.5:443/":`, the operator knows
	}
	return &CheckError{Kind: ErrRequest, Msg: p.scheme + ": " + clip(inner.Error()), Err: err}
}

// maxErrText bounds the part of a check error that the backend chooses
// (net/http quotes a malformed status line whole, up to maxBody): the
// error is kept as the backend's Reason and LastError and logged with
// every state change, so a broken or hostile health port must not put
// tens of kilobytes there.
const maxErrText = 256

// clip cuts s to maxErrText bytes (on a rune boundary) and says how long
// it was.
func clip(s string) string {
	if len(s) <= maxErrText {
		return s
	}
	n := maxErrText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:n], len(s))
}
