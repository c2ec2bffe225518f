//go:build dpdk

package dataplane

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/punt"
)

// The EAL starts once per test binary: no hugepages, no PCI, a per-process
// file prefix, the main lcore for the test and one worker lcore for the
// forwarding loop.
var peerPool *dpdk.Mempool

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	lcores := "0,1"
	if runtime.NumCPU() < 2 {
		lcores = "0@0,1@0"
	}
	args := []string{"--lcores", lcores, "--no-huge", "-m", "512", "--no-pci", "--log-level", "warning",
		"--file-prefix", fmt.Sprintf("fulcrum-dp-%d", os.Getpid())}
	if err := dpdk.InitEAL(args); err != nil {
		fmt.Fprintln(os.Stderr, "EAL:", err)
		return 1
	}
	dir := dpdk.RuntimeDir()
	defer func() {
		dpdk.CleanupEAL()
		os.RemoveAll(dir)
	}()
	var err error
	if peerPool, err = dpdk.NewMempool("fl_peer_pool", 16383, dpdk.DefaultPoolCache, dpdk.DefaultDataRoom, -1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer peerPool.Free()
	return m.Run()
}

// lab is an engine on one end of a net_ring cable and the test on the
// other end (the "peer": client, router and backends at once).
type lab struct {
	t      *testing.T
	cfg    *config.Config
	enc    *encap.Encapsulator
	nh     NextHop
	shared *Shared
	eng    *Engine
	ring   *dpdk.RingPair
	peer   uint16
	tx, rx *dpdk.Burst
}

var ringSeq int

func newLab(t *testing.T, toml string) *lab {
	t.Helper()
	ringSeq++
	wire, peer := fmt.Sprintf("w%d", ringSeq), fmt.Sprintf("p%d", ringSeq)
	toml = strings.Replace(toml, `port = "net_ring0"`, fmt.Sprintf(`port = "net_ring_%s"`, wire), 1)
	cfg, err := config.Parse([]byte(toml), "lab.toml")
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{t: t, cfg: cfg, shared: &Shared{}}
	d := &cfg.Dataplane
	if l.enc, err = encap.New(encap.Config{SrcV4: d.LBIPv4.Addr, SrcV6: d.LBIPv6.Addr, TTL: d.TTL, DF: encap.DFSet, MTU: d.MTU, GUEPort: d.GUEPort}); err != nil {
		t.Fatal(err)
	}
	l.nh = NextHop{MAC4: d.NextHopMAC.HW, MAC6: d.NextHopMAC.HW, Has4: d.NextHopMAC.Set, Has6: d.NextHopMAC.Set}
	svc, err := servicesOf(cfg, l.enc, nil, nil, l.nh)
	if err != nil {
		t.Fatal(err)
	}
	l.shared.Services.Store(svc)
	if l.ring, err = dpdk.NewRingPair(wire, peer, 1, 4096); err != nil {
		t.Fatal(err)
	}
	l.peer = l.ring.B
	if _, err := dpdk.ConfigurePort(l.peer, dpdk.PortConf{RxQueues: 1, TxQueues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := dpdk.SetupRxQueue(l.peer, 0, 1024, -1, peerPool); err != nil {
		t.Fatal(err)
	}
	if _, err := dpdk.SetupTxQueue(l.peer, 0, 1024, -1); err != nil {
		t.Fatal(err)
	}
	if err := dpdk.StartPort(l.peer); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	key, err := flowKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ec := EngineConfig{Port: d.Port, TxPort: d.TxPort, Burst: d.Burst, RxDesc: d.RxDesc, TxDesc: d.TxDesc, MempoolSize: d.MempoolSize,
		IdleBackoff: *d.IdleBackoff, IdleMaxSleep: d.IdleMaxSleep, Exception: *d.Exception, ExceptionIf: d.ExceptionIf,
		HashKey: key, Conntrack: conntrack.DefaultConfig()}
	ec.Conntrack.Capacity = cfg.Conntrack.Capacity
	if l.eng, err = NewEngine(ec, l.shared, log); err != nil {
		t.Fatal(err)
	}
	l.tx, _ = dpdk.NewBurst(32)
	l.rx, _ = dpdk.NewBurst(32)
	t.Cleanup(l.close)
	if err := l.eng.Run(); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *lab) close() {
	if err := l.eng.Close(); err != nil {
		l.t.Error(err)
	}
	l.drain(50 * time.Millisecond)
	dpdk.StopPort(l.peer)
	if err := l.ring.Free(); err != nil {
		l.t.Error(err)
	}
	l.tx.Free()
	l.rx.Free()
}

// send transmits frames from the peer, in bursts, retrying while the ring
// is full.
func (l *lab) send(frames ...[]byte) {
	l.t.Helper()
	for len(frames) > 0 {
		n := min(len(frames), 32)
		l.tx.Reset()
		for _, f := range frames[:n] {
			if len(f) >= 6 && [6]byte(f[:6]) == portMAC && l.eng.PortMAC != portMAC {
				// To the engine's port, as a router sends (its MAC is
				// the ring's, made up at start): frames to another
				// station's MAC are not for the host (not-for-host).
				f = append([]byte(nil), f...)
				copy(f[:6], l.eng.PortMAC[:])
			}
			m := peerPool.Alloc()
			if m == nil {
				l.t.Fatal("peer pool empty")
			}
			if !m.SetData(f) {
				l.t.Fatalf("frame of %d bytes does not fit an mbuf", len(f))
			}
			l.tx.Add(m)
		}
		sent := 0
		deadline := time.Now().Add(5 * time.Second)
		for sent < n {
			sent += dpdk.TxBurst(l.peer, 0, shift(l.tx, sent), n-sent)
			if time.Now().After(deadline) {
				l.t.Fatalf("peer could not send: ring full for 5s")
			}
		}
		frames = frames[n:]
	}
}

// shift returns b itself after moving mbufs [from:] to its front.
func shift(b *dpdk.Burst, from int) *dpdk.Burst {
	if from == 0 {
		return b
	}
	ms := b.Mbufs()
	rest := append([]*dpdk.Mbuf(nil), ms[from:]...)
	b.Reset()
	for _, m := range rest {
		b.Add(m)
	}
	return b
}

// recv collects frames the engine sent until want have arrived or the
// deadline passes.
func (l *lab) recv(want int, timeout time.Duration) [][]byte {
	var out [][]byte
	deadline := time.Now().Add(timeout)
	for len(out) < want && time.Now().Before(deadline) {
		n := dpdk.RxBurst(l.peer, 0, l.rx)
		for _, m := range l.rx.Mbufs() {
			out = append(out, append([]byte(nil), m.Data()...))
		}
		if n > 0 {
			l.rx.FreeAll()
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return out
}

func (l *lab) drain(d time.Duration) int { return len(l.recv(1<<30, d)) }

// counters sums the workers' snapshots.
func (l *lab) counters() Counters {
	l.t.Helper()
	var sum Counters
	for _, w := range l.eng.Workers() {
		var c Counters
		if !w.Snapshot(&c, 5*time.Second) {
			l.t.Fatal("worker did not answer a snapshot")
		}
		sum.Add(&c)
	}
	return sum
}

var labConfig = testConfig + `
[eal]
memory_mb = 512
`

func labToml(extra string) string {
	return strings.Replace(labConfig, "[conntrack]", extra+"\n[conntrack]", 1)
}

func TestEngineForwardsToMaglevBackends(t *testing.T) {
	l := newLab(t, labToml("exception = false"))
	r := &rig{t: t, cfg: l.cfg}
	r.key, _ = flowKey(l.cfg)
	web := map[string]int{"be1": 1, "be2": 1, "be3": 1}
	web6 := map[string]int{"six1": 1, "six2": 1}
	var frames, acks [][]byte
	var want []netip.Addr
	for i := 0; i < 1000; i++ {
		sport := uint16(1000 + i)
		if i%3 == 0 {
			acks = append(acks, frame(t, "2001:db8:aaaa::1", "2001:db8:ffff::7", sport, 443, layers.IPProtocolTCP, "A", 100, false))
			frames = append(frames, frame(t, "2001:db8:aaaa::1", "2001:db8:ffff::7", sport, 443, layers.IPProtocolTCP, "S", 100, false))
			want = append(want, backendAddr(r, "web6", r.expectBackend("web6", web6, "2001:db8:aaaa::1", "2001:db8:ffff::7", sport, 443, 6)))
		} else {
			acks = append(acks, frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "A", 0, true))
			frames = append(frames, frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "S", 0, true))
			want = append(want, backendAddr(r, "web", r.expectBackend("web", web, "198.51.100.10", "203.0.113.7", sport, 80, 6)))
		}
	}
	l.send(frames...)
	out := l.recv(len(frames), 10*time.Second)
	if len(out) != len(frames) {
		t.Fatalf("received %d of %d; counters %+v", len(out), len(frames), l.counters())
	}
	// A net_ring with one queue keeps order.
	for i, o := range out {
		dst, inner, _ := decodeTunnelFrom(t, o, l.eng.PortMAC)
		if dst != want[i] {
			t.Errorf("packet %d to %v, want %v", i, dst, want[i])
		}
		if !bytes.Equal(inner, ipPacket(frames[i])) {
			t.Errorf("packet %d: inner packet differs", i)
		}
	}
	c := l.counters()
	if c.RxPackets != 1000 || c.Encap[encap.Forward] != 1000 || c.TxPackets != 1000 || c.CTMisses != 1000 {
		t.Errorf("rx %d forwarded %d tx %d misses %d", c.RxPackets, c.Encap[encap.Forward], c.TxPackets, c.CTMisses)
	}
	// The same flows' next packets are conntrack hits on the same backends,
	// also after a table change (be1 drained).
	s, err := servicesOf(l.cfg, l.enc, l.shared.Services.Load(), Overrides{{"web", "be1"}: {Weight: 0}}, l.nh)
	if err != nil {
		t.Fatal(err)
	}
	l.shared.Services.Store(s)
	l.send(acks...) // the same flows, established
	out = l.recv(len(acks), 10*time.Second)
	for i, o := range out {
		if dst, _, _ := decodeTunnelFrom(t, o, l.eng.PortMAC); dst != want[i] {
			t.Errorf("after swap: packet %d to %v, want %v", i, dst, want[i])
		}
	}
	if c := l.counters(); c.CTHits != 1000 {
		t.Errorf("conntrack hits %d, want 1000", c.CTHits)
	}
}

func flowKey(cfg *config.Config) (k [16]byte, err error) {
	var fk = cfg.Dataplane.HashKey
	var b []byte
	if _, err = fmt.Sscanf(fk, "%x", &b); err != nil {
		return k, err
	}
	copy(k[:], b)
	return k, nil
}

func TestEngineICMPAndDrops(t *testing.T) {
	l := newLab(t, labToml("exception = false"))
	big := frame(t, "198.51.100.10", "203.0.113.7", 5, 80, layers.IPProtocolTCP, "A", 1480, true)
	frames := [][]byte{
		big,
		frame(t, "198.51.100.10", "203.0.113.7", 5, 81, layers.IPProtocolTCP, "S", 0, true),      // no service
		frame(t, "198.51.100.10", "192.0.2.10", 5, 179, layers.IPProtocolTCP, "S", 0, true),      // host traffic, no exception path
		frame(t, "198.51.100.10", "203.0.113.7", 5, 80, layers.IPProtocolTCP, "S", 0, true)[:20], // truncated
	}
	l.send(frames...)
	out := l.recv(1, 5*time.Second)
	if len(out) != 1 {
		t.Fatalf("received %d frames, want the one ICMP reply", len(out))
	}
	pk := gopacket.NewPacket(out[0], layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	ic, _ := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if ip == nil || ic == nil {
		t.Fatalf("not an ICMP packet: %v", pk)
	}
	if ip.SrcIP.String() != "203.0.113.7" || ip.DstIP.String() != "198.51.100.10" || ic.TypeCode != layers.CreateICMPv4TypeCode(3, 4) {
		t.Errorf("ICMP %v -> %v type %v", ip.SrcIP, ip.DstIP, ic.TypeCode)
	}
	// Next-hop MTU = 1500 - GRE over IPv4 overhead (24).
	if mtu := ic.Seq; mtu != 1500-24 {
		t.Errorf("next-hop MTU %d, want %d", mtu, 1500-24)
	}
	if l.drain(100*time.Millisecond) != 0 {
		t.Error("more frames than the ICMP reply")
	}
	c := l.counters()
	if c.Encap[encap.ICMPReply] != 1 || c.Drops[DropNoService] != 1 || c.Drops[DropNoException] != 1 || c.Punted != 0 || sumParse(&c) != 1 {
		t.Errorf("counters: encap %v drops %v parse %v punted %d", c.Encap, c.Drops, c.Parse, c.Punted)
	}
}

// TestEngineSoak pushes a million frames of mixed valid, malformed and
// non-VIP traffic through the engine: nothing crashes, and every frame is
// forwarded, answered, punted or dropped under a reason.
func TestEngineSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak skipped in -short")
	}
	l := newLab(t, labToml("exception = false"))
	var tmpl [][]byte
	for i := 0; i < 997; i++ {
		sport := uint16(i)
		switch i % 10 {
		case 0:
			f := frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "S", 0, true)
			tmpl = append(tmpl, f[:14+i%30]) // truncated somewhere in the IP header
		case 1:
			tmpl = append(tmpl, frame(t, "198.51.100.10", "192.0.2.99", sport, 22, layers.IPProtocolTCP, "S", 0, true)) // not a VIP
		case 2:
			tmpl = append(tmpl, frame(t, "198.51.100.10", "203.0.113.7", sport, 8080, layers.IPProtocolTCP, "S", 0, true)) // no service
		case 3:
			tmpl = append(tmpl, frame(t, "2001:db8:aaaa::1", "2001:db8:ffff::7", sport, 443, layers.IPProtocolTCP, "A", 64, false))
		default:
			tmpl = append(tmpl, frame(t, fmt.Sprintf("198.51.100.%d", i%200), "203.0.113.7", sport, 80, layers.IPProtocolTCP, "SA"[i%2:i%2+1], 16, true))
		}
	}
	const total = 1_000_000
	received := 0
	done := make(chan struct{})
	go func() { // the receiving side of the peer runs concurrently
		defer close(done)
		rx, _ := dpdk.NewBurst(32)
		defer rx.Free()
		idle := time.Now()
		for time.Since(idle) < 2*time.Second {
			if n := dpdk.RxBurst(l.peer, 0, rx); n > 0 {
				received += n
				rx.FreeAll()
				idle = time.Now()
			} else {
				runtime.Gosched()
			}
		}
	}()
	batch := make([][]byte, 0, 32)
	for i := 0; i < total; i++ {
		batch = append(batch, tmpl[i%len(tmpl)])
		if len(batch) == 32 {
			l.send(batch...)
			batch = batch[:0]
		}
	}
	l.send(batch...)
	<-done
	c := l.counters()
	if c.RxPackets != total {
		t.Fatalf("engine received %d of %d", c.RxPackets, total)
	}
	out := c.Encap[encap.Forward] + c.Encap[encap.ICMPReply]
	if got := out + c.Punted + c.Dropped(); got != total {
		t.Errorf("forwarded %d + punted %d + dropped %d = %d, want %d", out, c.Punted, c.Dropped(), got, total)
	}
	if uint64(received) != c.TxPackets || c.TxPackets != out-c.TxFull {
		t.Errorf("peer received %d, engine sent %d, decided to send %d (tx-full %d)", received, c.TxPackets, out, c.TxFull)
	}
	t.Logf("soak: %d frames: forwarded %d, dropped %d (parse %v, dataplane %v)", total, out, c.Dropped(), c.Parse, c.Drops)
}

// TestExceptionPath: an ARP request and a ping for the LB's own address go
// through the tap to the kernel, and the kernel's answers come back out of
// the wire port.
func TestExceptionPath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the exception path needs root (tap device)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 not installed")
	}
	l, ns := newExceptionLab(t, "fltest0", "")
	peerMAC := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x77}
	if !l.arpAnswered(peerMAC) {
		t.Fatalf("no ARP reply from the kernel for 192.0.2.10")
	}
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{192, 0, 2, 1}, DstIP: net.IP{192, 0, 2, 10}}
	_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: peerMAC, DstMAC: l.eng.PortMAC[:], EthernetType: layers.EthernetTypeIPv4}, ip,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 0x4242, Seq: 1}, gopacket.Payload("fulcrum"))
	ping := append([]byte(nil), buf.Bytes()...)
	var gotPong bool
	deadline := time.Now().Add(10 * time.Second)
	for !gotPong && time.Now().Before(deadline) {
		l.send(ping)
		for _, f := range l.recv(1<<20, 200*time.Millisecond) {
			pk := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			if ic, ok := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok && ic.TypeCode.Type() == layers.ICMPv4TypeEchoReply && ic.Id == 0x4242 {
				gotPong = true
			}
		}
	}
	if !gotPong {
		for _, a := range [][]string{{"-s", "link", "show", "fltest0"}, {"neigh", "show", "dev", "fltest0"}, {"addr", "show", "dev", "fltest0"}, {"route", "get", "192.0.2.1"}} {
			out, _ := exec.Command("ip", append([]string{"-n", ns}, a...)...).CombinedOutput()
			t.Logf("ip %v:\n%s", a, out)
		}
		t.Fatal("no echo reply from the kernel for 192.0.2.10")
	}
	c := l.counters()
	if c.Punted < 2 {
		t.Errorf("punted %d, want at least the ARP request and the ping", c.Punted)
	}
}

// newExceptionLab is a lab with its exception tap, iface, in a network
// namespace of the test's own (so the kernel's answers can never leave
// through the host's interfaces), set up as the daemon sets it up
// (package exception), by hand: package exception imports dataplane.
// puntKeys is a [dataplane.punt] table's keys, or "".
func newExceptionLab(t *testing.T, iface, puntKeys string) (*lab, string) {
	t.Helper()
	extra := fmt.Sprintf("exception = true\nexception_iface = %q", iface)
	if puntKeys != "" {
		extra += "\n[dataplane.punt]\n" + puntKeys
	}
	l := newLab(t, labToml(extra))
	ns := fmt.Sprintf("fulcrum-dptest-%d-%s", os.Getpid(), iface)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, a := range [][]string{{"link", "set", "dev", iface, "netns", ns},
		{"-n", ns, "link", "set", "dev", iface, "address", net.HardwareAddr(l.eng.PortMAC[:]).String()},
		{"-n", ns, "link", "set", "dev", iface, "up"},
		{"-n", ns, "addr", "replace", "192.0.2.10/24", "dev", iface}} {
		if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", a, err, out)
		}
	}
	return l, ns
}

// arpAnswered asks the kernel behind the tap for 192.0.2.10 from peerMAC
// until it answers (true) or 10 s pass.
func (l *lab) arpAnswered(peerMAC net.HardwareAddr) bool {
	buf := gopacket.NewSerializeBuffer()
	_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
		&layers.Ethernet{SrcMAC: peerMAC, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest,
			SourceHwAddress: peerMAC, SourceProtAddress: []byte{192, 0, 2, 1}, DstHwAddress: make([]byte, 6), DstProtAddress: []byte{192, 0, 2, 10}})
	arpReq := append([]byte(nil), buf.Bytes()...)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		l.send(arpReq)
		for _, f := range l.recv(1<<20, 200*time.Millisecond) {
			pk := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			if a, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP); ok && a.Operation == layers.ARPReply &&
				net.IP(a.SourceProtAddress).String() == "192.0.2.10" && bytes.Equal(a.SourceHwAddress, l.eng.PortMAC[:]) && bytes.Equal(a.DstHwAddress, peerMAC) {
				return true
			}
		}
	}
	return false
}

// A flood for the LB's own address through a real tap: the forwarding
// core hands the kernel at most the other class's budget (its burst, then
// its rate over the time the flood took), counts the rest, and the kernel
// receives exactly what was handed to it. ARP, a class of its own, is
// still answered right after.
func TestExceptionPathFloodBounded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the exception path needs root (tap device)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 not installed")
	}
	const rate, n = 500, 4000
	l, ns := newExceptionLab(t, "fltest1", fmt.Sprintf("other = %d", rate))
	kernelRx := func() uint64 {
		out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/fltest1/statistics/rx_packets").Output()
		if err != nil {
			t.Fatalf("rx_packets: %v", err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if !l.arpAnswered(net.HardwareAddr{0x02, 0, 0, 0, 0, 0x76}) { // the tap is up
		t.Fatal("no ARP reply before the flood")
	}
	l.drain(50 * time.Millisecond)
	c0, k0 := l.counters(), kernelRx()
	var frames [][]byte
	for i := 0; i < n; i++ {
		frames = append(frames, frame(t, fmt.Sprintf("198.51.%d.%d", 100+i/250, 1+i%250), "192.0.2.10", uint16(1024+i), 9, layers.IPProtocolUDP, "", 0, true))
	}
	start := time.Now()
	l.send(frames...)
	var c Counters
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c = l.counters(); c.RxPackets-c0.RxPackets >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	punted, limited := c.Punted-c0.Punted, c.PuntLimited[punt.Other]-c0.PuntLimited[punt.Other]
	if c.RxPackets-c0.RxPackets != n || punted+limited != n {
		t.Fatalf("received %d, punted %d, limited %d; want %d received, all punted or limited", c.RxPackets-c0.RxPackets, punted, limited, n)
	}
	// The budget was full at the start: its burst, then rate a second
	// (the dataplane's clock has 1 ms steps: one more).
	if bound := uint64(punt.Burst(rate) + rate*(int(took.Milliseconds())+1)/1000); punted > bound {
		t.Errorf("punted %d of %d in %v, over the budget's %d", punted, n, took, bound)
	}
	if limited == 0 {
		t.Errorf("nothing limited: %d punted in %v", punted, took)
	}
	if c.Drops[DropPuntRateLimited]-c0.Drops[DropPuntRateLimited] != limited {
		t.Errorf("punt-rate-limited %d, other class %d", c.Drops[DropPuntRateLimited]-c0.Drops[DropPuntRateLimited], limited)
	}
	// What was handed to the kernel arrived, less what the tap refused.
	for deadline := time.Now().Add(5 * time.Second); ; {
		c = l.counters()
		got, want := kernelRx()-k0, punted-(c.TxFull-c0.TxFull)
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel received %d, the dataplane handed it %d", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !l.arpAnswered(net.HardwareAddr{0x02, 0, 0, 0, 0, 0x77}) {
		t.Error("no ARP reply right after the flood")
	}
	t.Logf("%d packets for the host in %v: %d punted, %d limited", n, took, punted, limited)
}
