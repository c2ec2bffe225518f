//go:build dpdk

package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/encap"
)

// tapLab is a lab whose exception tap lives in a network namespace of the
// test's own, with the LB's address and a route to the web VIP through
// the tap (as package exception sets up checks through the tunnel), and a
// raw socket in that namespace that writes frames as the kernel's side of
// the tap: what the kernel sends toward the wire.
type tapLab struct {
	*lab
	ns   string
	kern int // AF_PACKET socket on the tap, in ns
	ifx  int
}

func newTapLab(t *testing.T, iface, punt string) *tapLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the exception path needs root (tap device)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 not installed")
	}
	toml := strings.Replace(tunnelConfig, `next_hop_mac`, "exception = true\nexception_iface = \""+iface+"\"\nmempool_size = 4095\nnext_hop_mac", 1) +
		"\n[dataplane.punt]\n" + punt + "\n[eal]\nmemory_mb = 512\n"
	l := newLab(t, toml)
	ns := fmt.Sprintf("fulcrum-mc-%d-%s", os.Getpid(), iface)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	mac := net.HardwareAddr(l.eng.PortMAC[:]).String()
	for _, a := range [][]string{{"link", "set", "dev", iface, "netns", ns},
		{"-n", ns, "link", "set", "dev", iface, "address", mac},
		{"-n", ns, "link", "set", "dev", iface, "up"},
		{"-n", ns, "addr", "replace", lb4 + "/24", "dev", iface},
		{"-n", ns, "neigh", "replace", configtest.Web, "lladdr", mac, "dev", iface, "nud", "permanent"},
		{"-n", ns, "route", "replace", configtest.Web + "/32", "dev", iface, "scope", "link"},
		// The kernel answers the wire's punts (echo replies, resets) through
		// a router whose address it knows: its answers come back out.
		{"-n", ns, "neigh", "replace", "192.0.2.1", "lladdr", "02:00:00:00:00:fe", "dev", iface, "nud", "permanent"},
		{"-n", ns, "route", "replace", "default", "via", "192.0.2.1", "dev", iface}} {
		if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", a, err, out)
		}
	}
	tl := &tapLab{lab: l, ns: ns}
	// The raw socket is made on a thread moved into ns; it stays there.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			errc <- err
			return
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			errc <- err
			return
		}
		tl.kern, tl.ifx = fd, ifc.Index
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(tl.kern) })
	return tl
}

// fromKernel writes frames into the tap from the kernel's side.
func (tl *tapLab) fromKernel(frames ...[]byte) int {
	sent := 0
	for _, f := range frames {
		if err := unix.Sendto(tl.kern, f, 0, &unix.SockaddrLinklayer{Ifindex: tl.ifx, Halen: 6}); err == nil {
			sent++
		}
	}
	return sent
}

// quiesce stops the engine, empties the peer's side of the ring and
// returns the mbufs the engine's pools and the peer's pool lend.
func (tl *tapLab) quiesce(t *testing.T) (eng, peer int, rxFrames int, rxBytes uint64) {
	t.Helper()
	stopWithin(t, tl.eng, 2*time.Second)
	rxFrames, rxBytes = drainBytes(tl.peer)
	return inUse(tl.eng), peerPool.InUse(), rxFrames, rxBytes
}

// kernelDrops is what the counters say the worker dropped of the kernel's
// packets (docs/drop-reasons.md: the two health-check-* reasons).
func kernelDrops(c *Counters) uint64 {
	return c.Drops[DropHealthNoSlot] + c.Drops[DropHealthNotSent]
}

// TestMbufConservationThroughTap: hostile mixed bursts from the wire
// (every verdict: forwards on the fused and the general path, ICMP
// too-big and echo replies, punts to a live kernel and over the budget,
// every cheap drop reason, corrupted and cut frames), the kernel's own
// answers to the punts, checks through the tunnel from the kernel's side
// (steered, unknown slot, too big to encapsulate) and garbage written into
// the tap, with a capture running, a table change mid-run and the loop
// stopped and started again. After each round, with the loop stopped and
// the peer's side drained: every mbuf is back in its pool (the engine's
// and the peer's: no leak, no double free), and the counters add up:
//
//	rx = forwarded + icmp-reply + echo + punted + drops (wire's)
//	forwarded + icmp-reply + echo + punted + from_kernel - kernel drops
//	   = tx_packets + tx_full + the tap's opackets
//	tx_packets = frames the peer received
func TestMbufConservationThroughTap(t *testing.T) {
	tl := newTapLab(t, "flmc1", "other = 3000\nneighbour = 3000")
	svc := tl.shared.Services.Load()
	check, ok := svc.HealthPort(tl.cfg.VIPs[0].Key(), "be1")
	if !ok {
		t.Fatal("be1 has no check port")
	}
	var tmpl [][]byte
	for _, f := range probeTemplates(t) {
		if len(f) <= dpdk.DefaultDataRoom-dpdk.Headroom {
			tmpl = append(tmpl, f) // one mbuf of the peer's (multi-segment: TestLimitsPcapMixPoolReturns)
		}
	}
	// The kernel's side: a check to be1 (steered), a check from a port of
	// no slot, one too big to encapsulate, a non-check, and garbage.
	kern := [][]byte{
		frame(t, lb4, configtest.Web, check, 8080, layers.IPProtocolTCP, "S", 0, true),
		frame(t, lb4, configtest.Web, check, 8080, layers.IPProtocolTCP, "A", 200, true),
		frame(t, lb4, configtest.Web, 65000, 8080, layers.IPProtocolTCP, "S", 0, true),
		frame(t, lb4, configtest.Web, check, 8080, layers.IPProtocolTCP, "PA", 1460, true),
		frame(t, lb4, "198.51.100.9", 40000, 80, layers.IPProtocolTCP, "S", 0, true),
		make([]byte, 60),
	}
	rng := rand.New(rand.NewPCG(40, 1))
	base, peerBase, k0, _ := tl.quiesce(t)
	t.Logf("base: engine pools lend %d (the tap's rx ring), peer pool %d", base, peerBase)
	peerFrames := uint64(k0) // the kernel's own frames since the tap came up
	var cp *Capture
	for round := 0; round < 3; round++ {
		if err := tl.eng.Run(); err != nil {
			t.Fatal(err)
		}
		switch round {
		case 1:
			var err error
			if cp, err = StartCapture(tl.eng.Workers(), CaptureFilter{Rx: true, Tx: true, Drops: true}); err != nil {
				t.Fatal(err)
			}
		case 2:
			cp.Stop()
			s, err := servicesOf(tl.cfg, tl.enc, tl.shared.Services.Load(), Overrides{{"web", "be2"}: {Weight: 0, Down: true}}, tl.nh)
			if err != nil {
				t.Fatal(err)
			}
			tl.shared.Services.Store(s)
		}
		kernSent := 0
		for b := 0; b < 60; b++ {
			n := 1 + rng.IntN(MaxBurst)
			frames := make([][]byte, n)
			for i := range frames {
				fr := append([]byte(nil), tmpl[rng.IntN(len(tmpl))]...)
				switch rng.IntN(8) {
				case 0:
					for e := 0; e < 1+rng.IntN(3); e++ {
						fr[rng.IntN(len(fr))] ^= byte(1 + rng.IntN(255))
					}
				case 1:
					fr = fr[:rng.IntN(len(fr))]
				}
				frames[i] = fr
			}
			tl.send(frames...)
			if b%4 == 0 {
				kernSent += tl.fromKernel(kern...)
			}
			// Keep the ring to the peer from filling: its frames are
			// the engine's (kernel) and the peer's mbufs.
			k, _ := drainBytes(tl.peer)
			peerFrames += uint64(k)
			if cp != nil && round == 1 {
				cp.Drain(nil)
			}
		}
		// Wait (bounded) until the loop has taken all the wire sent and
		// the tap has been quiet for a while.
		var c Counters
		for deadline, last := time.Now().Add(5*time.Second), uint64(0); time.Now().Before(deadline); {
			c = tl.counters()
			k, _ := drainBytes(tl.peer)
			peerFrames += uint64(k)
			if c.FromKernel == last && k == 0 && time.Until(deadline) < 4*time.Second {
				break
			}
			last = c.FromKernel
			time.Sleep(20 * time.Millisecond)
		}
		eng, peer, k, _ := tl.quiesce(t)
		peerFrames += uint64(k)
		c = stoppedCounters(tl.eng)
		tapSt, _ := dpdk.PortStats(tl.eng.tap)
		t.Logf("round %d: rx %d fwd %d reply %d echo %d punted %d dropped %d (kernel's %d) from-kernel %d (wrote %d) health-tx %d tx %d tx-full %d tap-out %d peer got %d; lent: engine %d peer %d",
			round, c.RxPackets, c.Encap[encap.Forward], c.Encap[encap.ICMPReply], c.EchoReplies, c.Punted, c.Dropped(), kernelDrops(&c), c.FromKernel, kernSent,
			c.HealthTunnelTx, c.TxPackets, c.TxFull, tapSt.OPackets, peerFrames, eng-base, peer-peerBase)
		if eng != base || peer != peerBase {
			t.Errorf("round %d: the engine's pools lend %d more mbufs than before, the peer's %d (negative: freed twice)", round, eng-base, peer-peerBase)
		}
		if d := wireIdentity(&c); d != 0 {
			t.Errorf("round %d: rx %d, wire outcomes off by %d", round, c.RxPackets, d)
		}
		decided := c.Encap[encap.Forward] + c.Encap[encap.ICMPReply] + c.EchoReplies + c.Punted + c.FromKernel - kernelDrops(&c)
		if got := c.TxPackets + c.TxFull + tapSt.OPackets; got != decided {
			t.Errorf("round %d: decided to send %d, sent %d + refused %d + to the tap %d = %d", round, decided, c.TxPackets, c.TxFull, tapSt.OPackets, got)
		}
		if c.TxPackets != peerFrames {
			t.Errorf("round %d: tx_packets %d, the peer received %d", round, c.TxPackets, peerFrames)
		}
		if c.HealthTunnelTx == 0 || c.Drops[DropHealthNoSlot] == 0 || c.Drops[DropHealthNotSent] == 0 || c.EchoReplies == 0 || c.Punted == 0 {
			t.Errorf("round %d: a path was not reached: health-tx %d unknown-slot %d not-encapsulated %d echo %d punted %d",
				round, c.HealthTunnelTx, c.Drops[DropHealthNoSlot], c.Drops[DropHealthNotSent], c.EchoReplies, c.Punted)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if err := tl.eng.Run(); err != nil { // the lab's Close stops it
		t.Fatal(err)
	}
}

// TestTxBytesCountKernelFrames: the frames the kernel sends through the
// tap go out of the wire port and are counted in tx_packets; their bytes
// must be in tx_bytes too, or bytes per packet read from the two
// counters is wrong on a host whose kernel talks (BGP, checks through the
// tunnel, ARP).
func TestTxBytesCountKernelFrames(t *testing.T) {
	tl := newTapLab(t, "flmc2", "")
	svc := tl.shared.Services.Load()
	check, _ := svc.HealthPort(tl.cfg.VIPs[0].Key(), "be1")
	_, _, _, _ = tl.quiesce(t) // the kernel's own frames since link up
	before := stoppedCounters(tl.eng)
	if err := tl.eng.Run(); err != nil {
		t.Fatal(err)
	}
	frames := [][]byte{
		frame(t, lb4, "198.51.100.9", 40000, 179, layers.IPProtocolTCP, "PA", 100, true), // BGP-like, as it is
		frame(t, lb4, configtest.Web, check, 8080, layers.IPProtocolTCP, "S", 0, true),   // a check, encapsulated
	}
	const n = 50
	for i := 0; i < n; i++ {
		if tl.fromKernel(frames...) != len(frames) {
			t.Fatal("raw socket write failed")
		}
	}
	var c Counters
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if c = tl.counters(); c.FromKernel-before.FromKernel >= 2*n {
			break
		}
	}
	_, _, got, bytes := tl.quiesce(t)
	c = stoppedCounters(tl.eng)
	t.Logf("from-kernel %d health-tx %d tx %d tx-bytes %d; peer received %d frames, %d bytes", c.FromKernel-before.FromKernel, c.HealthTunnelTx,
		c.TxPackets-before.TxPackets, c.TxBytes-before.TxBytes, got, bytes)
	if uint64(got) != c.TxPackets-before.TxPackets || got < 2*n {
		t.Fatalf("peer received %d, tx_packets moved by %d", got, c.TxPackets-before.TxPackets)
	}
	if c.TxBytes-before.TxBytes != bytes {
		t.Errorf("tx_packets moved by %d (the kernel's frames), tx_bytes by %d; the peer received %d bytes", c.TxPackets-before.TxPackets, c.TxBytes-before.TxBytes, bytes)
	}
	if err := tl.eng.Run(); err != nil {
		t.Fatal(err)
	}
}
