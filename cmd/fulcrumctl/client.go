package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// maxAnswer bounds what fulcrumctl reads from the daemon (a 1M-slot table
// is about 10 MB of JSON).
const maxAnswer = 64 << 20

// client speaks to the admin API over TCP or a unix socket.
type client struct {
	base  string // scheme and authority: http://127.0.0.1:9180
	addr  string // as the user gave it, for messages
	token string
	hc    *http.Client
}

// newClient accepts "host:port", "unix:/path", or an http(s) URL.
func newClient(addr, token string, timeout time.Duration) (*client, error) {
	c := &client{addr: addr, token: token, hc: &http.Client{Timeout: timeout}}
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
		c.base = strings.TrimSuffix(addr, "/")
	default:
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--addr %q: not host:port, unix:/path or a URL", addr)
		}
		c.base = "http://" + addr
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
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
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
		if resp.StatusCode == http.StatusUnauthorized && c.token == "" {
			ae.Error += " (set --token or FULCRUM_TOKEN)"
		}
		return nil, &apiError{resp.StatusCode, ae.Error}
	}
	return raw, nil
}
