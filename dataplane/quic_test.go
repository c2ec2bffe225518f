package dataplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/quic-go/quic-go"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/internal/quiclb"
	"github.com/fulcrumlb/fulcrum/packet"
)

// quicTestConfig adds two UDP VIPs on port 443 with the same two backends:
// "quic" routes by connection ID (qa owns server id 1, qb id 2), "plain"
// does not (the contrast: the hash alone).
var quicTestConfig = testConfig + `
[[vip]]
name = "quic"
address = "203.0.113.11"
port = 443
protocol = "udp"
quic = true
  [[vip.backend]]
  name = "qa"
  address = "10.0.4.1"
  quic_id = 1
  [[vip.backend]]
  name = "qb"
  address = "10.0.4.2"
  quic_id = 2
  [[vip.backend]]
  name = "qc"
  address = "10.0.4.3"

[[vip]]
name = "plain"
address = "203.0.113.12"
port = 443
protocol = "udp"
  [[vip.backend]]
  name = "qa"
  address = "10.0.4.1"
  [[vip.backend]]
  name = "qb"
  address = "10.0.4.2"
  [[vip.backend]]
  name = "qc"
  address = "10.0.4.3"
`

const quicVIP, plainVIP = "203.0.113.11", "203.0.113.12"

// datagram is one UDP payload a real client sent, with the client port it
// came from.
type datagram struct {
	port    uint16
	payload []byte
}

var (
	quicCaptureOnce sync.Once
	quicCapture     []datagram
	quicCaptureErr  error
)

// captureQUIC runs a real quic-go download over loopback through a
// recording UDP proxy and returns what the client sent, in order: the
// server (server id 2, the default layout) sends 256 KiB, and the client
// moves the connection to a second local port after half (RFC 9000 path
// migration). The proxy works like a NAT: one upstream socket per client
// address, so the server sees the migration too.
func captureQUIC(t *testing.T) []datagram {
	t.Helper()
	quicCaptureOnce.Do(func() {
		n := runtime.NumGoroutine()
		quicCapture, quicCaptureErr = runQUICCapture()
		// quic-go's goroutines (timers of closed connections, readers of
		// closed sockets) end shortly after: wait for them, so that the
		// allocation tests that run later count only the worker's.
		start := time.Now()
		for deadline := start.Add(10 * time.Second); runtime.NumGoroutine() > n && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("capture: goroutines %d before, %d after %v", n, runtime.NumGoroutine(), time.Since(start).Round(time.Millisecond))
	})
	if quicCaptureErr != nil {
		t.Fatal(quicCaptureErr)
	}
	return quicCapture
}

func runQUICCapture() ([]datagram, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	srvPC, err := net.ListenUDP("udp", lo)
	if err != nil {
		return nil, err
	}
	gen, err := quiclb.NewGenerator(packet.QUICConfig{}, 2)
	if err != nil {
		return nil, err
	}
	go quiclb.Serve(ctx, srvPC, gen, "qb")
	defer srvPC.Close()

	proxy, err := net.ListenUDP("udp", lo)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	var mu sync.Mutex
	var got []datagram
	upstream := map[netip.AddrPort]*net.UDPConn{}
	defer func() {
		mu.Lock()
		for _, u := range upstream {
			u.Close()
		}
		mu.Unlock()
	}()
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := proxy.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, datagram{port: from.Port(), payload: append([]byte(nil), buf[:n]...)})
			u := upstream[from]
			if u == nil {
				if u, err = net.DialUDP("udp", lo, srvPC.LocalAddr().(*net.UDPAddr)); err != nil {
					mu.Unlock()
					return
				}
				upstream[from] = u
				go func() { // the server's answers to this client address
					b := make([]byte, 65536)
					for {
						n, err := u.Read(b)
						if err != nil {
							return
						}
						proxy.WriteToUDPAddrPort(b[:n], from)
					}
				}()
			}
			mu.Unlock()
			u.Write(buf[:n])
		}
	}()

	c1, err := net.ListenUDP("udp", lo)
	if err != nil {
		return nil, err
	}
	c2, err := net.ListenUDP("udp", lo)
	if err != nil {
		return nil, err
	}
	tr1, tr2 := &quic.Transport{Conn: c1}, &quic.Transport{Conn: c2}
	defer tr1.Close()
	defer tr2.Close()
	const size = 256 << 10
	res, err := quiclb.Download(ctx, tr1, proxy.LocalAddr(), size, tr2)
	if err != nil {
		return nil, err
	}
	if res.Server != "qb" || res.Bytes != size || !res.Migrated {
		return nil, &net.AddrError{Err: "download incomplete", Addr: res.Server}
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]datagram(nil), got...), nil
}

// udpFrame is a client frame to dst:443 from src:sport carrying payload,
// built with gopacket.
func udpFrame(t *testing.T, src, dst string, sport uint16, payload []byte) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolUDP,
		SrcIP: netip.MustParseAddr(src).AsSlice(), DstIP: netip.MustParseAddr(dst).AsSlice()}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: 443}
	_ = u.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4}, ip, u, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// sendTo runs f through the rig and returns the backend address it was
// tunnelled to.
func (r *rig) sendTo(f []byte) netip.Addr {
	r.t.Helper()
	out, v := r.run(f)
	if v[0] != Tx {
		r.t.Fatalf("verdict %v, want Tx; drops %v parse %v", v[0], r.w.c.Drops, r.w.c.Parse)
	}
	dst, _, _ := decodeTunnel(r.t, out[0])
	return dst
}

// A real quic-go client's packets: the long headers (the handshake) go by
// the flow hash, as any UDP flow; every short header goes to qb, the
// backend owning the server id in its connection ID, from the client's
// first port and from the port it migrated to, and from any other source
// the test rewrites it to, while the same packets to a VIP without QUIC
// routing follow the hash to other backends.
func TestQUICShortHeadersFollowServerID(t *testing.T) {
	caps := captureQUIC(t)
	r := newRig(t, quicTestConfig)
	qb := backendAddr(r, "quic", "qb")
	all := map[string]int{"qa": 1, "qb": 1, "qc": 1}
	const client = "198.51.100.10"
	ports := map[uint16]int{} // short headers per client port
	var long, short int
	var lastShort []byte
	for i, d := range caps {
		dst := r.sendTo(udpFrame(t, client, quicVIP, d.port, d.payload))
		if d.payload[0]&0x80 != 0 {
			long++
			want := backendAddr(r, "quic", r.expectBackend("quic", all, client, quicVIP, d.port, 443, 17))
			if dst != want {
				t.Fatalf("datagram %d (long header, port %d) to %v, want %v (the hash's)", i, d.port, dst, want)
			}
			continue
		}
		short++
		ports[d.port]++
		lastShort = d.payload
		if dst != qb {
			t.Fatalf("datagram %d (short header, port %d) to %v, want qb %v", i, d.port, dst, qb)
		}
	}
	if long == 0 || short == 0 || len(ports) != 2 {
		t.Fatalf("capture: %d long, %d short headers, short headers from ports %v: want both kinds, from two ports", long, short, ports)
	}
	c := &r.w.c
	if c.QUIC[QUICLongHeader] != uint64(long) || c.QUIC[QUICRouted] != uint64(short) || c.QUIC[QUICNoID]+c.QUIC[QUICUnknownID]+c.QUIC[QUICDownID] != 0 {
		t.Errorf("quic counters %v, want %d long, %d routed", c.QUIC, long, short)
	}
	if got, want := QUICSummary(c), fmt.Sprintf("long-header=%d routed=%d", long, short); got != want {
		t.Errorf("QUICSummary %q, want %q", got, want)
	}
	if c.CTHits+c.CTMisses != uint64(long) {
		t.Errorf("conntrack saw %d packets, want the %d long headers only", c.CTHits+c.CTMisses, long)
	}

	// NAT rebinding, many times over: the last short header from 64
	// source ports and addresses.
	elsewhere := 0
	for k := range 64 {
		src := netip.AddrFrom4([4]byte{198, 51, 100, byte(20 + k)}).String()
		if dst := r.sendTo(udpFrame(t, src, quicVIP, uint16(40000+k), lastShort)); dst != qb {
			t.Fatalf("rebound to %s:%d: to %v, want qb %v", src, 40000+k, dst, qb)
		}
		if r.sendTo(udpFrame(t, src, plainVIP, uint16(40000+k), lastShort)) != qb {
			elsewhere++
		}
	}
	if elsewhere == 0 {
		t.Errorf("without QUIC routing, no rebound packet left qb: the contrast shows nothing")
	}
	t.Logf("capture: %d datagrams, %d long and %d short headers, from ports %v; without QUIC routing %d of 64 rebound packets left qb", len(caps), long, short, ports, elsewhere)
}

// quicShort is a short-header payload whose DCID (default layout) has
// config rotation cfg and server id id, then n more octets.
func quicShort(cfg byte, id uint16, n int) []byte {
	b := []byte{0x40 | 0x01, cfg<<5 | 7, byte(id >> 8), byte(id)}
	return append(b, make([]byte, 5+n)...)
}

// Hostile and odd payloads to a QUIC VIP are counted under their path and
// forwarded by conntrack and the table; none panics or is lost.
func TestQUICFallbacks(t *testing.T) {
	r := newRig(t, quicTestConfig)
	qa, qb := backendAddr(r, "quic", "qa"), backendAddr(r, "quic", "qb")
	const client = "198.51.100.30"
	for _, tc := range []struct {
		name    string
		payload []byte
		path    QUICPath
	}{
		{"empty", nil, QUICLongHeader},
		{"long header", []byte{0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8}, QUICLongHeader},
		{"first octet only", []byte{0x40}, QUICNoID},
		{"truncated dcid", quicShort(0, 2, 0)[:6], QUICNoID},
		{"dcid exactly", quicShort(0, 2, 0)[:9], QUICRouted},
		{"fixed bit clear", append([]byte{0x01}, quicShort(0, 2, 4)[1:]...), QUICNoID},
		{"other config rotation", quicShort(1, 2, 4), QUICNoID},
		{"unroutable config 0b111", quicShort(7, 2, 4), QUICNoID},
		{"id of no backend", quicShort(0, 9, 4), QUICUnknownID},
		{"id 0 (nobody's)", quicShort(0, 0, 4), QUICUnknownID},
		{"id 1", quicShort(0, 1, 4), QUICRouted},
	} {
		before := r.w.c.QUIC
		sport := uint16(50000 + len(tc.name))
		dst := r.sendTo(udpFrame(t, client, quicVIP, sport, tc.payload))
		for p := range NumQUICPaths {
			want := before[p]
			if p == tc.path {
				want++
			}
			if r.w.c.QUIC[p] != want {
				t.Errorf("%s: counter %v is %d, want %d", tc.name, p, r.w.c.QUIC[p], want)
			}
		}
		if tc.path == QUICRouted {
			if want := map[bool]netip.Addr{true: qb, false: qa}[tc.name != "id 1"]; dst != want {
				t.Errorf("%s: to %v, want %v", tc.name, dst, want)
			}
			continue
		}
		// The fallback is the hash (these tuples are new to conntrack).
		all := map[string]int{"qa": 1, "qb": 1, "qc": 1}
		if want := backendAddr(r, "quic", r.expectBackend("quic", all, client, quicVIP, sport, 443, 17)); dst != want {
			t.Errorf("%s: to %v, want the hash's %v", tc.name, dst, want)
		}
	}

	// The owner of id 2 goes down: its short headers fall back to the
	// client's conntrack entry (made by the handshake's long header), moved
	// away from the down backend, and come back when it is up.
	sport := uint16(51000)
	first := r.sendTo(udpFrame(t, client, quicVIP, sport, []byte{0xc0, 0, 0, 0, 1}))
	r.publish(Overrides{{"quic", "qb"}: {Weight: 0, Down: true}})
	before := r.w.c.QUIC[QUICDownID]
	dst := r.sendTo(udpFrame(t, client, quicVIP, sport, quicShort(0, 2, 20)))
	if dst == qb || r.w.c.QUIC[QUICDownID] != before+1 {
		t.Errorf("id of a down backend: to %v (qb is %v), down-id %d -> %d", dst, qb, before, r.w.c.QUIC[QUICDownID])
	}
	// The entry's pin, or, if that was qb, the table without qb.
	want := first
	if first == qb {
		want = backendAddr(r, "quic", r.expectBackend("quic", map[string]int{"qa": 1, "qc": 1}, client, quicVIP, sport, 443, 17))
	}
	if dst != want {
		t.Errorf("id of a down backend: to %v, want %v (conntrack's pin %v, moved off qb)", dst, want, first)
	}
	r.publish(nil)
	if dst := r.sendTo(udpFrame(t, client, quicVIP, sport, quicShort(0, 2, 20))); dst != qb {
		t.Errorf("owner back up: to %v, want qb %v", dst, qb)
	}
	// A drained owner (weight 0, not down) keeps its connections.
	r.publish(Overrides{{"quic", "qb"}: {Weight: 0}})
	if dst := r.sendTo(udpFrame(t, client, quicVIP, sport, quicShort(0, 2, 20))); dst != qb {
		t.Errorf("drained owner: to %v, want qb %v", dst, qb)
	}
	if r.w.c.Encap[encap.Forward] != r.w.c.RxPackets {
		t.Errorf("forwarded %d of %d", r.w.c.Encap[encap.Forward], r.w.c.RxPackets)
	}
}

// A longer CID than the packet holds, and a layout of 20-octet CIDs with
// 8 octets of server id, end up counted, not read past the datagram.
func TestQUICLongLayout(t *testing.T) {
	cfg := testConfig + `
[[vip]]
name = "quic"
address = "203.0.113.11"
port = 443
protocol = "udp"
quic = true
quic_cid_len = 20
quic_server_id_len = 8
quic_config_id = 2
  [[vip.backend]]
  name = "qa"
  address = "10.0.4.1"
  quic_id = 9223372036854775807
  [[vip.backend]]
  name = "qb"
  address = "10.0.4.2"
  quic_id = 0
`
	r := newRig(t, cfg)
	qa := backendAddr(r, "quic", "qa")
	cid := make([]byte, 20)
	(&packet.QUICConfig{CIDLen: 20, ServerIDLen: 8, ConfigID: 2}).PutServerID(cid, 1<<63-1)
	full := append([]byte{0x41}, cid...)
	for n := 0; n < len(full); n++ {
		r.sendTo(udpFrame(t, "198.51.100.40", quicVIP, 1234, full[:n]))
	}
	if r.w.c.QUIC[QUICRouted] != 0 || r.w.c.QUIC[QUICNoID] != uint64(len(full)-1) {
		t.Errorf("truncated CIDs: counters %v", r.w.c.QUIC)
	}
	if dst := r.sendTo(udpFrame(t, "198.51.100.41", quicVIP, 999, full)); dst != qa {
		t.Errorf("full CID: to %v, want qa %v", dst, qa)
	}
}

// QUIC VIP traffic allocates nothing, routed or not.
func TestQUICAllocatesNothing(t *testing.T) {
	r := newRig(t, quicTestConfig)
	var frames [][]byte
	for i := range 32 {
		p := quicShort(0, uint16(i%4), 40) // ids 0..3: unknown, qa, qb, unknown
		if i%8 == 7 {
			p = []byte{0xc0, 0, 0, 0, 1}
		}
		frames = append(frames, udpFrame(t, "198.51.100.50", quicVIP, uint16(3000+i), p))
	}
	allocs := allocsPerBurst(frames, func(pkts []Pkt) {
		r.now++
		r.w.Process(pkts, r.now)
	})
	if allocs != 0 {
		t.Fatalf("Process allocates %v times per burst of QUIC packets", allocs)
	}
	if r.w.c.QUIC[QUICRouted] == 0 || r.w.c.QUIC[QUICUnknownID] == 0 || r.w.c.QUIC[QUICLongHeader] == 0 {
		t.Errorf("paths not taken: %v", r.w.c.QUIC)
	}
}

// The fused path leaves QUIC VIPs to the general path: the same frames,
// verdicts, counters and conntrack state either way, over the captured
// packets of a real client mixed with established TCP flows.
func TestQUICFastPathMatchesGeneral(t *testing.T) {
	caps := captureQUIC(t)
	tw := newTwin(t, quicTestConfig)
	var frames [][]byte
	for k, d := range caps {
		frames = append(frames, udpFrame(t, "198.51.100.10", quicVIP, d.port, d.payload))
		frames = append(frames, frame(t, "198.51.100.60", "203.0.113.7", uint16(7000+k%8), 80, layers.IPProtocolTCP, "A", 10, true))
		if len(frames) >= 32 || k == len(caps)-1 {
			tw.burst("capture", frames)
			frames = frames[:0]
		}
	}
	tw.same("capture")
	if tw.fast.w.c.QUIC[QUICRouted] == 0 {
		t.Errorf("nothing routed: %v", tw.fast.w.c.QUIC)
	}
}

// BenchmarkProcessQUIC measures QUIC short headers of 10,000 clients to a
// QUIC VIP (routed by connection ID: no conntrack, the general path) and
// the same datagrams to a UDP VIP without QUIC routing (conntrack hits on
// the fused path), bursts of 32, no I/O. ns/op is per packet.
func BenchmarkProcessQUIC(b *testing.B) {
	for _, vc := range []struct{ name, addr string }{{"quic", quicVIP}, {"plain", plainVIP}} {
		b.Run("vip="+vc.name, func(b *testing.B) {
			t := &testing.T{}
			r := newRig(t, cfgWithCapacity(quicTestConfig, 1<<15))
			const flows, burst = 10_000, 32
			base := udpFrame(t, "198.51.100.10", vc.addr, 4433, quicShort(0, 2, 24))
			bufs := make([][]byte, burst)
			for i := range bufs {
				bufs[i] = make([]byte, headroom+len(base))
			}
			pkts := make([]Pkt, burst)
			src4 := make([][4]byte, flows)
			for i := range src4 {
				src4[i] = [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
			}
			fill := func(i, f int) {
				copy(bufs[i][headroom:], base)
				copy(bufs[i][headroom+26:headroom+30], src4[f][:])
				pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(base)}
			}
			for f := 0; f < flows; f += burst { // every flow once: conntrack knows the plain VIP's
				for i := 0; i < burst; i++ {
					fill(i, (f+i)%flows)
				}
				r.w.Process(pkts, r.now)
			}
			rng := uint64(1)
			b.ReportAllocs()
			cpu := startCPU(b)
			n := 0
			for n < b.N {
				for i := 0; i < burst; i++ {
					rng = rng*6364136223846793005 + 1442695040888963407
					fill(i, int(rng>>33)%flows)
				}
				r.w.Process(pkts, r.now)
				n += burst
			}
			cpu.stop(b, n)
			if r.w.c.Encap[encap.Forward] == 0 {
				b.Fatal("nothing forwarded")
			}
		})
	}
}
