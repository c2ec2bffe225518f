package health

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A direct TCP check connects and closes first, so every check leaves its
// 4-tuple in TIME_WAIT on the LB for 60 s. Linux reuses a TIME_WAIT tuple
// for a new connect only toward loopback (tcp_tw_reuse = 2, the default),
// so toward a real backend the checks of one address and port may use at
// most ip_local_port_range's ports a minute (28,232 by default: 470 checks
// a second, e.g. 47 VIPs sharing a backend pool checked on one health port
// every 100 ms, or 5 every 10 ms). Past that every connect fails with
// EADDRNOTAVAIL and a healthy backend is called down. HAProxy closes its
// checks with a RST for this reason; the tunnel checks here do too
// (tunnel.go), the direct ones do not.
//
// The test runs itself in a network namespace of its own (unshare -n),
// where it checks a server on a non-loopback address (10.199.0.1 on lo)
// with the namespace's port range cut to 64 ports, so that the limit is
// reached after 64 checks instead of 28,232.
func TestTCPCheckLeavesNoTimeWait(t *testing.T) {
	if os.Getenv("FULCRUM_HEALTH_TEST_NETNS") == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root for a network namespace")
		}
		if _, err := exec.LookPath("ip"); err != nil {
			t.Skip("no ip command")
		}
		cmd := exec.Command("unshare", "-n", os.Args[0], "-test.run=^TestTCPCheckLeavesNoTimeWait$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "FULCRUM_HEALTH_TEST_NETNS=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("in a network namespace: %v\n%s", err, out)
		}
		t.Logf("%s", out)
		return
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", "10.199.0.1/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte("40000 40063"), 0); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "10.199.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // a healthy server: it closes when the check has
				var b [1]byte
				c.Read(b[:])
				c.Close()
			}()
		}
	}()
	cfg := fastConfig(KindTCP)
	cfg.Interval, cfg.Timeout, cfg.Jitter = MinInterval, MinInterval/2, 0
	cfg.Rise, cfg.Fall = 1, 1
	m := NewManager(ManagerOptions{})
	defer m.Close()
	if err := m.Set(map[string]Target{"b": {Addr: netip.MustParseAddrPort(ln.Addr().String()), Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	const checks = 100 // more than the namespace's 64 ports
	poll(t, "checks", func() bool { s, _ := m.Status("b"); return s.Checks >= checks })
	// Counted, not timed: a check that failed on a loaded machine (its
	// timeout is MinInterval/2) says nothing, a TIME_WAIT socket does.
	if n := timeWaitSockets(t); n != 0 {
		s, _ := m.Status("b")
		t.Errorf("after %d checks of a healthy backend, %d sockets in TIME_WAIT (%d checks failed, last error %q): each holds a source port toward the backend for 60 s",
			s.Checks, n, s.Failures, s.LastError)
	}
}

// timeWaitSockets counts the IPv4 TCP sockets of this network namespace
// in TIME_WAIT (state 06 in /proc/net/tcp).
func timeWaitSockets(t *testing.T) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 3 && f[3] == "06" {
			n++
		}
	}
	return n
}
