//go:build dpdk

package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/exception"
)

// crashConfig is examples/pcap.toml reading examples/in.pcap in a loop
// (forwarding until stopped), writing nothing, with the exception path on
// interface iface, file prefix prefix and the admin API on a unix socket
// in dir. It returns the file and the runtime directory of the prefix,
// removed at the end of the test.
func crashConfig(t *testing.T, dir, prefix, iface string) (string, string) {
	t.Helper()
	b, err := os.ReadFile("../../examples/pcap.toml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := filepath.Abs("../../examples/in.pcap")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{"rx_pcap=examples/in.pcap,tx_pcap=/tmp/fulcrum-out.pcap", "rx_pcap=" + in + ",tx_pcap=/dev/null,infinite_rx=1"},
		{`file_prefix = "fulcrum-example"`, fmt.Sprintf("file_prefix = %q", prefix)},
		{"exception = false", fmt.Sprintf("exception = true\nexception_iface = %q\n#", iface)},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("examples/pcap.toml has no %q", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	s += fmt.Sprintf("\n[admin]\nlisten = \"unix:%s\"\n", filepath.Join(dir, "admin.sock"))
	p := filepath.Join(dir, "fulcrum.toml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dpdk.RuntimeBase, prefix)
	t.Cleanup(func() { os.RemoveAll(runDir) })
	return p, runDir
}

// crashNames are an interface name and file prefixes of this test's own.
func crashNames(t *testing.T, tag string) (iface string, prefix func(n int) string) {
	t.Helper()
	id := fmt.Sprintf("%d%s", os.Getpid()%100000, tag)
	iface = "fcrash" + id // at most 15 bytes
	if _, err := netlink.LinkByName(iface); err == nil {
		t.Fatalf("interface %s exists already", iface)
	}
	// The blackhole rules Fulcrum adds for iface stay after it exits (a
	// rule for an absent interface matches nothing); they are this
	// test's, by name, and go with it.
	t.Cleanup(func() {
		for _, r := range forwardRules(t, iface) {
			netlink.RuleDel(&r)
		}
		// The daemons' lock file stays after them, as it should; it is
		// this test's, by name, and its daemons are gone by now.
		os.Remove(exception.LockPath(exception.LockDir, iface))
	})
	return iface, func(n int) string { return fmt.Sprintf("fcrash-%s-%d", id, n) }
}

// forwardRules are Fulcrum's blackhole rules for iface, both families.
func forwardRules(t *testing.T, iface string) []netlink.Rule {
	t.Helper()
	var out []netlink.Rule
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := netlink.RuleListFiltered(fam, &netlink.Rule{Priority: exception.ForwardRulePriority}, netlink.RT_FILTER_PRIORITY)
		if err != nil {
			t.Fatalf("list rules: %v", err)
		}
		for _, r := range rs {
			if r.IifName == iface && r.Protocol == exception.RouteProtocol {
				out = append(out, r)
			}
		}
	}
	return out
}

// tapServes checks that iface is up with the LB's IPv4 address.
func tapServes(t *testing.T, iface string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := func() error {
			l, err := netlink.LinkByName(iface)
			if err != nil {
				return err
			}
			if l.Attrs().Flags&net.FlagUp == 0 {
				return fmt.Errorf("%s is down", iface)
			}
			as, err := netlink.AddrList(l, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, a := range as {
				if ip, _ := netip.AddrFromSlice(a.IP); ip.Unmap() == netip.MustParseAddr("192.0.2.10") {
					return nil
				}
			}
			return fmt.Errorf("%s has no 192.0.2.10: %v", iface, as)
		}()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("exception interface: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrashKill9Restart: a daemon killed with SIGKILL while forwarding
// (no clean-up: runtime directory, admin socket and blackhole rules stay)
// starts again at once with the same configuration, with its exception
// interface back and exactly one blackhole rule per family, however often
// that happens; a last SIGTERM then leaves no runtime directory.
func TestCrashKill9Restart(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	iface, prefix := crashNames(t, "k")
	dir := t.TempDir()
	cfg, runDir := crashConfig(t, dir, prefix(0), iface)
	for i := range 4 {
		ddir := t.TempDir() // a notify socket of each daemon's own
		d := startDaemon(t, bin, ddir, runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
		d.waitReady()
		tapServes(t, iface)
		if n := len(forwardRules(t, iface)); n != 2 {
			t.Fatalf("start %d: %d blackhole rules for %s, want 2 (one per family)\n%s", i, n, iface, d.out.String())
		}
		if i == 3 {
			d.signal(os.Interrupt)
			if code := d.wait(15 * time.Second); code != 0 {
				t.Fatalf("exit code %d after SIGINT, want 0\n%s", code, d.out.String())
			}
			d.runDirGone()
			return
		}
		time.Sleep(200 * time.Millisecond) // forwarding
		d.cmd.Process.Kill()
		if code := d.wait(15 * time.Second); code != -1 {
			t.Fatalf("exit code %d after SIGKILL, want -1", code)
		}
		if _, err := os.Stat(filepath.Join(dir, "admin.sock")); err != nil {
			t.Fatalf("SIGKILL left no admin socket to trip over: %v", err)
		}
	}
}

// TestCrashExceptionIfaceTaken: a second daemon with a file prefix of its
// own but the exception interface of a running one is refused (exit 1,
// before its EAL starts) and leaves the first one's interface as it was.
// Before, its net_tap attached to the first one's tap as one more queue
// (IFF_MULTI_QUEUE), it went on to forward, took over the interface's
// addresses and set it down when it stopped; and a multi-queue tap of the
// host's of that name lost its addresses to it.
func TestCrashExceptionIfaceTaken(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	iface, prefix := crashNames(t, "t")
	dir1, dir2 := t.TempDir(), t.TempDir()
	cfg1, runDir1 := crashConfig(t, dir1, prefix(1), iface)
	cfg2, runDir2 := crashConfig(t, dir2, prefix(2), iface)

	first := startDaemon(t, bin, dir1, runDir1, nil, "run", "-c", cfg1, "--stats-interval", "0")
	first.waitReady()
	tapServes(t, iface)
	second := startDaemon(t, bin, dir2, runDir2, nil, "run", "-c", cfg2, "--stats-interval", "0")
	if code := second.wait(15 * time.Second); code != 1 {
		t.Fatalf("second daemon on %s: exit code %d, want 1\n%s", iface, code, second.out.String())
	}
	second.runDirGone()
	if first.exited() {
		t.Fatalf("the first daemon exited\n%s", first.out.String())
	}
	tapServes(t, iface)
	first.signal(os.Interrupt)
	if code := first.wait(15 * time.Second); code != 0 {
		t.Fatalf("first daemon: exit code %d, want 0\n%s", code, first.out.String())
	}
	first.runDirGone()

	// A multi-queue tap of the host's with that name, and an address.
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("no ip(8) to make a tap of the host's")
	}
	if out, err := exec.Command(ip, "tuntap", "add", iface, "mode", "tap", "multi_queue").CombinedOutput(); err != nil {
		t.Skipf("ip tuntap add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(ip, "tuntap", "del", iface, "mode", "tap", "multi_queue").Run() })
	l, err := netlink.LinkByName(iface)
	if err != nil {
		t.Fatal(err)
	}
	host := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(198, 51, 100, 1), Mask: net.CIDRMask(24, 32)}}
	if err := netlink.AddrAdd(l, host); err != nil {
		t.Fatal(err)
	}
	third := startDaemon(t, bin, t.TempDir(), runDir2, nil, "run", "-c", cfg2, "--stats-interval", "0")
	if code := third.wait(15 * time.Second); code != 1 {
		t.Fatalf("daemon beside the host's tap %s: exit code %d, want 1\n%s", iface, code, third.out.String())
	}
	as, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || !as[0].IP.Equal(host.IP) {
		t.Errorf("the host's tap %s now has %v, want only %v", iface, as, host.IPNet)
	}
}

// TestCrashStaleForwardRule: a rule left at Fulcrum's priority, for its
// exception interface and with its protocol, that is not a blackhole
// (here "lookup main", as an older run or a hand edit may leave) is
// replaced by the blackhole at start-up. Before, Configure took any such
// rule for its own and added none: the kernel went on forwarding what
// the dataplane punted.
func TestCrashStaleForwardRule(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	iface, prefix := crashNames(t, "r")
	dir := t.TempDir()
	cfg, runDir := crashConfig(t, dir, prefix(0), iface)
	stale := netlink.NewRule()
	stale.Family, stale.Priority, stale.IifName = netlink.FAMILY_V4, exception.ForwardRulePriority, iface
	stale.Table, stale.Protocol = 254, exception.RouteProtocol // lookup main
	if err := netlink.RuleAdd(stale); err != nil {
		t.Fatalf("add rule: %v", err)
	}
	d := startDaemon(t, bin, t.TempDir(), runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
	d.waitReady()
	tapServes(t, iface)
	rs := forwardRules(t, iface)
	if len(rs) != 2 {
		t.Errorf("%d rules for %s, want 2 (a blackhole per family): %v", len(rs), iface, rs)
	}
	for _, r := range rs {
		if r.Table != 0 {
			t.Errorf("rule %v: looks up table %d, want a blackhole", r, r.Table)
		}
	}
	d.signal(os.Interrupt)
	if code := d.wait(15 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0\n%s", code, d.out.String())
	}
	d.runDirGone()
}

// TestCrashExceptionIfaceLocked: the exception interface's lock
// (/run/fulcrum/exception-IFACE-netINODE.lock) keeps a second daemon out even
// before the first one has made its tap. Held here by the test, it stops
// a daemon before its EAL starts (exit 1, naming the holder's PID, no
// tap); released, the daemon starts. Then, several times, two daemons
// of one interface (file prefixes of their own) are started at the same
// instant: one serves, the other exits 1. Before, both could pass
// CheckAbsent before either had made the tap, and both joined it.
func TestCrashExceptionIfaceLocked(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	iface, prefix := crashNames(t, "l")
	dir1, dir2 := t.TempDir(), t.TempDir()
	cfg1, runDir1 := crashConfig(t, dir1, prefix(1), iface)
	cfg2, runDir2 := crashConfig(t, dir2, prefix(2), iface)

	held, err := exception.Lock(exception.LockDir, iface)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, bin, t.TempDir(), runDir1, nil, "run", "-c", cfg1, "--stats-interval", "0")
	if code := d.wait(15 * time.Second); code != 1 {
		t.Fatalf("daemon beside a held lock of %s: exit code %d, want 1\n%s", iface, code, d.out.String())
	}
	if want := fmt.Sprintf("PID %d", os.Getpid()); !strings.Contains(d.out.String(), want) {
		t.Errorf("the refusal does not name the holder (%s):\n%s", want, d.out.String())
	}
	if _, err := netlink.LinkByName(iface); err == nil {
		t.Errorf("the refused daemon made %s", iface)
	}
	if _, err := os.Stat(runDir1); err == nil {
		t.Errorf("the refused daemon started its EAL (%s exists)", runDir1)
	}
	held.Release()

	for round := range 3 {
		a := startDaemon(t, bin, t.TempDir(), runDir1, nil, "run", "-c", cfg1, "--stats-interval", "0")
		b := startDaemon(t, bin, t.TempDir(), runDir2, nil, "run", "-c", cfg2, "--stats-interval", "0")
		var won, lost *daemon
		select {
		case <-a.done:
			won, lost = b, a
		case <-b.done:
			won, lost = a, b
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: both daemons of %s still running\n--- first:\n%s\n--- second:\n%s", round, iface, a.out.String(), b.out.String())
		}
		if code := lost.wait(15 * time.Second); code != 1 { // it has exited
			t.Fatalf("round %d: the daemon that exited: code %d, want 1\n%s", round, code, lost.out.String())
		}
		lost.runDirGone()
		won.waitReady()
		tapServes(t, iface)
		won.signal(os.Interrupt)
		if code := won.wait(15 * time.Second); code != 0 {
			t.Fatalf("round %d: exit code %d after SIGINT, want 0\n%s", round, code, won.out.String())
		}
		won.runDirGone()
	}
}
