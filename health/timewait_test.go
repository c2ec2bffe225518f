package health

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A check that closes its connection with a FIN leaves the connection's
// 4-tuple on the LB for 60 s: in TIME_WAIT when it closed first and the
// backend closed after, in FIN_WAIT2 when the backend holds its end (an
// HTTP/1.1 endpoint that keeps the connection despite the check's
// "Connection: close": a proxy in front, an embedded server). Linux reuses
// such a tuple for a new connect only toward loopback (tcp_tw_reuse = 2,
// the default), so toward a real backend the checks of one address and
// port may use at most ip_local_port_range's ports a minute (28,232 by
// default: 470 checks a second, e.g. 47 VIPs of different check paths on
// one health port every 100 ms). Past that every connect fails with
// EADDRNOTAVAIL and a healthy backend is called down. HAProxy closes its
// checks with a RST for this reason; every check here does too: the tcp
// check itself (probe.go), the http(s) checks in the transport's dialer
// (tunnel.go; the transport closes the connection once the body is read,
// before the check could).
//
// The test runs itself in a network namespace of its own (unshare -n),
// where it checks servers on non-loopback addresses (10.199.0.N on lo)
// with the namespace's port range cut to 64 ports, so that the limit is
// reached after 64 checks instead of 28,232.
func TestCheckLeavesNoTimeWait(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v %s", err, out)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte("40000 40063"), 0); err != nil {
		t.Fatal(err)
	}
	const answer = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
	request := func(c net.Conn) {
		var b [4096]byte
		c.Read(b[:])
	}
	for i, tc := range []struct {
		name  string
		kind  string
		tls   bool
		serve func(c net.Conn, stop <-chan struct{}) // nil: net/http
	}{
		{"tcp, the server closes when the check has", KindTCP, false, func(c net.Conn, _ <-chan struct{}) {
			request(c) // returns at the check's close
		}},
		{"http, keep-alive, closes after the check", KindHTTP, false, func(c net.Conn, _ <-chan struct{}) {
			request(c)
			io.WriteString(c, answer)
			io.Copy(io.Discard, c) // until the check closes
		}},
		{"http, keep-alive, holds the connection", KindHTTP, false, func(c net.Conn, stop <-chan struct{}) {
			request(c)
			io.WriteString(c, answer)
			<-stop
		}},
		{"http, net/http server (its close races the check's)", KindHTTP, false, nil},
		{"https, keep-alive, holds the connection", KindHTTPS, true, func(c net.Conn, stop <-chan struct{}) {
			request(c)
			io.WriteString(c, answer)
			<-stop
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := "10.199.0." + strconv.Itoa(i+1)
			if out, err := exec.Command("ip", "addr", "add", addr+"/32", "dev", "lo").CombinedOutput(); err != nil {
				t.Fatalf("ip addr add: %v %s", err, out)
			}
			ln, err := net.Listen("tcp", addr+":0")
			if err != nil {
				t.Fatal(err)
			}
			ap := netip.MustParseAddrPort(ln.Addr().String())
			stop := make(chan struct{})
			t.Cleanup(func() { close(stop); ln.Close() })
			if tc.tls {
				ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})
			}
			if tc.serve == nil {
				go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
			} else {
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						go func() { defer c.Close(); tc.serve(c, stop) }()
					}
				}()
			}
			cfg := fastConfig(tc.kind)
			cfg.Interval, cfg.Timeout, cfg.Jitter = MinInterval, MinInterval/2, 0
			if tc.tls {
				cfg.Interval, cfg.Timeout = 20*time.Millisecond, 15*time.Millisecond
			}
			cfg.Rise, cfg.Fall = 1, 1
			m := NewManager(ManagerOptions{})
			t.Cleanup(m.Close)
			if err := m.Set(map[string]Target{"b": {Addr: ap, Config: cfg}}); err != nil {
				t.Fatal(err)
			}
			const checks = 100 // more than the namespace's 64 ports
			poll(t, "checks", func() bool { s, _ := m.Status("b"); return s.Checks >= checks })
			s, _ := m.Status("b")
			m.Close()
			// Counted, not timed: a check that failed on a loaded machine
			// (its timeout is short) says nothing, a socket left says all.
			if n := closingSocketsTo(t, ap); n != 0 {
				t.Errorf("after %d checks of a healthy backend, %d of the LB's sockets toward it in TIME_WAIT or FIN_WAIT2 (%d checks failed, last error %q, state %v): each holds a source port toward the backend for 60 s",
					s.Checks, n, s.Failures, s.LastError, s.State)
			}
		})
	}
}

// inOwnNetns reports whether the test runs in a network namespace of its
// own; if not, it runs the test again in one (unshare -n), reports that
// run's verdict, and returns false.
func inOwnNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv("FULCRUM_HEALTH_TEST_NETNS") != "" {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command")
	}
	cmd := exec.Command("unshare", "-n", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "FULCRUM_HEALTH_TEST_NETNS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a network namespace: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	return false
}

// TestTimedOutConnectLeavesNoTimeWait: a check whose time runs out while
// its connection comes up (a loaded LB, a backend slow to answer) is
// closed by the dialer itself, before the check could set its socket to
// linger 0 s; that close sent a FIN and held the 4-tuple for 60 s like any
// other (TestCheckLeavesNoTimeWait). 400 tcp checks with deadlines of 1 to
// 200 microseconds, against a backend that holds what it accepts: no
// socket toward it may be left closing.
func TestTimedOutConnectLeavesNoTimeWait(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v %s", err, out)
	}
	const addr = "10.199.1.1"
	if out, err := exec.Command("ip", "addr", "add", addr+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v %s", err, out)
	}
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // held open: the check's close is the only one
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	ap := netip.MustParseAddrPort(ln.Addr().String())
	var p TCPProber
	timedOut := 0
	for i := range 400 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+i%200)*time.Microsecond)
		if _, err := p.Probe(ctx, ap); err != nil {
			timedOut++
		}
		cancel()
	}
	if n := closingSocketsTo(t, ap); n != 0 {
		t.Errorf("after 400 checks (%d timed out), %d of the LB's sockets toward the backend in TIME_WAIT or FIN_WAIT2", timedOut, n)
	}
}

// closingSocketsTo counts this network namespace's IPv4 TCP sockets whose
// remote end is ap in FIN_WAIT2 (05) or TIME_WAIT (06) in /proc/net/tcp:
// the check's side of a connection it closed first with a FIN.
func closingSocketsTo(t *testing.T, ap netip.AddrPort) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	a := ap.Addr().As4() // /proc/net/tcp: the address's bytes reversed, hex
	remote := strings.ToUpper(strconv.FormatUint(uint64(a[3])<<24|uint64(a[2])<<16|uint64(a[1])<<8|uint64(a[0]), 16))
	remote = strings.Repeat("0", 8-len(remote)) + remote + ":" + strings.ToUpper(strconv.FormatUint(uint64(ap.Port())|1<<16, 16)[1:])
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 3 && f[2] == remote && (f[3] == "05" || f[3] == "06") {
			n++
		}
	}
	return n
}

// selfSigned is a certificate for an https check's server (the checks do
// not verify it unless tls_verify is set).
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "backend"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
