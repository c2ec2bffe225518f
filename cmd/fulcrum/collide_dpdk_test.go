//go:build dpdk

package main

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestRunBGPPortTakenBeforeEAL: with bgp.listen_port held by another
// program (bird, a second Fulcrum), the daemon exits 1 before it starts
// the EAL (no runtime directory, no READY): before, it took the NIC and
// the tap, built the tables and told systemd it was ready, and only then
// failed, naming no key.
func TestRunBGPPortTakenBeforeEAL(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	dir := t.TempDir()
	other, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := other.Addr().(*net.TCPAddr).Port
	bgpSection := passiveBGP(port, "127.0.0.1", "127.0.0.1")
	cfg, runDir := lifecycleConfig(t, dir, "../../examples/in.pcap", bgpSection)
	d := startDaemon(t, bin, dir, runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
	if code := d.wait(30 * time.Second); code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", code, d.out.String())
	}
	if got := d.next(200 * time.Millisecond); got != "" {
		t.Errorf("notified %q before failing on a taken BGP port", got)
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("runtime directory %s exists (%v): the EAL started before the BGP port was checked", runDir, err)
	}
}

// TestRunWatchdog: under a unit with WatchdogSec= (systemd sets
// WATCHDOG_USEC), the daemon tells the watchdog it works after READY,
// again and again, while its control plane answers.
func TestRunWatchdog(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	dir := t.TempDir()
	cfg, runDir := lifecycleConfig(t, dir, "../../examples/in.pcap", "")
	t.Setenv("WATCHDOG_USEC", "400000") // 0.4 s: a WATCHDOG=1 every 0.1 s
	t.Setenv("WATCHDOG_PID", "")
	d := startDaemon(t, bin, dir, runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
	d.waitReady()
	for i := range 3 {
		if got := d.next(5 * time.Second); got != "WATCHDOG=1" {
			t.Fatalf("notification %d after READY: %q, want WATCHDOG=1\n%s", i, got, d.out.String())
		}
	}
	d.signal(syscall.SIGTERM)
	if code := d.wait(15 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0\n%s", code, d.out.String())
	}
}

// passiveBGP is a [bgp] section with one passive neighbour, listening on
// port at the addresses listen (a TOML list's items).
func passiveBGP(port int, listen, neighbor string) string {
	return fmt.Sprintf(`
[bgp]
asn = 64512
router_id = "192.0.2.10"
next_hop_v6 = "2001:db8:100::10"
listen_port = %d
listen_addresses = [%q]

  [[bgp.neighbor]]
  address = %q
  peer_asn = 64512
  passive = true
`, port, listen, neighbor)
}
