package health

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

func v6Server(t *testing.T) (netip.AddrPort, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	var mu sync.Mutex
	var hosts []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		w.WriteHeader(200)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return netip.MustParseAddrPort(ln.Addr().String()), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), hosts...)
	}
}

// An HTTP check of an IPv6 backend with the default host sends the
// bracketed literal with its port and passes.
func TestV6OnlyProbeHTTPCheckIPv6DefaultHost(t *testing.T) {
	ap, hosts := v6Server(t)
	cfg := DefaultConfig()
	cfg.Kind, cfg.Path = KindHTTP, "/"
	p, err := NewHTTPProber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.Probe(ctx, ap); err != nil {
		t.Fatalf("check of %v: %v", ap, err)
	}
	if h := hosts(); len(h) != 1 || h[0] != ap.String() {
		t.Errorf("Host headers %q, want [%q]", h, ap.String())
	}
}

// host = "2001:db8::5" (an IPv6 literal without brackets) is no valid
// Host header (RFC 9110 §7.2 / RFC 3986 §3.2.2: an IP literal is
// bracketed); it must be refused, or sent bracketed.
func TestV6OnlyProbeHTTPHostIPv6Unbracketed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kind, cfg.Path, cfg.Host = KindHTTP, "/", "2001:db8::5"
	if cfg.Validate() != nil {
		return // refused: fine
	}
	ap, hosts := v6Server(t)
	p, err := NewHTTPProber(cfg)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.Probe(ctx, ap)
	h := hosts()
	if len(h) != 1 || !strings.HasPrefix(h[0], "[") {
		t.Errorf("host %q accepted and sent as Host %q (unbracketed IPv6 literal)", cfg.Host, h)
	}
}
