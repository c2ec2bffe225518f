// Package admintest runs a real control plane for tests of the admin API
// and its clients: a control.Plane over one pure-Go dataplane worker that a
// goroutine drives as an lcore would (it forwards the frames it is given
// and, between them, serves counter snapshots and posted operations). No
// DPDK, no mocks: packets sent with Send go through the real fast path and
// show up in the plane's counters and conntrack.
package admintest

import (
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// Config is a test configuration with two VIPs:
//
//   - "web", 203.0.113.7:80/tcp, backends be1..be4 (10.0.1.1-4, weight 1,
//     be4 weight 2), no health checks: all usable;
//   - "dns", 203.0.113.8:53/udp, backends ns1, ns2 with TCP health checks.
//     Nothing runs the checks, so both stay down ("not checked yet") and
//     the VIP is in panic mode (fail open) until SetHealth says otherwise.
const Config = `
[dataplane]
port = "net_ring0"
lb_ipv4 = "192.0.2.10"
next_hop_mac = "02:00:00:00:00:fe"
hash_key = "000102030405060708090a0b0c0d0e0f"

[conntrack]
capacity = 65536

[control]
slow_start = "0s"
drain_timeout = "0s"

[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
  [[vip.backend]]
  name = "be1"
  address = "10.0.1.1"
  [[vip.backend]]
  name = "be2"
  address = "10.0.1.2"
  [[vip.backend]]
  name = "be3"
  address = "10.0.1.3"
  [[vip.backend]]
  name = "be4"
  address = "10.0.1.4"
  weight = 2

[[vip]]
name = "dns"
address = "203.0.113.8"
port = 53
protocol = "udp"
  [vip.health]
  kind = "tcp"
  [[vip.backend]]
  name = "ns1"
  address = "10.0.2.1"
  [[vip.backend]]
  name = "ns2"
  address = "10.0.2.2"
`

// Plane is a running control plane with one worker.
type Plane struct {
	*control.Plane
	// File is the configuration file the plane was loaded from; rewrite it
	// to test reloads.
	File   string
	Worker *dataplane.Worker

	lc *lcore
}

// New writes toml to a file in a temporary directory, loads it and starts
// the plane (with its rebuild loop) and the worker's lcore goroutine. Both
// stop when the test ends.
func New(t testing.TB, toml string) *Plane {
	t.Helper()
	file := filepath.Join(t.TempDir(), "fulcrum.toml")
	if err := os.WriteFile(file, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	shared := &dataplane.Shared{}
	shared.NextHop.Store(&dataplane.NextHop{MAC4: cfg.Dataplane.NextHopMAC.HW, Has4: true})
	lc := newLcore(t, shared, cfg)
	log := slog.New(slog.DiscardHandler)
	plane, err := control.New(cfg, shared, []*dataplane.Worker{lc.w}, log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() { defer close(stopped); plane.Run(done) }()
	t.Cleanup(func() { close(done); <-stopped })
	return &Plane{Plane: plane, File: file, Worker: lc.w, lc: lc}
}

// Result is what the worker did with a frame.
type Result struct {
	Verdict dataplane.Verdict
	// Backend is the outer IPv4 destination of a forwarded frame: the
	// backend it was tunnelled to.
	Backend netip.Addr
}

// Send runs one frame through the worker's fast path.
func (p *Plane) Send(frame []byte) Result {
	p.lc.in <- frame
	return <-p.lc.out
}

// Backend is the address of a backend in the running configuration.
func (p *Plane) Backend(t testing.TB, vip, name string) netip.Addr {
	t.Helper()
	for _, v := range p.Config().VIPs {
		for _, b := range v.Backends {
			if v.Name == vip && b.Name == name {
				return b.Address.Addr
			}
		}
	}
	t.Fatalf("no backend %s/%s", vip, name)
	return netip.Addr{}
}

// lcore is a worker driven by its own goroutine, as on a real lcore.
type lcore struct {
	w     *dataplane.Worker
	in    chan []byte
	out   chan Result
	stop  chan struct{}
	done  chan struct{}
	start time.Time
}

func newLcore(t testing.TB, shared *dataplane.Shared, cfg *config.Config) *lcore {
	enc, err := dataplane.NewEncapsulator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	ctc := conntrack.DefaultConfig()
	ctc.Capacity = cfg.Conntrack.Capacity
	w, err := dataplane.NewWorker(0, shared, ctc, enc, key, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	l := &lcore{w: w, in: make(chan []byte), out: make(chan Result), stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	go l.loop()
	t.Cleanup(func() { close(l.stop); <-l.done })
	return l
}

// headroom leaves room in front of the frame for the encapsulation.
const headroom = 128

func (l *lcore) loop() {
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
			l.w.Process(pkts, now)
			r := Result{Verdict: l.w.Verdicts[0]}
			if r.Verdict == dataplane.Tx {
				// The I/O loop counts what it transmits.
				c := l.w.Local()
				c.TxPackets++
				c.TxBytes += uint64(pkts[0].Len)
				fr := buf[pkts[0].Off : pkts[0].Off+pkts[0].Len]
				r.Backend, _ = netip.AddrFromSlice(fr[30:34]) // outer IPv4 destination
			}
			l.out <- r
		default:
			l.w.Idle(now)
			time.Sleep(50 * time.Microsecond)
		}
	}
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
