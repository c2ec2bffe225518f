package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
)

// serveOn serves srv on ln until the test ends.
func serveOn(t *testing.T, srv *admin.Server, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// startTimed serves a fresh plane's API as ac says, with the given header
// timeout and 5 s for the rest, and returns the server and its address.
func startTimed(t *testing.T, ac config.Admin, headerTimeout time.Duration) (*admin.Server, string) {
	t.Helper()
	p := admintest.New(t, admintest.Config)
	srv := admin.New(p.Plane, ac, "", nil)
	srv.SetTimeouts(headerTimeout, 5*time.Second, 5*time.Second, 5*time.Second)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	return srv, ln.Addr().String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// closedByPeer reports whether the server closed c: a read ends with EOF
// or a reset rather than the deadline.
func closedByPeer(c net.Conn, within time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(within))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestConnectionLimit(t *testing.T) {
	const max, extra = 8, 5
	// Silent peers are closed after the header timeout; long enough that
	// none is closed before the refusals are counted.
	const headerTimeout = 2 * time.Second
	srv, addr := startTimed(t, config.Admin{Listen: "127.0.0.1:0", MaxConns: max}, headerTimeout)

	// max+extra peers connect and send nothing (the attack, scaled down).
	var conns []net.Conn
	for range max + extra {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	waitFor(t, "the listener did not accept or refuse every connection", 5*time.Second, func() bool {
		st := srv.Conns()
		if st.Open > max {
			t.Fatalf("%d connections open, max_conns %d", st.Open, max)
		}
		return st.Refused == extra
	})
	if st := srv.Conns(); st.Open != max || st.Refused != extra {
		t.Fatalf("open %d refused %d, want %d and %d", st.Open, st.Refused, max, extra)
	}
	// The refused ones are closed now, long before the header timeout.
	closed := 0
	for _, c := range conns {
		if closedByPeer(c, 50*time.Millisecond) {
			closed++
		}
	}
	if closed != extra {
		t.Errorf("%d connections closed by the server at once, want the %d beyond max_conns", closed, extra)
	}
	// The silent peers are closed after the header timeout, freeing every
	// slot.
	waitFor(t, "silent connections were not closed after the header timeout", headerTimeout+5*time.Second, func() bool {
		return srv.Conns().Open == 0
	})
	for i, c := range conns {
		if !closedByPeer(c, time.Second) {
			t.Errorf("connection %d is still open", i)
		}
	}
	// A normal request is served again.
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + addr + api.StatusPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status after the flood: %d", resp.StatusCode)
	}
	hc.CloseIdleConnections()
	waitFor(t, "the client's connection did not give its slot back", 5*time.Second, func() bool {
		return srv.Conns().Open == 0
	})
}

// A peer that trickles its request header one byte at a time (slowloris)
// is cut off at the header timeout, however busy it looks.
func TestSlowHeaderIsCut(t *testing.T) {
	const headerTimeout = 300 * time.Millisecond
	srv, addr := startTimed(t, loopback(), headerTimeout)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	hdr := []byte("GET " + api.StatusPath + " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
	var werr error
	for i := 0; werr == nil && time.Since(start) < 10*time.Second; i++ {
		_, werr = c.Write(hdr[i%len(hdr) : i%len(hdr)+1])
		if werr == nil && closedByPeer(c, 20*time.Millisecond) {
			break
		}
	}
	// The deadline runs from the first byte of the header, whatever
	// follows; 2 s of slack for a loaded machine.
	if el := time.Since(start); el >= headerTimeout+2*time.Second {
		t.Fatalf("a trickling header kept its connection for %v (header timeout %v)", el, headerTimeout)
	}
	waitFor(t, "the slot was not given back", 5*time.Second, func() bool { return srv.Conns().Open == 0 })
}

// endpoints are one call of every class: reads, the table, a lookup,
// metrics, a mutation, and an unknown path.
var endpoints = []struct{ method, path string }{
	{"GET", api.StatusPath},
	{"GET", api.VIPsPath},
	{"GET", api.VIPsPath + "/web"},
	{"GET", api.VIPsPath + "/web/backends/be1"},
	{"GET", api.VIPsPath + "/web/table"},
	{"GET", api.LookupPath + "?src=198.51.100.1&dst=203.0.113.7&sport=4000&dport=80&proto=tcp"},
	{"GET", api.MetricsPath},
	{"POST", api.ActionPath("web", "be1", api.ActionUndrain)},
}

func TestTokenOnEveryEndpointOffLoopback(t *testing.T) {
	const token = "0123456789abcdef-admin"
	p := admintest.New(t, admintest.Config)
	// Configured as a network listener; bound, for the test, on loopback.
	srv := admin.New(p.Plane, config.Admin{Listen: "192.0.2.10:9180", Token: token}, "", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	e := &env{t: t, plane: p, srv: srv, base: "http://" + ln.Addr().String(), hc: &http.Client{Timeout: 20 * time.Second}}
	for _, ep := range endpoints {
		for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong-0123456789abcdef"}, {"Authorization", "Bearer " + token[:len(token)-1]}} {
			code, b := e.call(ep.method, ep.path, "", hdr...)
			if code != http.StatusUnauthorized {
				t.Errorf("%s %s with %q off loopback: %d %.80s, want 401", ep.method, ep.path, hdr, code, b)
			}
		}
		if code, b := e.call(ep.method, ep.path, "", "Authorization", "Bearer "+token); code != http.StatusOK {
			t.Errorf("%s %s with the token: %d %.80s", ep.method, ep.path, code, b)
		}
	}
	if code, _ := e.call("GET", "/nope", ""); code != http.StatusUnauthorized {
		t.Errorf("unknown path without the token: %d, want 401 (no probing)", code)
	}
	// A refused peer does not keep its connection (and its slot).
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET "+api.StatusPath+" HTTP/1.1\r\nHost: 192.0.2.10\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 401 || !resp.Close {
		t.Errorf("401 off loopback: status %d, Connection: close %v", resp.StatusCode, resp.Close)
	}
	if !closedByPeer(c, 5*time.Second) {
		t.Error("the connection stayed open after a 401 off loopback")
	}

	// Fails closed: a network listener served without any token refuses all.
	srv = admin.New(p.Plane, config.Admin{Listen: "0.0.0.0:9180"}, "", nil)
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	e.base = "http://" + ln.Addr().String()
	if code, _ := e.call("GET", api.StatusPath, ""); code != http.StatusUnauthorized {
		t.Errorf("tokenless network listener: %d, want 401", code)
	}
}

// Loopback and unix listeners keep their behaviour: reads open, mutations
// need the token when one is set.
func TestTokenOnLoopbackForMutationsOnly(t *testing.T) {
	const token = "0123456789abcdef-admin"
	dir, err := os.MkdirTemp("", "fulcrum-admin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, listen := range []string{"127.0.0.1:0", "unix:" + filepath.Join(dir, "a.sock")} {
		e := start(t, admintest.Config, config.Admin{Listen: listen, Token: token})
		for _, ep := range endpoints {
			want := http.StatusOK
			if ep.method == "POST" {
				want = http.StatusUnauthorized
			}
			if code, b := e.call(ep.method, ep.path, ""); code != want {
				t.Errorf("%s: %s %s without a token: %d %.80s, want %d", listen, ep.method, ep.path, code, b, want)
			}
			if code, b := e.call(ep.method, ep.path, "", "Authorization", "Bearer "+token); code != http.StatusOK {
				t.Errorf("%s: %s %s with the token: %d %.80s", listen, ep.method, ep.path, code, b)
			}
		}
	}
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := admintest.SelfSigned(t, t.TempDir())
	p := admintest.New(t, admintest.Config)
	srv := admin.New(p.Plane, config.Admin{Listen: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile}, "", nil)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	addr := ln.Addr().String()

	trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := trusting.Get("https://" + addr + api.StatusPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 || resp.ProtoMajor != 1 {
		t.Fatalf("https: status %d, tls %v, proto %s", resp.StatusCode, resp.TLS != nil, resp.Proto)
	}
	trusting.CloseIdleConnections()

	// A client that does not trust the certificate, plain HTTP, and
	// TLS 1.1 are refused.
	if _, err := (&http.Client{Timeout: 10 * time.Second}).Get("https://" + addr + api.StatusPath); err == nil {
		t.Error("a client without the CA got an answer")
	}
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + api.StatusPath); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP to the TLS port got 200")
		}
	}
	old := &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10}
	if c, err := tls.Dial("tcp", addr, old); err == nil {
		c.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}

	// A bad key pair stops Listen, naming the files.
	srv = admin.New(p.Plane, config.Admin{Listen: "127.0.0.1:0", TLSCert: keyFile, TLSKey: certFile}, "", nil)
	if _, err := srv.Listen(); err == nil || !strings.Contains(err.Error(), certFile) || !strings.Contains(err.Error(), keyFile) {
		t.Errorf("Listen with swapped cert and key: %v", err)
	}
}

// A certificate renewed in place (new files at the same tls_cert and
// tls_key paths) is served from the next reload on: a reload that took
// the config and kept serving the old certificate would let it expire
// under an operator who did everything right. A reload whose new pair
// does not match keeps the running configuration and certificate.
func TestTLSCertificateRenewedOnReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := admintest.SelfSigned(t, dir)
	p := admintest.New(t, admintest.Config+fmt.Sprintf("\n[admin]\nlisten = \"127.0.0.1:0\"\ntls_cert = %q\ntls_key = %q\n", certFile, keyFile))
	srv := admin.New(p.Plane, p.Config().Admin, p.File, nil)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	served := func() []byte {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	derOf := func(file string) []byte {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		return blk.Bytes
	}
	if !bytes.Equal(served(), derOf(certFile)) {
		t.Fatal("not serving the configured certificate")
	}
	// Renew: a new pair written over the old files, then a reload.
	newCert, newKey, _ := admintest.SelfSigned(t, t.TempDir())
	for _, f := range [][2]string{{newCert, certFile}, {newKey, keyFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Reload(p.File); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served(), derOf(newCert)) {
		t.Error("after the reload: still serving the old certificate")
	}
	// A key that is not the certificate's: the reload is refused, and the
	// renewed certificate stays.
	_, otherKey, _ := admintest.SelfSigned(t, t.TempDir())
	b, err := os.ReadFile(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(p.File); err == nil {
		t.Error("a reload with a mismatched key pair was taken")
	}
	if !bytes.Equal(served(), derOf(newCert)) {
		t.Error("after a refused reload: not serving the renewed certificate")
	}
}
