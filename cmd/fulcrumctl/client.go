package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
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
	base  string // scheme and authority: http://127.0.0.1:9180
	addr  string // as the user gave it, for messages
	token string
	hc    *http.Client
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
	c := &client{addr: addr, token: token, hc: &http.Client{Timeout: timeout}}
	if to.set() && (strings.HasPrefix(addr, "unix:") || strings.HasPrefix(addr, "http://")) {
		return nil, fmt.Errorf("--addr %q: --ca and --insecure need an https:// or host:port address", addr)
	}
	switch {
	case strings.HasPrefix(addr, "unix:"):
		path := strings.TrimPrefix(addr, "unix:")
		if path == "" {
			return nil, fmt.Errorf("--addr %q: no socket path", addr)
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
			return nil, fmt.Errorf("--addr %q: not a URL: %v", addr, err)
		case u.Host == "" || u.Hostname() == "":
			return nil, fmt.Errorf("--addr %q: no host in the URL (want http(s)://HOST:PORT)", addr)
		case u.User != nil:
			return nil, fmt.Errorf("--addr %q: credentials in the URL: give the token with --token or FULCRUM_TOKEN", addr)
		case u.Path != "" && u.Path != "/", u.RawQuery != "", u.ForceQuery, u.Fragment != "", strings.Contains(addr, "#"):
			return nil, fmt.Errorf("--addr %q: a path, query or fragment in the URL: give only http(s)://HOST:PORT (the API's paths are fixed)", addr)
		}
		c.base = u.Scheme + "://" + u.Host
	default:
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--addr %q: not host:port, unix:/path or a URL", addr)
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
		return nil, fmt.Errorf("cannot reach the admin API at %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	raw, err := readAnswer(resp)
	if err != nil {
		return nil, fmt.Errorf("reading the answer from %s: %w", c.addr, err)
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
	return raw, nil
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
