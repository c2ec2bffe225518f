package yardstick

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

const (
	room    = 128 // headroom, as dataplane's tests and DPDK's mbufs
	bufSize = 256
)

// tcpFrame is an Ethernet, IPv4 (DF), TCP frame from src:sport to dst:dport
// with the flags named in flags (S, A, F, R).
func tcpFrame(t testing.TB, src, dst net.IP, sport, dport uint16, flags string, proto layers.IPProtocol) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: proto, SrcIP: src, DstIP: dst, Flags: layers.IPv4DontFragment}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	var l4 gopacket.SerializableLayer
	if proto == layers.IPProtocolUDP {
		u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
		_ = u.SetNetworkLayerForChecksum(ip)
		l4 = u
	} else {
		tc := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Window: 100,
			SYN: bytes.ContainsRune([]byte(flags), 'S'), ACK: bytes.ContainsRune([]byte(flags), 'A'),
			FIN: bytes.ContainsRune([]byte(flags), 'F'), RST: bytes.ContainsRune([]byte(flags), 'R')}
		_ = tc.SetNetworkLayerForChecksum(ip)
		l4 = tc
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, l4); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var vipIP = net.IPv4(203, 0, 113, 7).To4()

// TestGoMatchesC runs the same bursts through the C pipeline and its Go
// transliteration and requires the same frames, verdicts, counters and
// table after every burst: established flows, SYNs that re-choose, new
// flows into a table small enough to evict, FINs, and frames either drops
// (not the VIP's port, UDP, another address, too short, no headroom).
func TestGoMatchesC(t *testing.T) {
	for _, capacity := range []int{64, 20000} {
		t.Run(fmt.Sprint("capacity=", capacity), func(t *testing.T) {
			cp, err := NewCPipeline(capacity)
			if err != nil {
				t.Fatal(err)
			}
			gp := NewPipeline(capacity)
			cf := NewCFrames(MaxBurst, room, bufSize)
			defer cf.Free()
			gf := NewCFrames(MaxBurst, room, bufSize)
			defer gf.Free()
			rng := rand.New(rand.NewPCG(7, uint64(capacity)))
			kinds := []func(src net.IP, sport uint16) []byte{
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 80, "A", 6) },
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 80, "A", 6) },
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 80, "A", 6) },
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 80, "S", 6) },
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 80, "SA", 6) },
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 80, "FA", 6) },
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 443, "A", 6) },
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 80, "", 17) },
				func(src net.IP, sport uint16) []byte {
					return tcpFrame(t, src, net.IPv4(203, 0, 113, 8).To4(), sport, 80, "A", 6)
				},
				func(src net.IP, sport uint16) []byte { return tcpFrame(t, src, vipIP, sport, 80, "A", 6)[:40] },
			}
			pkts := make([]Pkt, MaxBurst)
			verd := make([]uint8, MaxBurst)
			fwd := 0
			for burst := range 400 {
				n := 1 + rng.IntN(32)
				for i := range n {
					src := net.IPv4(10, 0, byte(rng.IntN(3)), byte(rng.IntN(100))).To4()
					fr := kinds[rng.IntN(len(kinds))](src, uint16(1000+rng.IntN(2)))
					off := room
					if rng.IntN(50) == 0 {
						off = 10 // less headroom than the tunnel needs
					}
					for _, f := range []*CFrames{cf, gf} {
						copy(f.Buf(i)[off:], fr)
						f.Reset(i, off, len(fr))
					}
					pkts[i] = Pkt{Buf: gf.Buf(i), Off: off, Len: len(fr)}
				}
				now := uint32(1000 + burst)
				nc := cp.Burst(cf, n, now)
				ng := gp.Burst(pkts[:n], now, verd)
				if nc != ng {
					t.Fatalf("burst %d: C forwarded %d, Go %d", burst, nc, ng)
				}
				fwd += ng
				for i := range n {
					cfr, cok := cf.Frame(i)
					gfr := pkts[i].Buf[pkts[i].Off : pkts[i].Off+pkts[i].Len]
					if cok != (verd[i] == 1) || !bytes.Equal(cfr, gfr) {
						t.Fatalf("burst %d frame %d: C (forwarded %v)\n% x\nGo (forwarded %v)\n% x", burst, i, cok, cfr, verd[i] == 1, gfr)
					}
				}
			}
			if fwd == 0 {
				t.Fatal("nothing forwarded")
			}
			cc, gc := cp.Counters(), gp.Counters()
			if fmt.Sprint(cc) != fmt.Sprint(gc) {
				t.Fatalf("counters: C %v, Go %v", cc, gc)
			}
			if cc[4] == 0 || cc[2] == 0 || cc[5] == 0 {
				t.Fatalf("counters %v: want inserts, hits and drops all exercised", cc)
			}
			ce, cs := cp.Entries()
			ge, gs := gp.Entries()
			if len(ce) != len(ge) || fmt.Sprint(cs) != fmt.Sprint(gs) {
				t.Fatalf("signature words differ")
			}
			used := 0
			for i := range ce {
				a, b := ce[i], ge[i]
				if a.K0 != b.K0 || a.K1 != b.K1 || a.Fleet != b.Fleet || a.LastSeen != b.LastSeen || a.Backend != b.Backend || a.State != b.State {
					t.Fatalf("entry %d: C %+v, Go %+v", i, a, b)
				}
				if a.K0 != 0 {
					used++
				}
			}
			t.Logf("%d frames forwarded, counters %v, %d entries", fwd, cc[:6], used)
		})
	}
}

// BenchmarkPipeline measures the C pipeline (one cgo call a burst) and its
// Go transliteration on the frames dataplane's BenchmarkProcess uses:
// 54-byte TCP ACKs to 203.0.113.7:80 from `flows` sources, each burst of 32
// refilled with random flows of a warm table (capacity twice the flows).
// impl=refill is the refill alone, the part of every ns/op that is not the
// pipeline's. ns/op is per packet.
func BenchmarkPipeline(b *testing.B) {
	for _, flows := range []int{10_000, 1_000_000} {
		for _, impl := range []string{"c", "go", "refill"} {
			b.Run(fmt.Sprintf("flows=%d/impl=%s", flows, impl), func(b *testing.B) {
				const burst = 32
				cp, err := NewCPipeline(2 * flows)
				if err != nil {
					b.Fatal(err)
				}
				gp := NewPipeline(2 * flows)
				fr := NewCFrames(burst, room, bufSize)
				defer fr.Free()
				base := tcpFrame(b, net.IPv4(198, 51, 100, 10).To4(), vipIP, 1, 80, "A", 6)
				src := make([][4]byte, flows)
				for i := range src {
					src[i] = [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
				}
				pkts := make([]Pkt, burst)
				verd := make([]uint8, burst)
				fill := func(i, f int) {
					buf := fr.Buf(i)
					copy(buf[room:room+14], base[:14]) // encapsulation overwrote the Ethernet header
					copy(buf[room+26:room+30], src[f][:])
					pkts[i] = Pkt{Buf: buf, Off: room, Len: len(base)}
					fr.Reset(i, room, len(base))
				}
				for i := range burst {
					copy(fr.Buf(i)[room:], base)
					fr.Reset(i, room, len(base))
				}
				run := func() {
					switch impl {
					case "c":
						cp.Burst(fr, burst, 5)
					case "go":
						gp.Burst(pkts, 5, verd)
					}
				}
				// Warm the table: every flow seen twice.
				for range 2 {
					for f := 0; f < flows; f += burst {
						for i := range burst {
							fill(i, (f+i)%flows)
						}
						run()
					}
				}
				rng := rand.New(rand.NewPCG(1, 2))
				b.ReportAllocs()
				b.ResetTimer()
				for n := 0; n < b.N; n += burst {
					for i := range burst {
						fill(i, int(rng.Uint64N(uint64(flows))))
					}
					run()
				}
				b.StopTimer()
				var hits, misses uint64
				switch impl {
				case "c":
					c := cp.Counters()
					hits, misses = c[2], c[3]
				case "go":
					c := gp.Counters()
					hits, misses = c[2], c[3]
				}
				if impl != "refill" {
					if hits == 0 {
						b.Fatal("nothing hit")
					}
					b.ReportMetric(float64(hits)/float64(hits+misses), "hit-ratio")
				}
			})
		}
	}
}
