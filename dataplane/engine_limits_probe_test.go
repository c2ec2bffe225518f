//go:build dpdk

package dataplane

// Probes of the DPDK dataplane at its resource limits: mbuf accounting
// after every kind of verdict, tx ports that cannot keep up, undersized
// pools and oversized rings, stop under load and restart. They share the
// EAL of engine_dpdk_test.go's TestMain (one worker lcore).

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/encap"
)

var probeSeq int

// probeConfig parses labToml(extra) with the wire port set to port.
func probeConfig(t *testing.T, port, extra string) *config.Config {
	t.Helper()
	toml := strings.Replace(labToml(extra), `port = "net_ring0"`, fmt.Sprintf(`port = %q`, port), 1)
	cfg, err := config.Parse([]byte(toml), "probe.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// probeEngineConfig is what newLab builds, from cfg.
func probeEngineConfig(t *testing.T, cfg *config.Config) (EngineConfig, *Shared) {
	t.Helper()
	d := &cfg.Dataplane
	enc, err := encap.New(encap.Config{SrcV4: d.LBIPv4.Addr, SrcV6: d.LBIPv6.Addr, TTL: d.TTL, DF: encap.DFSet, MTU: d.MTU, GUEPort: d.GUEPort})
	if err != nil {
		t.Fatal(err)
	}
	nh := NextHop{MAC4: d.NextHopMAC.HW, MAC6: d.NextHopMAC.HW, Has4: d.NextHopMAC.Set, Has6: d.NextHopMAC.Set}
	shared := &Shared{}
	svc, err := servicesOf(cfg, enc, nil, nil, nh)
	if err != nil {
		t.Fatal(err)
	}
	shared.Services.Store(svc)
	key, err := flowKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ec := EngineConfig{Port: d.Port, TxPort: d.TxPort, Burst: d.Burst, RxDesc: d.RxDesc, TxDesc: d.TxDesc, MempoolSize: d.MempoolSize,
		IdleBackoff: *d.IdleBackoff, IdleMaxSleep: d.IdleMaxSleep, Exception: *d.Exception, ExceptionIf: d.ExceptionIf,
		HashKey: key, Conntrack: conntrack.DefaultConfig()}
	ec.Conntrack.Capacity = cfg.Conntrack.Capacity
	return ec, shared
}

func probeLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// vdev creates a virtual device for the test and removes it at the end.
func vdev(t *testing.T, name, args string) {
	t.Helper()
	if err := dpdk.VdevInit(name, args); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p, err := dpdk.PortByName(name); err == nil {
			dpdk.StopPort(p)
		}
		if err := dpdk.VdevUninit(name); err != nil {
			t.Errorf("uninit %s: %v", name, err)
		}
	})
}

// engineCounters sums the workers' counters (the loops must be running).
func engineCounters(t *testing.T, e *Engine) Counters {
	t.Helper()
	var sum Counters
	for _, w := range e.Workers() {
		var c Counters
		if !w.Snapshot(&c, 5*time.Second) {
			t.Fatal("worker did not answer a snapshot")
		}
		sum.Add(&c)
	}
	return sum
}

// stoppedCounters reads the workers' counters with the loops stopped:
// Snapshot needs a turning loop, so read the plain struct.
func stoppedCounters(e *Engine) Counters {
	var sum Counters
	for _, w := range e.Workers() {
		sum.Add(w.Local())
	}
	return sum
}

func inUse(e *Engine) int {
	n := 0
	for _, p := range e.pools {
		n += p.InUse()
	}
	return n
}

// stopWithin stops e and fails if that takes longer than d.
// probeEngine makes an engine of cfg (the caller closes it) and returns
// it with its pools' mbufs in use before it runs.
func probeEngine(t *testing.T, cfg *config.Config) (*Engine, int) {
	t.Helper()
	ec, shared := probeEngineConfig(t, cfg)
	e, err := NewEngine(ec, shared, probeLog())
	if err != nil {
		t.Fatal(err)
	}
	return e, inUse(e)
}

// runUntilRx runs e until it has received n packets or d has passed,
// stops it and returns its counters.
func runUntilRx(t *testing.T, e *Engine, n uint64, d time.Duration) Counters {
	t.Helper()
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(d); ; {
		if c := engineCounters(t, e); c.RxPackets >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopWithin(t, e, time.Second)
	return stoppedCounters(e)
}

// poolWhole fails t if e's pools lend more mbufs than base, after what.
func poolWhole(t *testing.T, e *Engine, base int, after string) {
	t.Helper()
	if n := inUse(e) - base; n != 0 {
		t.Errorf("%d mbufs missing from the pool after %s", n, after)
	}
}

// puntsAccounted fails t unless every punt went to the tap or was
// counted as refused.
func puntsAccounted(t *testing.T, c Counters, tap dpdk.Stats) {
	t.Helper()
	if c.TxFull+tap.OPackets != c.Punted {
		t.Errorf("punted %d: tap took %d, refused (tx-full) %d", c.Punted, tap.OPackets, c.TxFull)
	}
}

func stopWithin(t *testing.T, e *Engine, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.Stop() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("Stop did not return within %v", d)
	}
}

// writePcap writes frames to a pcap file in dir.
func writePcap(t *testing.T, frames [][]byte) string {
	t.Helper()
	probeSeq++
	path := filepath.Join(t.TempDir(), fmt.Sprintf("in%d.pcap", probeSeq))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 0)
	for _, fr := range frames {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(fr), Length: len(fr)}, fr); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// mixFrames is one frame of each verdict the engine can reach without an
// exception path: forwarded v4 and v6, ICMP too-big reply, no service,
// not a VIP, host traffic (punt, but no tap), ARP (punt, no tap),
// truncated, runt, and a jumbo frame (several mbufs on net_pcap).
func mixFrames(t *testing.T, i int) [][]byte {
	sport := uint16(1000 + i)
	fwd := frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "S", 0, true)
	arp := func() []byte {
		buf := gopacket.NewSerializeBuffer()
		mac := []byte{2, 0, 0, 0, 0, 0x77}
		_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
			&layers.Ethernet{SrcMAC: mac, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest,
				SourceHwAddress: mac, SourceProtAddress: []byte{192, 0, 2, 1}, DstHwAddress: make([]byte, 6), DstProtAddress: []byte{192, 0, 2, 10}})
		return append([]byte(nil), buf.Bytes()...)
	}()
	return [][]byte{
		fwd,
		frame(t, "2001:db8:aaaa::1", "2001:db8:ffff::7", sport, 443, layers.IPProtocolTCP, "S", 64, false),
		frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "A", 1480, true), // too big: ICMP reply
		frame(t, "198.51.100.10", "203.0.113.7", sport, 81, layers.IPProtocolTCP, "S", 0, true),    // no service
		frame(t, "198.51.100.10", "192.0.2.99", sport, 22, layers.IPProtocolTCP, "S", 0, true),     // not a VIP
		frame(t, "198.51.100.10", "192.0.2.10", sport, 179, layers.IPProtocolTCP, "S", 0, true),    // host: punt
		arp,
		fwd[:14+i%20], // truncated
		fwd[:10],      // runt
		frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "A", 8900, true), // jumbo
	}
}

// TestLimitsNullFloodPoolReturns: net_null is an endless flood of
// 64-byte garbage frames allocated from the engine's own pool. After
// stop every mbuf is back in the pool, every frame received is counted
// under a verdict, and the engine runs again in the same process with
// its counters carrying on.
func TestLimitsNullFloodPoolReturns(t *testing.T) {
	name := "net_null_lp0"
	vdev(t, name, "")
	cfg := probeConfig(t, name, "exception = false\nmempool_size = 511\nrx_desc = 64\ntx_desc = 64")
	ec, shared := probeEngineConfig(t, cfg)
	e, err := NewEngine(ec, shared, probeLog())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if n := inUse(e); n != 0 {
		t.Fatalf("%d mbufs in use before the loops ran", n)
	}
	var prev Counters
	for round := 0; round < 2; round++ {
		if err := e.Run(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Second)
		var c Counters
		for {
			c = engineCounters(t, e)
			if c.RxPackets > prev.RxPackets+50_000 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		stopWithin(t, e, 2*time.Second)
		c = stoppedCounters(e)
		if c.RxPackets <= prev.RxPackets {
			t.Fatalf("round %d: nothing received (%d)", round, c.RxPackets)
		}
		if n := inUse(e); n != 0 {
			t.Errorf("round %d: %d mbufs missing from the pool after stop (received %d)", round, n, c.RxPackets)
		}
		out := c.Encap[encap.Forward] + c.Encap[encap.ICMPReply]
		if got := out + c.Punted + c.Dropped(); got != c.RxPackets {
			t.Errorf("round %d: received %d, forwarded+replied %d + punted %d + dropped %d = %d", round, c.RxPackets, out, c.Punted, c.Dropped(), got)
		}
		if c.TxPackets+c.TxFull != out {
			t.Errorf("round %d: decided to send %d, sent %d + refused %d", round, out, c.TxPackets, c.TxFull)
		}
		if c.TxPackets < prev.TxPackets || c.TxFull < prev.TxFull {
			t.Errorf("round %d: counters went backwards after restart: tx %d -> %d, tx-full %d -> %d", round, prev.TxPackets, c.TxPackets, prev.TxFull, c.TxFull)
		}
		t.Logf("round %d: rx %d tx %d dropped %d", round, c.RxPackets, c.TxPackets, c.Dropped())
		prev = c
	}
}

// TestLimitsPcapMixPoolReturns replays every verdict (forward, reply,
// drops of each cheap reason, punts without a tap, multi-segment jumbo
// frames) from a pcap once, with a capture running: after the last frame
// and stop, every mbuf is back in the pool.
func TestLimitsPcapMixPoolReturns(t *testing.T) {
	var frames [][]byte
	for i := 0; i < 150; i++ {
		frames = append(frames, mixFrames(t, i)...)
	}
	path := writePcap(t, frames)
	name := "net_pcap_lp1"
	vdev(t, name, fmt.Sprintf("rx_pcap=%s,tx_pcap=/dev/null", path))
	cfg := probeConfig(t, name, "exception = false\nmempool_size = 1023")
	e, base := probeEngine(t, cfg)
	defer e.Close()
	cp, err := StartCapture(e.Workers(), CaptureFilter{Rx: true, Tx: true, Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	var c Counters
	var st dpdk.Stats
	for deadline := time.Now().Add(10 * time.Second); ; {
		c = engineCounters(t, e)
		st, _ = e.PortStats()
		if c.RxPackets+st.IErrors >= uint64(len(frames)) || time.Now().After(deadline) {
			break
		}
		cp.Drain(nil)
		time.Sleep(5 * time.Millisecond)
	}
	stopWithin(t, e, 2*time.Second)
	c = stoppedCounters(e)
	t.Logf("rx %d (port ierrors %d) of %d; tx %d tx-full %d; drops %v parse %v", c.RxPackets, st.IErrors, len(frames), c.TxPackets, c.TxFull, c.Drops, c.Parse)
	if c.RxPackets+st.IErrors != uint64(len(frames)) {
		t.Errorf("engine received %d + port errors %d, pcap holds %d", c.RxPackets, st.IErrors, len(frames))
	}
	poolWhole(t, e, base, "the mix and stop")
	out := c.Encap[encap.Forward] + c.Encap[encap.ICMPReply]
	if got := out + c.Punted + c.Dropped(); got != c.RxPackets {
		t.Errorf("received %d, forwarded+replied %d + punted %d + dropped %d = %d", c.RxPackets, out, c.Punted, c.Dropped(), got)
	}
}

// pcapFlood makes a net_pcap port that replays frames for ever
// (infinite_rx: it keeps one mbuf per frame of the file from the
// engine's pool) and writes what it sends to /dev/null.
func pcapFlood(t *testing.T, name string, frames [][]byte) {
	t.Helper()
	vdev(t, name, fmt.Sprintf("rx_pcap=%s,tx_pcap=/dev/null,infinite_rx=1", writePcap(t, frames)))
}

// ringPeer makes a ring pair; the engine uses "net_ring_"+a, and the
// test's port b (started on peerPool) can drain it.
func ringPeer(t *testing.T, a, b string, size int) *dpdk.RingPair {
	t.Helper()
	r, err := dpdk.NewRingPair(a, b, 1, size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dpdk.ConfigurePort(r.B, dpdk.PortConf{RxQueues: 1, TxQueues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := dpdk.SetupRxQueue(r.B, 0, 64, -1, peerPool); err != nil {
		t.Fatal(err)
	}
	if _, err := dpdk.SetupTxQueue(r.B, 0, 64, -1); err != nil {
		t.Fatal(err)
	}
	if err := dpdk.StartPort(r.B); err != nil {
		t.Fatal(err)
	}
	return r
}

func drainPort(port uint16) int {
	b, _ := dpdk.NewBurst(32)
	defer b.Free()
	total := 0
	for i := 0; i < 10000; i++ {
		n := dpdk.RxBurst(port, 0, b)
		if n == 0 {
			break
		}
		total += n
		b.FreeAll()
	}
	return total
}

// TestLimitsTxRingFull: the egress port is a net_ring nobody reads, 64
// slots, while the wire floods forwardable frames. The port takes what
// fits, the rest is freed and counted (TxFull), the loop still stops
// promptly, and once the ring is drained every mbuf is back in the pool.
func TestLimitsTxRingFull(t *testing.T) {
	var frames [][]byte
	for i := 0; i < 64; i++ {
		frames = append(frames, frame(t, "198.51.100.10", "203.0.113.7", uint16(2000+i), 80, layers.IPProtocolTCP, "S", 0, true))
	}
	pcapFlood(t, "net_pcap_lp2", frames)
	r := ringPeer(t, "txlpA", "txlpB", 64)
	defer func() {
		drainPort(r.B)
		dpdk.StopPort(r.B)
		r.Free()
	}()
	cfg := probeConfig(t, "net_pcap_lp2", "exception = false\nmempool_size = 1023\ntx_port = \"net_ring_txlpA\"")
	e, base := probeEngine(t, cfg)
	defer e.Close()
	c := runUntilRx(t, e, 20_000, 3*time.Second)
	out := c.Encap[encap.Forward]
	t.Logf("rx %d forwarded %d tx %d tx-full %d; in use %d over base %d", c.RxPackets, out, c.TxPackets, c.TxFull, inUse(e)-base, base)
	if c.RxPackets < 1000 {
		t.Fatalf("only %d received", c.RxPackets)
	}
	if c.TxPackets > 64 || c.TxPackets+c.TxFull != out {
		t.Errorf("sent %d (ring of 64) + refused %d, decided to send %d", c.TxPackets, c.TxFull, out)
	}
	if n := inUse(e) - base; n != int(c.TxPackets) {
		t.Errorf("%d mbufs out of the pool, %d sit in the ring", n, c.TxPackets)
	}
	if got := drainPort(r.B); got != int(c.TxPackets) {
		t.Errorf("drained %d from the ring, engine sent %d", got, c.TxPackets)
	}
	poolWhole(t, e, base, "draining the ring")
}

// TestLimitsTapDownPuntFlood: the exception path's kernel side is down
// (the tap interface was never brought up) while the wire floods frames
// for the host. Every punt is handed to the tap or freed and counted;
// the loop stops promptly; every mbuf is back in the pool.
func TestLimitsTapDownPuntFlood(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	var frames [][]byte
	for i := 0; i < 32; i++ {
		frames = append(frames, frame(t, fmt.Sprintf("198.51.100.%d", 1+i), "192.0.2.10", uint16(3000+i), 9, layers.IPProtocolUDP, "", 0, true))
	}
	frames = append(frames, mixFrames(t, 0)[6]) // ARP for the LB
	pcapFlood(t, "net_pcap_lp3", frames)
	cfg := probeConfig(t, "net_pcap_lp3", "exception = true\nexception_iface = \"fllp3\"\nmempool_size = 2047\nrx_desc = 256\n[dataplane.punt]\nother = 1000000\nneighbour = 1000000")
	e, base := probeEngine(t, cfg)
	defer e.Close()
	t.Logf("in use after NewEngine: %d (pcap holds %d frames, rx_desc 256)", base, len(frames))
	c := runUntilRx(t, e, 20_000, 3*time.Second)
	tapSt, _ := dpdk.PortStats(e.tap)
	t.Logf("rx %d punted %d limited %v tx-full %d; tap opackets %d oerrors %d; drops %v", c.RxPackets, c.Punted, c.PuntLimited, c.TxFull, tapSt.OPackets, tapSt.OErrors, c.Drops)
	if c.Punted == 0 {
		t.Fatal("nothing punted")
	}
	poolWhole(t, e, base, "a punt flood into a down tap")
	puntsAccounted(t, c, tapSt)
}

// TestLimitsRxDescOverUint16: rx_desc is accepted up to 2^20 by the
// config, but a queue has at most 65535 descriptors. An operator's
// rx_desc = 65600 must be refused (config or engine), or the queues must
// get what was asked for; it must not silently become 64.
func TestLimitsRxDescOverUint16(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	vdev(t, "net_null_lp4", "")
	cfg, err := config.Parse([]byte(strings.Replace(labToml("exception = true\nexception_iface = \"fllp4\"\nmempool_size = 1023\nrx_desc = 65600"),
		`port = "net_ring0"`, `port = "net_null_lp4"`, 1)), "probe.toml")
	if err != nil {
		t.Logf("config refuses rx_desc = 65600: %v", err)
		return
	}
	ec, shared := probeEngineConfig(t, cfg)
	e, err := NewEngine(ec, shared, probeLog())
	if err != nil {
		t.Logf("engine refuses rx_desc = 65600: %v", err)
		return
	}
	defer e.Close()
	// The tap's rx queue takes one mbuf per descriptor from the pool
	// (1023 mbufs: 65600 cannot fit).
	t.Errorf("rx_desc = 65600 accepted by config and engine with a pool of 1023 mbufs; the tap's rx queue took %d mbufs (uint16(65600) = %d)", inUse(e), uint16(cfg.Dataplane.RxDesc))
}

// TestLimitsMempoolSizeAcceptedButUnusable: the config accepts any
// mempool_size from 64 (config.MinDesc); the engine's pools have a
// per-lcore cache of 250 mbufs, which rte_mempool refuses for pools
// under 1.5 times that. A size the config accepts must start.
func TestLimitsMempoolSizeAcceptedButUnusable(t *testing.T) {
	vdev(t, "net_null_lp7", "")
	for _, size := range []int{64, 374, 375} {
		cfg, err := config.Parse([]byte(strings.Replace(labToml(fmt.Sprintf("exception = false\nmempool_size = %d\nrx_desc = 64\ntx_desc = 64", size)),
			`port = "net_ring0"`, `port = "net_null_lp7"`, 1)), "probe.toml")
		if err != nil {
			t.Logf("mempool_size %d refused by the config: %v", size, err)
			continue
		}
		ec, shared := probeEngineConfig(t, cfg)
		e, err := NewEngine(ec, shared, probeLog())
		if err != nil {
			t.Errorf("mempool_size %d: accepted by the config, refused by the engine: %v", size, err)
			continue
		}
		e.Close()
	}
}

// TestLimitsTapPoolStarved: the tap's rx queue wants one mbuf per
// descriptor (1024) from a pool of 511: NewEngine fails cleanly, and a
// properly sized engine starts afterwards in the same process.
func TestLimitsTapPoolStarved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	vdev(t, "net_null_lp8", "")
	cfg := probeConfig(t, "net_null_lp8", "exception = true\nexception_iface = \"fllp8\"\nmempool_size = 511\nrx_desc = 1024")
	ec, shared := probeEngineConfig(t, cfg)
	e, err := NewEngine(ec, shared, probeLog())
	if err == nil {
		in := inUse(e)
		// It started: does it forward at all, with the tap holding the pool?
		e.Run()
		time.Sleep(100 * time.Millisecond)
		c := engineCounters(t, e)
		st, _ := e.PortStats()
		stopWithin(t, e, time.Second)
		e.Close()
		t.Fatalf("NewEngine accepted a pool of 511 mbufs with rx queues of 1024 descriptors (%d in use after setup; in 100 ms: rx %d, port rx_nombuf %d)", in, c.RxPackets, st.RxNoMbuf)
	}
	t.Logf("error: %v", err)
	ec.MempoolSize = 4095
	if e, err = NewEngine(ec, shared, probeLog()); err != nil {
		t.Fatalf("NewEngine after the failed one: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Error(err)
	}
}

// TestLimitsRestartCounters: Run, Stop, Run again under a forwarding
// flood: the counters carry on (never go backwards) and the pool is
// whole after each stop.
func TestLimitsRestartCounters(t *testing.T) {
	var frames [][]byte
	for i := 0; i < 64; i++ {
		frames = append(frames, frame(t, "198.51.100.10", "203.0.113.7", uint16(4000+i), 80, layers.IPProtocolTCP, "S", 0, true))
	}
	pcapFlood(t, "net_pcap_lp9", frames)
	cfg := probeConfig(t, "net_pcap_lp9", "exception = false\nmempool_size = 1023")
	e, base := probeEngine(t, cfg)
	defer e.Close()
	var prev Counters
	for round := 0; round < 2; round++ {
		if err := e.Run(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(3 * time.Second); ; {
			if c := engineCounters(t, e); c.RxPackets >= prev.RxPackets+5000 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		stopWithin(t, e, time.Second)
		c := stoppedCounters(e)
		st, _ := e.PortStats()
		t.Logf("round %d: rx %d forwarded %d tx %d tx-full %d; port opackets %d", round, c.RxPackets, c.Encap[encap.Forward], c.TxPackets, c.TxFull, st.OPackets)
		if n := inUse(e) - base; n != 0 {
			t.Errorf("round %d: %d mbufs missing after stop", round, n)
		}
		if c.TxPackets < prev.TxPackets {
			t.Errorf("round %d: tx_packets went backwards after a restart: %d -> %d (rx %d -> %d)", round, prev.TxPackets, c.TxPackets, prev.RxPackets, c.RxPackets)
		}
		if c.TxPackets+c.TxFull != c.Encap[encap.Forward] {
			t.Errorf("round %d: forwarded %d, sent %d + refused %d", round, c.Encap[encap.Forward], c.TxPackets, c.TxFull)
		}
		prev = c
	}
}

// TestLimitsCloseUnderFloodReopen: Close (no Stop first) while the wire
// floods and the tap exists, then a new engine on the same ports in the
// same process: it forwards, stops, and its pool is whole.
func TestLimitsCloseUnderFloodReopen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	// net_null, not net_pcap: net_pcap's infinite_rx cannot set its rx
	// queue up again once stopped (a driver limitation).
	vdev(t, "net_null_lp10", "")
	cfg := probeConfig(t, "net_null_lp10", "exception = true\nexception_iface = \"fllp10\"\nmempool_size = 2047\nrx_desc = 256")
	ec, shared := probeEngineConfig(t, cfg)
	for round := 0; round < 3; round++ {
		e, err := NewEngine(ec, shared, probeLog())
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		base := inUse(e)
		if err := e.Run(); err != nil {
			e.Close()
			t.Fatal(err)
		}
		var c Counters
		for deadline := time.Now().Add(3 * time.Second); ; {
			if c = engineCounters(t, e); c.RxPackets >= 5000 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if round < 2 {
			// Close straight away, as a daemon's shutdown does.
			done := make(chan error, 1)
			go func() { done <- e.Close() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("round %d: close: %v", round, err)
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("round %d: Close under a flood did not return", round)
			}
			continue
		}
		stopWithin(t, e, time.Second)
		n := inUse(e) - base
		e.Close()
		if n != 0 {
			t.Errorf("reopened engine: %d mbufs missing after stop", n)
		}
		if c.RxPackets < 5000 {
			t.Errorf("reopened engine received only %d", c.RxPackets)
		}
	}
}

// TestLimitsTapDeletedUnderFlood: the kernel side of the exception path
// disappears (ip link del) during a punt flood: the loop carries on,
// every punt is taken or refused and counted, the pool stays whole.
func TestLimitsTapDeletedUnderFlood(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no iproute2")
	}
	var frames [][]byte
	for i := 0; i < 32; i++ {
		frames = append(frames, frame(t, fmt.Sprintf("198.51.100.%d", 1+i), "192.0.2.10", uint16(3000+i), 9, layers.IPProtocolUDP, "", 0, true))
	}
	pcapFlood(t, "net_pcap_lp11", frames)
	cfg := probeConfig(t, "net_pcap_lp11", "exception = true\nexception_iface = \"fllp11\"\nmempool_size = 2047\nrx_desc = 256\n[dataplane.punt]\nother = 1000000")
	e, base := probeEngine(t, cfg)
	defer e.Close()
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if out, err := exec.Command("ip", "link", "del", "fllp11").CombinedOutput(); err != nil {
		t.Logf("ip link del: %v: %s", err, out)
	}
	c0 := engineCounters(t, e)
	time.Sleep(200 * time.Millisecond)
	c1 := engineCounters(t, e)
	stopWithin(t, e, time.Second)
	c := stoppedCounters(e)
	tapSt, _ := dpdk.PortStats(e.tap)
	t.Logf("before delete+: rx %d punted %d; after: rx %d punted %d tx-full %d; tap opackets %d oerrors %d", c0.RxPackets, c0.Punted, c1.RxPackets, c1.Punted, c.TxFull, tapSt.OPackets, tapSt.OErrors)
	if c1.RxPackets <= c0.RxPackets {
		t.Errorf("the loop stopped receiving once the tap was gone (rx %d -> %d)", c0.RxPackets, c1.RxPackets)
	}
	poolWhole(t, e, base, "the tap went away")
	puntsAccounted(t, c, tapSt)
}

// TestLimitsBurstExtremes: burst 1 and burst 64 (conntrack.MaxBurst) over
// the whole verdict mix with a (down) exception tap: every frame is
// counted and the pool is whole after stop.
func TestLimitsBurstExtremes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	var frames [][]byte
	for i := 0; i < 100; i++ {
		frames = append(frames, mixFrames(t, i)...)
	}
	path := writePcap(t, frames)
	for i, burst := range []int{1, 64} {
		t.Run(fmt.Sprint(burst), func(t *testing.T) {
			name := fmt.Sprintf("net_pcap_lp12%d", i)
			vdev(t, name, fmt.Sprintf("rx_pcap=%s,tx_pcap=/dev/null", path))
			cfg := probeConfig(t, name, fmt.Sprintf("exception = true\nexception_iface = \"fllp12%d\"\nmempool_size = 2047\nrx_desc = 256\nburst = %d\n[dataplane.punt]\nother = 1000000\nneighbour = 1000000", i, burst))
			ec, shared := probeEngineConfig(t, cfg)
			e, err := NewEngine(ec, shared, probeLog())
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			base := inUse(e)
			if err := e.Run(); err != nil {
				t.Fatal(err)
			}
			var c Counters
			var st dpdk.Stats
			for deadline := time.Now().Add(10 * time.Second); ; {
				c = engineCounters(t, e)
				st, _ = e.PortStats()
				if c.RxPackets+st.IErrors >= uint64(len(frames)) || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			stopWithin(t, e, time.Second)
			c = stoppedCounters(e)
			tapSt, _ := dpdk.PortStats(e.tap)
			t.Logf("burst %d: rx %d of %d, punted %d, tap opackets %d, tx %d tx-full %d", burst, c.RxPackets, len(frames), c.Punted, tapSt.OPackets, c.TxPackets, c.TxFull)
			if c.RxPackets != uint64(len(frames)) {
				t.Errorf("received %d of %d", c.RxPackets, len(frames))
			}
			if n := inUse(e) - base; n != 0 {
				t.Errorf("%d mbufs missing from the pool", n)
			}
			out := c.Encap[encap.Forward] + c.Encap[encap.ICMPReply]
			if got := out + c.Punted + c.Dropped(); got != c.RxPackets {
				t.Errorf("received %d, out %d + punted %d + dropped %d = %d", c.RxPackets, out, c.Punted, c.Dropped(), got)
			}
		})
	}
}

// TestLimitsReopenWireHoldsOldPool: a wire port whose rx queue holds
// mbufs (net_tap, like most NIC drivers, fills its ring at setup) and an
// engine closed and made again in the same process. Close stops the
// ports but frees the pool while the stopped port's rx queue still holds
// its mbufs (dpdk.Mempool.Free: "no port queue may still use it (close
// the ports first)"); the next NewEngine's rx queue setup releases the
// old queue, freeing those mbufs into a pool that no longer exists.
// The new pool must account exactly for what its own queue took.
func TestLimitsReopenWireHoldsOldPool(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	vdev(t, "net_tap_lpw", "iface=fllpw")
	cfg := probeConfig(t, "net_tap_lpw", "exception = false\nmempool_size = 1023\nrx_desc = 256\ntx_desc = 256")
	ec, shared := probeEngineConfig(t, cfg)
	var held []int
	for round := 0; round < 3; round++ {
		e, err := NewEngine(ec, shared, probeLog())
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		held = append(held, inUse(e))
		avail := e.pools[0].Avail()
		if err := e.Run(); err != nil {
			e.Close()
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		stopWithin(t, e, time.Second)
		t.Logf("round %d: %d in use after setup, %d available", round, held[round], avail)
		if err := e.Close(); err != nil {
			t.Errorf("round %d: close: %v", round, err)
		}
	}
	for round, n := range held {
		if n != held[0] {
			t.Errorf("round %d: the rx queue's %d mbufs show as %d in use in the new pool (round 0: %d)", round, 256, n, held[0])
		}
	}
}

// TestLimitsCloseFreesPoolUnderPortQueue makes the use-after-free of
// Engine.Close visible: the wire port (net_tap, whose rx queue holds
// rx_desc mbufs) is only stopped when the pool is freed; a pool made
// afterwards (the same name, as the next engine's) then receives the old
// queue's mbufs when the port is closed: objects it never owned.
func TestLimitsCloseFreesPoolUnderPortQueue(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	const wire = "net_tap_lpu"
	if err := dpdk.VdevInit(wire, "iface=fllpu"); err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			dpdk.VdevUninit(wire)
		}
	}()
	cfg := probeConfig(t, wire, "exception = false\nmempool_size = 1023\nrx_desc = 256\ntx_desc = 256")
	ec, shared := probeEngineConfig(t, cfg)
	e, err := NewEngine(ec, shared, probeLog())
	if err != nil {
		t.Fatal(err)
	}
	held := inUse(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	mp, err := dpdk.NewMempool("fulcrum_pool0", 1023, dpdk.DefaultPoolCache, dpdk.DefaultDataRoom, dpdk.SocketAny)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Free()
	b, _ := dpdk.NewBurst(dpdk.MaxBurst)
	defer b.Free()
	var taken []*dpdk.Mbuf
	for len(taken) < 512 {
		if err := mp.AllocBulk(b, 32); err != nil {
			t.Fatal(err)
		}
		taken = append(taken, b.Mbufs()...)
		b.Reset()
	}
	before := mp.Avail()
	closed = true
	if err := dpdk.VdevUninit(wire); err != nil { // closes the port: its rx queue frees its mbufs
		t.Fatal(err)
	}
	after := mp.Avail()
	for _, m := range taken {
		m.Free()
	}
	t.Logf("old rx queue held %d mbufs; new pool available %d before the old port's close, %d after", held, before, after)
	if after != before {
		t.Errorf("closing the old engine's wire port put %d mbufs into a new pool that never owned them (Engine.Close freed the pool under a stopped port's rx queue)", after-before)
	}
}
