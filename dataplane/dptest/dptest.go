// Package dptest drives a pure-Go dataplane worker from a goroutine, as an
// lcore would, for the tests of the packages above the dataplane (control,
// admin): frames sent with Send go through the real fast path, and between
// them the goroutine serves counter snapshots and posted operations. It
// also builds the test frames. No DPDK, no mocks.
package dptest

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// Result is what the worker did with a frame.
type Result struct {
	Verdict dataplane.Verdict
	// Backend is the outer IPv4 destination of a forwarded frame: the
	// backend it was tunnelled to.
	Backend netip.Addr
	// Frame is the frame the worker transmitted (Verdict Tx): a tunnelled
	// packet or an ICMP reply to the client.
	Frame []byte
}

// Lcore is a worker driven by its own goroutine, as on a real lcore.
type Lcore struct {
	Worker *dataplane.Worker
	in     chan []byte
	out    chan Result
	stop   chan struct{}
	done   chan struct{}
	start  time.Time
}

// NewLcore makes a worker with flow table ct and flow hash key on shared
// and starts its goroutine; it stops when the test ends. The worker
// forwards with whatever snapshot the test publishes on shared.
func NewLcore(t testing.TB, shared *dataplane.Shared, ct conntrack.Config, key flow.Key) *Lcore {
	w, err := dataplane.NewWorker(0, shared, ct, key, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	l := &Lcore{Worker: w, in: make(chan []byte), out: make(chan Result), stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	go l.loop()
	t.Cleanup(func() { close(l.stop); <-l.done })
	return l
}

// headroom leaves room in front of the frame for the encapsulation.
const headroom = 128

func (l *Lcore) loop() {
	defer close(l.done)
	buf := make([]byte, 4096)
	pkts := make([]dataplane.Pkt, 1)
	for {
		now := conntrack.Time(time.Since(l.start) / time.Millisecond)
		select {
		case <-l.stop:
			return
		case f := <-l.in:
			copy(buf[headroom:], f)
			pkts[0] = dataplane.Pkt{Buf: buf, Off: headroom, Len: len(f)}
			l.Worker.ProcessCaptured(pkts, now) // Process, with the capture hooks
			l.Worker.Local().Bursts++           // as the engine counts its polls
			r := Result{Verdict: l.Worker.Verdicts[0]}
			if r.Verdict == dataplane.Tx {
				// The I/O loop counts what it transmits.
				c := l.Worker.Local()
				c.TxPackets++
				c.TxBytes += uint64(pkts[0].Len)
				fr := buf[pkts[0].Off : pkts[0].Off+pkts[0].Len]
				r.Backend, _ = netip.AddrFromSlice(fr[30:34]) // outer IPv4 destination
				r.Frame = append([]byte(nil), fr...)
			}
			l.out <- r
		default:
			l.Worker.Local().IdlePolls++
			l.Worker.Idle(now)
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// Send runs one frame through the worker's fast path.
func (l *Lcore) Send(frame []byte) Result {
	l.in <- frame
	return <-l.out
}

// Client is the source address test frames come from.
var Client = netip.MustParseAddr("198.51.100.10")

// TCP builds an Ethernet/IPv4/TCP frame from Client:sport to dst; flags
// holds the letters of the TCP flags to set ("S", "A", "SA", "F", "R").
func TCP(t testing.TB, sport uint16, dst netip.AddrPort, flags string) []byte {
	t.Helper()
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dst.Port()), Window: 100,
		SYN: strings.Contains(flags, "S"), ACK: strings.Contains(flags, "A"),
		FIN: strings.Contains(flags, "F"), RST: strings.Contains(flags, "R")}
	return frame(t, dst.Addr(), layers.IPProtocolTCP, tcp, gopacket.Payload("hello"))
}

// UDP builds an Ethernet/IPv4/UDP frame from Client:sport to dst.
func UDP(t testing.TB, sport uint16, dst netip.AddrPort) []byte {
	t.Helper()
	udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dst.Port())}
	return frame(t, dst.Addr(), layers.IPProtocolUDP, udp, gopacket.Payload("query"))
}

func frame(t testing.TB, dst netip.Addr, proto layers.IPProtocol, l4 interface {
	gopacket.SerializableLayer
	SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
}, payload gopacket.Payload) []byte {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: proto, Flags: layers.IPv4DontFragment,
		SrcIP: net.IP(Client.AsSlice()), DstIP: net.IP(dst.AsSlice())}
	if err := l4.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, l4, payload); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}
