package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// maxNameLen is the longest VIP or backend name (config.MaxNameLen).
const maxNameLen = 64

// maxSlotJSON is the most one slot of a table answer takes, but for
// escapes: a backend name of maxNameLen bytes, quoted and indented, and
// the comma and newline after it.
const maxSlotJSON = len(`    "`) + maxNameLen + len(`",`+"\n")

// maxAnswer bounds what fulcrumctl reads from the daemon. The largest
// answer is the table of a VIP of maglev.MaxSize slots (5,000,011) whose
// backends have 64-byte names: 72 bytes a slot, 360 MB. Half again on top
// leaves room for characters JSON escapes (a quote or a backslash takes 2
// bytes, <, > and & take 6); a table of that size whose names are made
// mostly of them is beyond it. An answer beyond it is refused, never cut.
const maxAnswer = maglev.MaxSize * maxSlotJSON * 3 / 2

// answerLimit is maxAnswer (tests lower it).
var answerLimit = int64(maxAnswer)

// client speaks to the admin API over TCP or a unix socket.
type client struct {
	base    string // scheme and authority: http://127.0.0.1:9180
	addr    string // as the user gave it, for messages
	token   string
	timeout time.Duration // --timeout, for messages
	hc      *http.Client
}

// tlsOptions say how fulcrumctl checks the daemon's certificate.
type tlsOptions struct {
	caFile   string // PEM certificates to trust instead of the system's
	insecure bool   // no check at all (tests, first setup)
}

func (o tlsOptions) set() bool { return o.caFile != "" || o.insecure }

// config is the TLS client configuration for o: TLS 1.2 at least, as the
// daemon requires.
func (o tlsOptions) config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.insecure}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca %s: %w", o.caFile, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no PEM certificate in the file", o.caFile)
		}
	}
	return tc, nil
}

// newClient accepts "host:port", "unix:/path", or an http(s) URL. With
// --ca or --insecure, host:port means https.
func newClient(addr, token string, timeout time.Duration, to tlsOptions) (*client, error) {
	return newClientFrom("--addr", addr, token, timeout, to)
}

// newClientFrom is newClient for an address taken from src ("--addr" or
// "FULCRUM_ADDR"), which its messages name.
func newClientFrom(src, addr, token string, timeout time.Duration, to tlsOptions) (*client, error) {
	// Never follow a redirect: the daemon sends none, and net/http would
	// replay a POST (drain) as a GET of another path, or to another host.
	c := &client{addr: addr, token: token, timeout: timeout, hc: &http.Client{Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if to.set() && (strings.HasPrefix(addr, "unix:") || strings.HasPrefix(addr, "http://")) {
		return nil, fmt.Errorf("%s %q: --ca and --insecure need an https:// or host:port address", src, addr)
	}
	switch {
	case strings.HasPrefix(addr, "unix:"):
		path := strings.TrimPrefix(addr, "unix:")
		if path == "" {
			return nil, fmt.Errorf("%s %q: no socket path", src, addr)
		}
		// The Host is "localhost" so the daemon's DNS-rebinding guard
		// accepts it whatever the transport.
		c.base = "http://localhost"
		c.hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
	case strings.HasPrefix(addr, "http://"), strings.HasPrefix(addr, "https://"):
		// Only scheme and authority: "http://" alone once made requests
		// to "http://api/v1/...", token included, to whatever host "api"
		// resolved to.
		u, err := url.Parse(addr)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s %q: not a URL: %v", src, addr, err)
		case u.Host == "" || u.Hostname() == "":
			return nil, fmt.Errorf("%s %q: no host in the URL (want http(s)://HOST:PORT)", src, addr)
		case u.User != nil:
			return nil, fmt.Errorf("%s %q: credentials in the URL: give the token with --token or FULCRUM_TOKEN", src, addr)
		case u.Path != "" && u.Path != "/", u.RawQuery != "", u.ForceQuery, u.Fragment != "", strings.Contains(addr, "#"):
			return nil, fmt.Errorf("%s %q: a path, query or fragment in the URL: give only http(s)://HOST:PORT (the API's paths are fixed)", src, addr)
		case u.Port() != "" && !validPort(u.Port()):
			return nil, fmt.Errorf("%s %q: port %q: not a number in 1..65535", src, addr, u.Port())
		}
		c.base = u.Scheme + "://" + u.Host
	default:
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%s %q: not host:port, unix:/path or a URL", src, addr)
		}
		if !validPort(port) {
			return nil, fmt.Errorf("%s %q: port %q: not a number in 1..65535", src, addr, port)
		}
		// A zone (link-local "[fe80::1%eth0]:9180", as net.Dial and the
		// daemon's listen take it) is "%25" in a URL.
		if host, port, _ := net.SplitHostPort(addr); strings.Contains(host, "%") && !strings.Contains(host, "%25") {
			addr = net.JoinHostPort(strings.Replace(host, "%", "%25", 1), port)
		}
		c.base = "http://" + addr
		if to.set() {
			c.base = "https://" + addr
		}
	}
	if strings.HasPrefix(c.base, "https://") {
		tc, err := to.config()
		if err != nil {
			return nil, err
		}
		c.hc.Transport = &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}
	}
	return c, nil
}

// validPort reports whether p is a port number fulcrumctl can dial (a
// service name such as "http-alt" is not taken).
func validPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}

// apiError is a non-2xx answer.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.msg, e.status) }

// do sends a request (body, if any, as JSON) and returns the answer's body,
// or an error carrying the API's message.
func (c *client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.reachError(err)
	}
	defer resp.Body.Close()
	raw, err := readAnswer(resp)
	if err != nil {
		if isTimeout(err) {
			return nil, c.timeoutError()
		}
		return nil, fmt.Errorf("reading the answer from %s: %w", c.addr, err)
	}
	if resp.StatusCode/100 == 3 {
		return nil, redirectError(resp)
	}
	if resp.StatusCode/100 != 2 {
		var ae api.Error
		if json.Unmarshal(raw, &ae) != nil || ae.Error == "" {
			ae.Error = strings.TrimSpace(string(raw))
			if len(ae.Error) > 200 {
				ae.Error = ae.Error[:200] + "..."
			}
		}
		ae.Error = printable(ae.Error) // the daemon's text, not escape sequences for the terminal
		if resp.StatusCode == http.StatusUnauthorized && c.token == "" {
			ae.Error += " (set --token or FULCRUM_TOKEN)"
		}
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(ae.Error, "HTTPS server") {
			ae.Error += " (the admin API speaks TLS: use --ca FILE or an https:// address)"
		}
		return nil, &apiError{resp.StatusCode, ae.Error}
	}
	// Every answer of the API is JSON: a web server answering 200 with a
	// page is not a daemon.
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, &notFulcrumError{why: fmt.Sprintf("it answered Content-Type %q, not application/json", printable(resp.Header.Get("Content-Type")))}
	}
	return raw, nil
}

// reachError is the error of a request that got no answer: the daemon
// did not answer in time, or could not be reached.
func (c *client) reachError(err error) error {
	if isTimeout(err) {
		return c.timeoutError()
	}
	return fmt.Errorf("cannot reach the admin API at %s: %w", c.addr, err)
}

// timeoutError says the daemon took longer than --timeout: it may have
// accepted the connection, so "cannot reach" would mislead.
func (c *client) timeoutError() error {
	return fmt.Errorf("the daemon at %s did not answer within --timeout %v", c.addr, c.timeout)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// redirectError is a 3xx answer: never followed (the daemon sends none;
// following would replay a POST as a GET, token included, elsewhere).
func redirectError(resp *http.Response) error {
	return &apiError{resp.StatusCode, fmt.Sprintf("redirected to %q: not followed (the admin API does not redirect; check --addr)",
		printable(resp.Header.Get("Location")))}
}

// notFulcrumError is a successful answer that is not the admin API's:
// not JSON, or without what the command needs. run fills in at.
type notFulcrumError struct{ at, why string }

func (e *notFulcrumError) Error() string {
	return fmt.Sprintf("the server at %s does not look like Fulcrum's admin API: %s", e.at, e.why)
}

// decodeAnswer decodes a successful answer into v and checks it has what
// the command needs.
func decodeAnswer(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return &notFulcrumError{why: fmt.Sprintf("its answer is not the JSON expected: %v", err)}
	}
	missing := ""
	switch v := v.(type) {
	case *api.Status:
		// A zero Status is a real answer's shape: ask for its keys.
		var keys struct{ Generation, Workers, Total json.RawMessage }
		json.Unmarshal(raw, &keys)
		if len(keys.Generation) == 0 || len(keys.Workers) == 0 || len(keys.Total) == 0 {
			missing = "generation, workers and total"
		}
	case *api.Backend:
		if v.VIP == "" || v.Name == "" {
			missing = "vip and name"
		}
	case *api.Table:
		if v.VIP == "" {
			missing = "vip"
		}
	case *api.VIP:
		if v.Name == "" {
			missing = "name"
		}
	case *[]api.VIP:
		for _, x := range *v {
			if x.Name == "" {
				missing = "a VIP's name"
			}
		}
	case *api.Lookup:
		if v.Proto == "" {
			missing = "proto"
		}
	case *api.Flush:
		if v.VIP == "" || v.Backend == "" {
			missing = "vip and backend"
		}
	case *api.Conns:
		if v.Conns == nil {
			missing = "conns"
		}
	}
	if missing != "" {
		return &notFulcrumError{why: "its answer has no " + missing}
	}
	return nil
}

// readAnswer reads a whole answer of at most answerLimit bytes: a larger
// one is an error, never a cut document.
func readAnswer(resp *http.Response) ([]byte, error) {
	limit := answerLimit
	tooLarge := fmt.Errorf("the answer is larger than %d bytes, fulcrumctl's limit: refused rather than cut", limit)
	if resp.ContentLength > limit {
		return nil, tooLarge
	}
	size := int64(bytes.MinRead)
	if resp.ContentLength > 0 {
		size += resp.ContentLength // read in place, without regrowing
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge
	}
	return buf.Bytes(), nil
}
