package health

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// freePort is a port nothing on addr uses now.
func freePort(t *testing.T, addr string) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// tunnelTarget is a check through the "tunnel" of the loopback: the VIP
// is 127.0.0.1 (where the test's server listens) and the source
// 127.0.0.2 on a fixed port, as the control plane would give it.
func tunnelTarget(t *testing.T, kind string, vip netip.AddrPort) Target {
	cfg := fastConfig(kind)
	cfg.Through = ThroughTunnel
	cfg.Path = "/healthz"
	return Target{
		Addr:   netip.MustParseAddrPort("192.0.2.10:" + itoa(vip.Port())), // the backend: never dialled
		Config: cfg,
		Tunnel: Tunnel{VIP: vip.Addr(), Source: freePort(t, "127.0.0.2")},
	}
}

func itoa(p uint16) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), p).String()[len("0.0.0.0:"):]
}

// TestTunnelProbeBindsSourceEveryTime: a check through the tunnel goes to
// the VIP (not the backend's address) from the fixed source (the
// dataplane reads the backend from it), and the same source works check
// after check, back to back. (On the loopback the kernel reuses a
// TIME_WAIT 4-tuple for a new connect, tcp_tw_reuse=2, so this cannot
// show what the RST close buys on a real interface; the lab check runs
// at 200 ms over one.)
func TestTunnelProbeBindsSourceEveryTime(t *testing.T) {
	for _, kind := range []string{KindTCP, KindHTTP} {
		t.Run(kind, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			vip := netip.MustParseAddrPort(ln.Addr().String())
			target := tunnelTarget(t, kind, vip)
			if got := target.ProbeAddr(); got != vip {
				t.Fatalf("ProbeAddr = %v, want the VIP %v", got, vip)
			}
			remotes := make(chan string, 100)
			if kind == KindHTTP {
				srv := &http.Server{
					Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						remotes <- r.RemoteAddr
						if r.URL.Path != "/healthz" {
							w.WriteHeader(http.StatusNotFound)
						}
					}),
				}
				go srv.Serve(ln)
				defer srv.Close()
			} else {
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						remotes <- c.RemoteAddr().String()
						c.Close()
					}
				}()
			}
			p, err := NewTargetProber(target)
			if err != nil {
				t.Fatal(err)
			}
			const n = 30
			for i := range n {
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				_, err := p.Probe(ctx, target.ProbeAddr())
				cancel()
				if err != nil {
					t.Fatalf("check %d: %v", i, err)
				}
			}
			for i := range n {
				select {
				case r := <-remotes:
					if r != target.Tunnel.Source.String() {
						t.Fatalf("connection %d came from %s, want %v", i, r, target.Tunnel.Source)
					}
				case <-time.After(waitFor):
					t.Fatalf("server saw %d connections, want %d", i, n)
				}
			}
		})
	}
}

// TestDirectProberLetsKernelChoose: a direct check binds nothing (its
// socket's only option is checkSocket's linger).
func TestDirectProberLetsKernelChoose(t *testing.T) {
	d := Target{Addr: netip.MustParseAddrPort("127.0.0.1:80"), Config: fastConfig(KindTCP)}.dialer()
	if d.LocalAddr != nil {
		t.Fatalf("direct dialer binds %v", d.LocalAddr)
	}
}

func TestTunnelTargetValidate(t *testing.T) {
	cfg := fastConfig(KindTCP)
	tcfg := cfg
	tcfg.Through = ThroughTunnel
	be := netip.MustParseAddrPort("10.0.0.5:80")
	vip4, vip6 := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::7")
	src4 := netip.MustParseAddrPort("10.0.0.1:61000")
	for _, tc := range []struct {
		name string
		t    Target
		ok   bool
	}{
		{"direct", Target{Addr: be, Config: cfg}, true},
		{"direct with a tunnel", Target{Addr: be, Config: cfg, Tunnel: Tunnel{VIP: vip4, Source: src4}}, false},
		{"tunnel", Target{Addr: be, Config: tcfg, Tunnel: Tunnel{VIP: vip4, Source: src4}}, true},
		{"tunnel without vip", Target{Addr: be, Config: tcfg, Tunnel: Tunnel{Source: src4}}, false},
		{"tunnel without source", Target{Addr: be, Config: tcfg, Tunnel: Tunnel{VIP: vip4}}, false},
		{"tunnel without source port", Target{Addr: be, Config: tcfg, Tunnel: Tunnel{VIP: vip4, Source: netip.AddrPortFrom(src4.Addr(), 0)}}, false},
		{"tunnel mixed families", Target{Addr: be, Config: tcfg, Tunnel: Tunnel{VIP: vip6, Source: src4}}, false},
	} {
		err := tc.t.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v does not wrap ErrConfig", tc.name, err)
		}
	}
	bad := cfg
	bad.Through = "sideways"
	var ce *ConfigError
	if err := bad.Validate(); !errors.As(err, &ce) || ce.Field != "through" {
		t.Errorf("through = sideways: Validate = %v, want a through error", err)
	}
}
