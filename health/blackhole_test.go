package health

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// blackholeListener is a loopback port whose SYNs are dropped, as a
// backend behind a firewall's DROP, a dead host on a routed path or (for a
// check through the tunnel) a backend whose decapsulation is broken looks
// to a check: a listener with a backlog of 0 whose queue a connection
// nobody accepts fills, so the kernel drops every further SYN and the
// connect waits (the SYN retried for about two minutes).
func blackholeListener(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*syscall.SockaddrInet4).Port))
	c, err := net.Dial("tcp", ap.String()) // backlog 0 queues one: fill it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ap
}

// synSentTo counts this host's sockets connecting to ap (SYN_SENT).
func synSentTo(t *testing.T, ap netip.AddrPort) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skip("no /proc/net/tcp")
	}
	a := ap.Addr().As4()
	rem := fmt.Sprintf("%02X%02X%02X%02X:%04X 02", a[3], a[2], a[1], a[0], ap.Port())
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[2]+" "+f[3] == rem {
			n++
		}
	}
	return n
}

// An HTTP check of a backend that drops SYNs (the commonest way a backend
// dies: a host gone, a firewall, broken decapsulation for a check through
// the tunnel) must leave nothing behind when it times out. net/http's
// transport dials in a goroutine of its own, detached from the request's
// context (Go 1.23+), so every timed-out check left its connect running
// for the kernel's two minutes of SYN retries: a goroutine and a socket
// per check (600 per backend at a 200 ms interval), still there after the
// backend was removed by a reload or the Manager closed. Through the
// tunnel, where every check uses the same source port, they queue for the
// port (EADDRNOTAVAIL, retried every 50 ms without end) and grow without
// bound while the backend black-holes, and hold the port when it recovers.
func TestProbeBlackholedHTTPCheckLeavesNothing(t *testing.T) {
	for _, through := range []string{ThroughDirect, ThroughTunnel} {
		t.Run(through, func(t *testing.T) {
			ap := blackholeListener(t)
			base := runtime.NumGoroutine()
			m := NewManager(ManagerOptions{})
			defer m.Close()
			target := Target{Addr: ap, Config: fastConfig(KindHTTP)}
			if through == ThroughTunnel {
				target = tunnelTarget(t, KindHTTP, ap)
			}
			if err := m.Set(map[string]Target{"b": target}); err != nil {
				t.Fatal(err)
			}
			const checks = 8
			poll(t, "checks run", func() bool { s, _ := m.Status("b"); return s.Checks >= checks })
			s, _ := m.Status("b")
			if s.State != Down || !strings.Contains(s.LastError, "timeout") {
				t.Fatalf("state %v, last error %q: want down on timeouts", s.State, s.LastError)
			}
			// At most one check runs at a time, so at most one connect.
			if n := synSentTo(t, ap); n > 1 {
				t.Errorf("%d connects to the backend pending after %d checks, want at most 1", n, s.Checks)
			}
			m.Close()
			deadline := time.Now().Add(waitFor)
			for {
				g, n := runtime.NumGoroutine(), synSentTo(t, ap)
				if g <= base && n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%v after Close: %d goroutines more than before the Manager, %d connects to the backend pending", waitFor, g-base, n)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
