//go:build dpdk

package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunBGPListensOnLBAddress: bgp.listen_addresses naming the
// LB's own address (dataplane.lb_ipv4), which the daemon puts on its
// exception tap, is a working configuration: GoBGP binds after the tap
// has it. bgp.CheckListen, run before the EAL (and the tap), refused it
// ("cannot assign requested address"), and the daemon exited 1. The
// daemon runs in a network namespace of the test's own.
func TestRunBGPListensOnLBAddress(t *testing.T) {
	needDPDKRoot(t)
	ns := fmt.Sprintf("flst-%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	exec.Command("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up").Run()
	bin := buildFulcrum(t)
	dir := t.TempDir()
	iface := fmt.Sprintf("flstl%d", os.Getpid()%10000)
	prefix := fmt.Sprintf("fulcrum-lst-listen-%d", os.Getpid())
	cfg, runDir := crashConfig(t, dir, prefix, iface)
	// A port free in the new namespace (nothing listens there).
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `lb_ipv4 = "192.0.2.10"`) {
		t.Fatal("examples/pcap.toml's lb_ipv4 is not 192.0.2.10")
	}
	bgpSection := passiveBGP(port, "192.0.2.10", "192.0.2.1")
	if err := os.WriteFile(cfg, append(b, bgpSection...), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "/usr/bin/ip", dir, runDir, nil, "netns", "exec", ns, bin, "run", "-c", cfg, "--stats-interval", "0")
	d.waitReady()
	// Listening on lb_ipv4:port inside the namespace.
	want := fmt.Sprintf("192.0.2.10:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := exec.Command("ip", "netns", "exec", ns, "ss", "-Hltn").CombinedOutput()
		if strings.Contains(string(out), want) {
			break
		}
		if d.exited() || time.Now().After(deadline) {
			t.Fatalf("not listening on %s (exited: %v)\nss: %s\n%s", want, d.exited(), out, d.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.signal(syscall.SIGTERM)
	if code := d.wait(60 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0\n%s", code, d.out.String())
	}
}
