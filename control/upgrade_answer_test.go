package control

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/health"
)

// One backend's health endpoint answers the HTTP check with 101 Switching
// Protocols and holds the connection. The check never ends (package
// health reads the 101's connection as a body, past its timeout), so a
// reload that removes or re-checks that backend waits for the checker's
// goroutine with the plane's lock held: the reload never returns, and
// with it every admin call and health verdict that needs the lock.
func TestReloadNotHeldByUpgradeAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					l, err := br.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				<-release
			}()
		}
	}()
	upgrader := netip.MustParseAddrPort(ln.Addr().String())

	checks := "[health]\nkind = \"http\"\npath = \"/healthz\"\ninterval = \"100ms\"\ntimeout = \"80ms\"\nrise = 1\nfall = 1\n"
	cfg := strings.Replace(baseConfig, "[[vip]]", checks+"\n[[vip]]", 1)
	without := strings.Replace(cfg, "  [[vip.backend]]\n  name = \"be2\"\n  address = \"10.0.1.2\"\n", "", 1)
	if without == cfg {
		t.Fatal("be2 not removed from the config")
	}
	f := newFixture(t, cfg)
	be2 := netip.MustParseAddr("10.0.1.2")
	m := health.NewManager(health.ManagerOptions{NewProber: func(_ string, tg health.Target) (health.Prober, error) {
		if tg.Addr.Addr() != be2 {
			return probeFunc(func(netip.AddrPort) error { return nil }), nil
		}
		p, err := health.NewTargetProber(tg)
		return redirect{inner: p, to: func(netip.AddrPort) netip.AddrPort { return upgrader }}, err
	}})
	t.Cleanup(func() { ln.Close() })
	t.Cleanup(m.Close)
	t.Cleanup(free) // first: lets a stuck check go
	f.plane.mu.Lock()
	targets, err := healthTargets(f.plane.cfg, f.shared.Services.Load())
	if err == nil {
		err = m.Set(targets)
	}
	f.plane.checks = m
	f.plane.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "be2's check to reach its endpoint", func() bool { return accepted.Load() > 0 })

	done := make(chan error, 1)
	go func() { done <- f.plane.Apply(mustParse(t, without)) }() // the operator removes be2
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("a reload removing be2 has not returned after 10s: it holds the plane's lock waiting for be2's check, stuck on a 101 answer")
		free()
		<-done
	}
}
