//go:build dpdk

package dpdk

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// The EAL starts once per test binary (DPDK cannot restart it): no
// hugepages, no PCI scan, a per-process file prefix so parallel test
// binaries do not share a runtime directory (22.11 refuses --in-memory
// with --no-huge), and two vdevs: net_null0 (endless rx, tx that frees)
// and net_ring0 (a port looped back onto itself).
var (
	testPool *Mempool
	nullPort uint16
	loopPort uint16
)

const testPoolSize = 8191

// ealErrorChild makes TestMain start the EAL with a bad option and
// exit, for TestInitEALError.
const ealErrorChild = "FULCRUM_DPDK_EAL_ERROR_CHILD"

func TestMain(m *testing.M) {
	if prefix := os.Getenv(ealPrefixChild); prefix != "" {
		os.Exit(prefixChild(prefix))
	}
	if prefix := os.Getenv(ealLaunchChild); prefix != "" {
		os.Exit(launchChild(prefix))
	}
	if prefix := os.Getenv(ealLogChild); prefix != "" {
		os.Exit(logChild(prefix))
	}
	if arg := os.Getenv(ealPanicChild); arg != "" {
		os.Exit(panicChild(arg))
	}
	if prefix := os.Getenv(ealVersionChild); prefix != "" {
		os.Exit(versionChild(prefix))
	}
	if os.Getenv(ealErrorChild) != "" {
		err := InitEAL([]string{"--no-such-eal-option"})
		fmt.Println(err)
		os.Exit(2)
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	lcores := "0"
	if runtime.NumCPU() >= 2 {
		lcores = "0-1" // one worker lcore for LaunchWorkers and the benchmark
	}
	args := []string{
		"-l", lcores, "--no-huge", "-m", "256", "--no-pci",
		"--file-prefix", fmt.Sprintf("fulcrum-test-%d", os.Getpid()),
		"--log-level", "warning",
		"--vdev", "net_null0", "--vdev", "net_ring0",
	}
	var err error
	if startAffinity, err = threadAffinity(0); err != nil { // before the EAL pins any thread
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := InitEAL(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir := RuntimeDir()
	defer func() {
		if err := CleanupEAL(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		if dir != "" {
			os.RemoveAll(dir)
		}
	}()

	if testPool, err = NewMempool("fl_test_pool", testPoolSize, DefaultPoolCache, DefaultDataRoom, SocketAny); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testPool.Free()
	for name, p := range map[string]*uint16{"net_null0": &nullPort, "net_ring0": &loopPort} {
		if *p, err = PortByName(name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer ClosePort(*p)
	}
	return m.Run()
}

// startPort configures port with one queue pair on testPool and starts
// it; the port is stopped at the end of the test.
func startPort(t testing.TB, port uint16, c PortConf) PortSetup {
	t.Helper()
	setup, err := ConfigurePort(port, c)
	if err != nil {
		t.Fatal(err)
	}
	for q := uint16(0); q < c.RxQueues; q++ {
		if _, err := SetupRxQueue(port, q, DefaultRxDesc, PortSocket(port), testPool); err != nil {
			t.Fatal(err)
		}
	}
	for q := uint16(0); q < c.TxQueues; q++ {
		if _, err := SetupTxQueue(port, q, DefaultTxDesc, PortSocket(port)); err != nil {
			t.Fatal(err)
		}
	}
	if err := StartPort(port); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := StopPort(port); err != nil {
			t.Error(err)
		}
	})
	return setup
}

func newBurst(t testing.TB, size int) *Burst {
	t.Helper()
	b, err := NewBurst(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	return b
}

// udpPacket builds an Ethernet/IPv4/UDP frame with gopacket, payload
// bytes long, with src port sport so every packet differs.
func udpPacket(t testing.TB, sport uint16, payload int) []byte {
	t.Helper()
	eth := &layers.Ethernet{
		SrcMAC:       net.HardwareAddr{0x02, 0, 0, 0, 0, 1},
		DstMAC:       net.HardwareAddr{0x02, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4,
	}
	ip := &layers.IPv4{
		Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: netip.MustParseAddr("198.51.100.7").AsSlice(),
		DstIP: netip.MustParseAddr("203.0.113.10").AsSlice(),
	}
	udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: 53}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, payload)
	for i := range body {
		body[i] = byte(i) ^ byte(sport)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, udp, gopacket.Payload(body)); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// fillBurst allocates len(pkts) mbufs into b and copies pkts into them.
func fillBurst(t testing.TB, b *Burst, pkts [][]byte) {
	t.Helper()
	if err := testPool.AllocBulk(b, len(pkts)); err != nil {
		t.Fatal(err)
	}
	for i, m := range b.Mbufs() {
		if !m.SetData(pkts[i]) {
			t.Fatalf("packet %d (%d bytes) does not fit an mbuf (%d bytes of room)", i, len(pkts[i]), m.Tailroom())
		}
	}
}

// checkPoolDrained fails if mbufs are missing from testPool at the end
// of the test (a leak in the code or the test).
func checkPoolDrained(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if n := testPool.InUse(); n != 0 {
			t.Errorf("%d mbufs not returned to the pool", n)
		}
	})
}
