//go:build dpdk

package dpdk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestPortsAndInfo(t *testing.T) {
	if got := PortCount(); got != 2 {
		t.Errorf("PortCount = %d, want 2 (net_null0, net_ring0)", got)
	}
	if got := Ports(); len(got) != 2 || min(got[0], got[1]) != min(nullPort, loopPort) || max(got[0], got[1]) != max(nullPort, loopPort) {
		t.Errorf("Ports = %v, want net_null0 %d and net_ring0 %d", got, nullPort, loopPort)
	}
	for _, tc := range []struct {
		name, driver string
		port         uint16
	}{
		{"net_null0", "net_null", nullPort},
		{"net_ring0", "net_ring", loopPort},
	} {
		name, err := PortName(tc.port)
		if err != nil || name != tc.name {
			t.Errorf("PortName(%d) = %q, %v; want %q", tc.port, name, err, tc.name)
		}
		info, err := PortInfo(tc.port)
		if err != nil {
			t.Fatal(err)
		}
		if info.Driver != tc.driver || info.MaxRxQueues == 0 || info.MaxTxQueues == 0 {
			t.Errorf("PortInfo(%s) = %+v, want driver %s and queues", tc.name, info, tc.driver)
		}
	}
}

func TestErrorsCarryDPDKMessage(t *testing.T) {
	_, err := PortByName("net_nosuch0")
	if !errors.Is(err, syscall.ENODEV) || !strings.Contains(err.Error(), `"net_nosuch0"`) {
		t.Errorf("PortByName(missing) = %v, want ENODEV naming the port", err)
	}
	if err := InitEAL(nil); !errors.Is(err, syscall.EALREADY) {
		t.Errorf("second InitEAL = %v, want EALREADY", err)
	}
	_, err = NewMempool("fl_test_pool", 64, 0, DefaultDataRoom, SocketAny)
	if !errors.Is(err, syscall.EEXIST) || !strings.Contains(err.Error(), "File exists") {
		t.Errorf("duplicate mempool = %v, want EEXIST with strerror text", err)
	}
	if _, err := ConfigurePort(loopPort, PortConf{RxQueues: 1000, TxQueues: 1}); !errors.Is(err, syscall.EINVAL) ||
		!strings.Contains(err.Error(), "(net_ring0): configure 1000 rx / 1 tx queues: Invalid argument") {
		t.Errorf("configure 1000 queues = %v, want EINVAL naming net_ring0", err)
	}
	if got := Errno(syscall.EINVAL).Error(); got != "Invalid argument" {
		t.Errorf("Errno(EINVAL) = %q, want rte_strerror's %q", got, "Invalid argument")
	}
}

// TestInitEALError starts a child test binary whose TestMain passes the
// EAL an unknown option, and checks the error it reports.
func TestInitEALError(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ealErrorChild+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("child with a bad EAL option succeeded:\n%s", out)
	}
	// DPDK's own reason, then rte_strerror of rte_errno.
	want := `eal init ["--no-such-eal-option"]: unrecognized option '--no-such-eal-option'; Invalid 'command line' arguments.: Invalid argument`
	if !strings.Contains(string(out), want) {
		t.Errorf("child output lacks %q:\n%s", want, out)
	}
}

func TestConfigureRSS(t *testing.T) {
	nullInfo, err := PortInfo(nullPort)
	if err != nil {
		t.Fatal(err)
	}
	ringInfo, err := PortInfo(loopPort)
	if err != nil {
		t.Fatal(err)
	}
	if ringInfo.FlowTypeRSSOffloads != 0 || RSSDefault&nullInfo.FlowTypeRSSOffloads == 0 {
		t.Fatalf("RSS support: net_ring %#x, net_null %#x; the test needs none on net_ring and some on net_null",
			ringInfo.FlowTypeRSSOffloads, nullInfo.FlowTypeRSSOffloads)
	}
	for _, tc := range []struct {
		name   string
		port   uint16
		queues uint16
		rss    uint64
		want   uint64
	}{
		{"no RSS support, 2 queues", loopPort, 2, RSSDefault, 0},
		{"RSS, 1 queue", nullPort, 1, RSSDefault, 0},
		{"RSS, 2 queues", nullPort, 2, RSSDefault, RSSDefault & nullInfo.FlowTypeRSSOffloads},
		{"RSS asked off", nullPort, 2, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup := startPort(t, tc.port, PortConf{RxQueues: tc.queues, TxQueues: tc.queues, RSS: tc.rss})
			if setup.RSS != tc.want {
				t.Errorf("RSS = %#x, want %#x", setup.RSS, tc.want)
			}
		})
	}
}

func TestLinkMACPromiscuous(t *testing.T) {
	if l, err := PortLink(loopPort); err != nil || l.Up {
		t.Errorf("stopped net_ring0 link = %+v, %v; want down", l, err)
	}
	startPort(t, loopPort, PortConf{RxQueues: 1, TxQueues: 1})
	l, err := PortLink(loopPort)
	if err != nil || !l.Up || l.SpeedMbps == 0 {
		t.Errorf("started net_ring0 link = %+v, %v; want up with a speed", l, err)
	}
	m1, err := PortMAC(loopPort)
	if err != nil {
		t.Fatal(err)
	}
	if m2, _ := PortMAC(loopPort); m1 != m2 {
		t.Errorf("MAC changed between reads: %s, %s", m1, m2)
	}
	for _, on := range []bool{true, false, true} {
		if err := SetPromiscuous(loopPort, on); err != nil {
			t.Fatal(err)
		}
		if got, err := Promiscuous(loopPort); err != nil || got != on {
			t.Errorf("promiscuous after set %v = %v, %v", on, got, err)
		}
	}
}

// TestTapVdev creates the kind of port the exception path uses, at run
// time, with a MAC the test chooses, and reads it back.
func TestTapVdev(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun:", err)
	}
	name := "net_tap_fltest"
	iface := fmt.Sprintf("flt%d", os.Getpid()%1000000)
	want := MAC{0x02, 0x00, 0x5e, 0x00, 0x53, 0x01}
	if err := VdevInit(name, "iface="+iface+",mac="+want.String()); err != nil {
		t.Skip("net_tap unavailable here:", err)
	}
	defer func() {
		if err := VdevUninit(name); err != nil {
			t.Error(err)
		}
	}()
	port, err := PortByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := PortMAC(port); err != nil || got != want {
		t.Errorf("tap MAC = %s, %v; want %s", got, err, want)
	}
	info, err := PortInfo(port)
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "net_tap" || info.IfIndex == 0 {
		t.Errorf("tap info = driver %q ifindex %d, want net_tap with a kernel interface", info.Driver, info.IfIndex)
	}
	if err := VdevInit(name, "iface="+iface); err == nil {
		t.Error("creating the same vdev twice succeeded")
	}
}

func newRingPair(t testing.TB, queues int) *RingPair {
	t.Helper()
	rp, err := NewRingPair("fla", "flb", queues, 1024)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rp.Free(); err != nil {
			t.Error(err)
		}
	})
	if name, _ := PortName(rp.A); name != "net_ring_fla" {
		t.Errorf("ring pair port A is %q, want net_ring_fla", name)
	}
	for _, p := range []uint16{rp.A, rp.B} {
		startPort(t, p, PortConf{RxQueues: uint16(queues), TxQueues: uint16(queues), RSS: RSSDefault})
	}
	return rp
}

// TestRingPairBytes sends gopacket-built frames through a pair of
// net_ring ports in both directions and compares what arrives byte for
// byte, then checks the counters.
func TestRingPairBytes(t *testing.T) {
	checkPoolDrained(t)
	rp := newRingPair(t, 1)
	tx, rx := newBurst(t, DefaultBurst), newBurst(t, MaxBurst)

	sizes := []int{18, 100, 1472} // 60-byte minimum frame to 1514
	var pkts [][]byte
	for i := 0; i < DefaultBurst; i++ {
		pkts = append(pkts, udpPacket(t, uint16(1000+i), sizes[i%len(sizes)]))
	}
	var wantBytes uint64
	for _, p := range pkts {
		wantBytes += uint64(len(p))
	}

	for _, dir := range []struct {
		name     string
		from, to uint16
	}{{"a->b", rp.A, rp.B}, {"b->a", rp.B, rp.A}} {
		t.Run(dir.name, func(t *testing.T) {
			for _, p := range []uint16{rp.A, rp.B} {
				if err := ResetStats(p); err != nil {
					t.Fatal(err)
				}
			}
			fillBurst(t, tx, pkts)
			if n := TxBurst(dir.from, 0, tx, tx.Len()); n != len(pkts) {
				tx.FreeMbufs(n, tx.Len())
				t.Fatalf("TxBurst sent %d of %d", n, len(pkts))
			}
			tx.Reset()
			if n := RxBurst(dir.from, 0, rx); n != 0 {
				rx.FreeAll()
				t.Fatalf("sender received %d of its own packets", n)
			}
			n := RxBurst(dir.to, 0, rx)
			defer rx.FreeAll()
			if n != len(pkts) {
				t.Fatalf("RxBurst got %d, want %d", n, len(pkts))
			}
			for i, m := range rx.Mbufs() {
				if m.NbSegs() != 1 || m.PktLen() != len(pkts[i]) {
					t.Errorf("packet %d: %d segs, pkt_len %d; want 1, %d", i, m.NbSegs(), m.PktLen(), len(pkts[i]))
				}
				if !bytes.Equal(m.Data(), pkts[i]) {
					t.Errorf("packet %d differs:\n got %x\nwant %x", i, m.Data(), pkts[i])
				}
			}

			sent, err := PortStats(dir.from)
			if err != nil {
				t.Fatal(err)
			}
			got, err := PortStats(dir.to)
			if err != nil {
				t.Fatal(err)
			}
			if sent.OPackets != uint64(n) || got.IPackets != uint64(n) || sent.OErrors != 0 || got.IErrors != 0 {
				t.Errorf("stats: sender %+v, receiver %+v; want %d packets each way, no errors", sent, got, n)
			}
			// net_ring in 22.11 counts no bytes; a driver that does must count them all.
			if (sent.OBytes != 0 && sent.OBytes != wantBytes) || (got.IBytes != 0 && got.IBytes != wantBytes) {
				t.Errorf("byte stats: sent %d, received %d; want 0 or %d", sent.OBytes, got.IBytes, wantBytes)
			}
			xs, err := PortXStats(dir.to)
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := xstat(xs, "rx_good_packets"); !ok || v != uint64(n) {
				t.Errorf("xstat rx_good_packets = %d (present %v), want %d; all: %v", v, ok, n, xs)
			}
			if err := ResetXStats(dir.to); err != nil {
				t.Fatal(err)
			}
			if got, _ := PortStats(dir.to); got.IPackets != 0 {
				t.Errorf("after reset ipackets = %d", got.IPackets)
			}
		})
	}
}

func xstat(xs []XStat, name string) (uint64, bool) {
	for _, x := range xs {
		if x.Name == name {
			return x.Value, true
		}
	}
	return 0, false
}

// TestTxBuffer checks that a full ring's refusals are freed and counted,
// with the net_ring0 loopback port whose ring holds 1024 packets.
func TestTxBuffer(t *testing.T) {
	checkPoolDrained(t)
	startPort(t, loopPort, PortConf{RxQueues: 1, TxQueues: 1})
	tb, err := NewTxBuffer(loopPort, 0, DefaultBurst)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Free()
	b := newBurst(t, DefaultBurst)
	pkt := udpPacket(t, 9, 18)
	// fill adds n copies of pkt to tb (which flushes whenever it is full).
	fill := func(n int) {
		pkts := make([][]byte, n)
		for i := range pkts {
			pkts[i] = pkt
		}
		fillBurst(t, b, pkts)
		for _, m := range b.Mbufs() {
			tb.Add(m)
		}
		b.Reset()
	}
	const total = 1100 // more than the ring holds
	for added := 0; added < total; added += DefaultBurst {
		fill(min(DefaultBurst, total-added))
	}
	tb.Flush()
	if tb.Len() != 0 || tb.Sent+tb.Dropped != total || tb.Dropped == 0 {
		t.Errorf("sent %d dropped %d pending %d; want %d in all, some dropped", tb.Sent, tb.Dropped, tb.Len(), total)
	}
	// looped checks and frees what came back around the ring.
	looped := func(r *Burst) {
		for _, m := range r.Mbufs() {
			if !bytes.Equal(m.Data(), pkt) {
				t.Fatalf("looped packet differs: %x", m.Data())
			}
		}
		r.FreeAll()
	}
	var got uint64
	for RxBurst(loopPort, 0, b) > 0 {
		got += uint64(b.Len())
		looped(b)
	}
	if got != tb.Sent {
		t.Errorf("received %d, TxBuffer counted %d sent", got, tb.Sent)
	}

	// FlushRx: the ring filled to 10 short of what it holds (1023: an
	// rte_ring of 1024 slots keeps one free), then one full
	// buffer flushed and received in the same call: 10 sent, 22 refused
	// (freed and counted), 32 received; then the rest received, byte for
	// byte, with nothing left to send.
	const ring = 1023
	for added := 0; added < ring-10; added += DefaultBurst {
		fill(min(DefaultBurst, ring-10-added))
	}
	tb.Flush()
	fill(DefaultBurst) // waits in the buffer: it is exactly full
	sent0, dropped0 := tb.Sent, tb.Dropped
	rx := newBurst(t, DefaultBurst)
	rxGot := tb.FlushRx(loopPort, 0, rx)
	if tb.Sent-sent0 != 10 || tb.Dropped-dropped0 != DefaultBurst-10 || rxGot != DefaultBurst || tb.Len() != 0 {
		t.Errorf("FlushRx into a ring with room for 10: sent %d, dropped %d, received %d, %d waiting; want 10, %d, %d, 0",
			tb.Sent-sent0, tb.Dropped-dropped0, rxGot, tb.Len(), DefaultBurst-10, DefaultBurst)
	}
	for {
		looped(rx)
		got := tb.FlushRx(loopPort, 0, rx)
		if got == 0 {
			break
		}
		rxGot += got
	}
	if rxGot != ring {
		t.Errorf("FlushRx received %d in all, want the ring's %d", rxGot, ring)
	}
}

func TestLaunchWorkers(t *testing.T) {
	workers := WorkerLcores()
	if len(workers) == 0 {
		t.Skip("EAL has no worker lcore (one CPU)")
	}
	seen := make([]uint, len(workers))
	l, err := LaunchWorkers(func(lcore uint) error {
		for i, w := range workers {
			if w == lcore {
				seen[i] = LcoreID()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, w := range workers {
		if seen[i] != w {
			t.Errorf("function for lcore %d ran on lcore %d", w, seen[i])
		}
	}
	if id := LcoreID(); id != LcoreIDAny {
		t.Errorf("test goroutine reports lcore %d, want LCORE_ID_ANY", id)
	}

	boom := errors.New("boom")
	l, _ = LaunchWorkers(func(uint) error { return boom })
	if err := l.Wait(); !errors.Is(err, boom) {
		t.Errorf("Wait = %v, want boom", err)
	}
	err = RunOnLcore(workers[0], func() error { panic("lcore panic") })
	if err == nil || !strings.Contains(err.Error(), "lcore panic") {
		t.Errorf("panicking lcore function = %v, want the panic as an error", err)
	}
}

// TestReserveProcs checks that ReserveProcs raises GOMAXPROCS to the loops
// plus two when it is lower, leaves it when it is not, and leaves it when
// the GOMAXPROCS environment variable sets it, but not when the variable
// is empty or not a positive number (Go's runtime ignores those too).
func TestReserveProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		t.Cleanup(func() { os.Setenv("GOMAXPROCS", v) })
	}
	os.Unsetenv("GOMAXPROCS")
	runtime.GOMAXPROCS(2)
	if got := ReserveProcs(2); got != 4 || runtime.GOMAXPROCS(0) != 4 {
		t.Errorf("2 loops, GOMAXPROCS 2: ReserveProcs %d, GOMAXPROCS %d; want 4, 4", got, runtime.GOMAXPROCS(0))
	}
	runtime.GOMAXPROCS(8)
	if got := ReserveProcs(2); got != 8 || runtime.GOMAXPROCS(0) != 8 {
		t.Errorf("2 loops, GOMAXPROCS 8: ReserveProcs %d, GOMAXPROCS %d; want 8, 8", got, runtime.GOMAXPROCS(0))
	}
	for _, v := range []string{"", "0", "-4", "two"} {
		t.Setenv("GOMAXPROCS", v)
		runtime.GOMAXPROCS(2)
		if got := ReserveProcs(3); got != 5 || runtime.GOMAXPROCS(0) != 5 {
			t.Errorf("GOMAXPROCS=%q in the environment: ReserveProcs %d, GOMAXPROCS %d; want 5, 5", v, got, runtime.GOMAXPROCS(0))
		}
	}
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	if got := ReserveProcs(3); got != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("GOMAXPROCS=2 in the environment: ReserveProcs %d, GOMAXPROCS %d; want 2, 2", got, runtime.GOMAXPROCS(0))
	}
}
