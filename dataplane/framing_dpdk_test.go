//go:build dpdk

package dataplane

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
)

// Odd-but-legal layer-2/3 framings through the real engine (net_ring):
// one VIP per tunnel kind, one backend each, so every forwarded frame's
// destination and bytes are known in advance.

const Config = `
[dataplane]
port = "net_ring0"
lb_ipv4 = "192.0.2.10"
lb_ipv6 = "2001:db8:100::10"
next_hop_mac = "02:00:00:00:00:fe"
mtu = 1500
hash_key = "000102030405060708090a0b0c0d0e0f"
exception = false

[conntrack]
capacity = 4096

[eal]
memory_mb = 512

[[vip]]
name = "gre"
address = "203.0.113.7"
port = 80
encap = "gre"
  [[vip.backend]]
  name = "g1"
  address = "10.0.1.1"

[[vip]]
name = "ipip"
address = "203.0.113.7"
port = 81
encap = "ipip"
  [[vip.backend]]
  name = "i1"
  address = "10.0.1.2"

[[vip]]
name = "gue"
address = "203.0.113.7"
port = 82
encap = "gue"
  [[vip.backend]]
  name = "u1"
  address = "10.0.1.3"

[[vip]]
name = "gue6"
address = "2001:db8:ffff::7"
port = 443
encap = "gue"
  [[vip.backend]]
  name = "u6"
  address = "2001:db8:1::3"
`

// framingWorker is the single worker's full snapshot (per-VIP counts too).
func framingWorker(t *testing.T, l *lab) Counters {
	t.Helper()
	var c Counters
	if !l.eng.Workers()[0].Snapshot(&c, 5*time.Second) {
		t.Fatal("no snapshot")
	}
	return c
}

func framingVIP(t *testing.T, l *lab, name string) *VIP {
	t.Helper()
	for _, v := range l.shared.Services.Load().VIPs {
		if v != nil && v.Name == name {
			return v
		}
	}
	t.Fatalf("no VIP %s", name)
	return nil
}

func framingTag(f []byte, tpids ...uint16) []byte {
	o := append([]byte(nil), f[:12]...)
	for i, tp := range tpids {
		o = binary.BigEndian.AppendUint16(o, tp)
		o = binary.BigEndian.AppendUint16(o, uint16(100+i))
	}
	return append(o, f[12:]...)
}

// framingOuter checks the outer headers of a forwarded frame: outer IPv4
// checksum, lengths, TOS/traffic class equal to the inner's, and returns
// the inner IP packet.
func framingOuter(t *testing.T, name string, o []byte, kind string) []byte {
	t.Helper()
	et := binary.BigEndian.Uint16(o[12:])
	var inner []byte
	var outerTOS byte
	switch et {
	case 0x0800:
		ip := o[14:34]
		if o[14] != 0x45 {
			t.Errorf("%s: outer IPv4 first byte %#x", name, o[14])
		}
		var s uint32
		for i := 0; i < 20; i += 2 {
			s += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		if s != 0xffff {
			t.Errorf("%s: outer IPv4 checksum wrong (%#x)", name, s)
		}
		if int(binary.BigEndian.Uint16(ip[2:])) != len(o)-14 {
			t.Errorf("%s: outer total length %d, frame holds %d", name, binary.BigEndian.Uint16(ip[2:]), len(o)-14)
		}
		outerTOS = ip[1]
		inner = o[34:]
	case 0x86dd:
		outerTOS = byte(binary.BigEndian.Uint16(o[14:]) >> 4)
		if int(binary.BigEndian.Uint16(o[18:])) != len(o)-54 {
			t.Errorf("%s: outer payload length %d, frame holds %d", name, binary.BigEndian.Uint16(o[18:]), len(o)-54)
		}
		inner = o[54:]
	default:
		t.Fatalf("%s: outer EtherType %#x", name, et)
	}
	switch kind {
	case "gre":
		inner = inner[4:]
	case "gue":
		if int(binary.BigEndian.Uint16(inner[4:])) != len(inner) {
			t.Errorf("%s: UDP length %d, holds %d", name, binary.BigEndian.Uint16(inner[4:]), len(inner))
		}
		inner = inner[12:]
	}
	var innerTOS byte
	if inner[0]>>4 == 4 {
		innerTOS = inner[1]
	} else {
		innerTOS = byte(binary.BigEndian.Uint16(inner[0:]) >> 4)
	}
	if outerTOS != innerTOS {
		t.Errorf("%s: outer TOS %#x, inner %#x (ECN/DSCP not copied)", name, outerTOS, innerTOS)
	}
	return inner
}

// TestEngineFramingMatrix: VLAN and QinQ tags, IPv4 options, IPv6
// extension chains, ECN and DSCP values, TTL 0 and 1, Ethernet padding
// and trailing bytes, through GRE, IPIP and GUE in the real engine: every
// frame comes out once, untagged, as a tunnel around the client's IP
// packet byte for byte (no padding), with the TOS copied.
func TestEngineFramingMatrix(t *testing.T) {
	l := newLab(t, Config)
	rr := []byte{0x07, 7, 4, 0, 0, 0, 0, 0}              // record route
	ts := []byte{0x44, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0} // timestamp, one slot
	type tc struct {
		name, kind string
		f          []byte
	}
	var cases []tc
	sp := uint16(30000)
	for _, k := range []struct {
		kind string
		port uint16
	}{{"gre", 80}, {"ipip", 81}, {"gue", 82}} {
		mk := func(tos, ttl byte, opts []byte, data int) []byte {
			sp++
			var f []byte
			if opts != nil {
				f = raw4opts(hpClient, "203.0.113.7", packet.ProtoTCP, opts, tcpSeg(sp, k.port, packet.TCPSyn, data))
			} else {
				f = raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(sp, k.port, packet.TCPSyn, data))
			}
			f[15], f[22] = tos, ttl
			return fixIPv4Checksum(f)
		}
		cases = append(cases,
			tc{"plain", k.kind, mk(0, 60, nil, 0)},
			tc{"ecn-ce", k.kind, mk(0x03, 60, nil, 0)},
			tc{"dscp-ef-ect1", k.kind, mk(0xb9, 60, nil, 0)},
			tc{"ttl0", k.kind, mk(0, 0, nil, 0)},
			tc{"ttl1", k.kind, mk(0, 1, nil, 0)},
			tc{"padded-60", k.kind, append(mk(0, 60, nil, 0), make([]byte, 6)...)},
			tc{"trailer-1000", k.kind, append(mk(0, 60, nil, 0), bytes.Repeat([]byte{0xee}, 1000)...)},
			tc{"vlan", k.kind, framingTag(mk(0x02, 60, nil, 10), 0x8100)},
			tc{"qinq", k.kind, framingTag(mk(0x01, 60, nil, 10), 0x88a8, 0x8100)},
			tc{"opts-rr", k.kind, mk(0x02, 60, rr, 5)},
			tc{"opts-ts", k.kind, mk(0x02, 60, ts, 5)},
			tc{"opts-rr-vlan-padded", k.kind, append(framingTag(mk(0x03, 60, rr, 0), 0x8100), make([]byte, 30)...)},
			tc{"mtu-exact", k.kind, mk(0x02, 60, nil, 1500-encap.Overhead(map[string]encap.Kind{"gre": encap.GRE, "ipip": encap.IPIP, "gue": encap.GUE}[k.kind], false)-40)},
		)
	}
	syn6 := func(tc byte, hl byte, nh uint8, ext []byte) []byte {
		sp++
		f := raw6(hpClient6, "2001:db8:ffff::7", nh, cat(ext, tcpSeg(sp, 443, packet.TCPSyn, 0)))
		binary.BigEndian.PutUint16(f[14:], 0x6000|uint16(tc)<<4)
		f[21] = hl
		return f
	}
	cases = append(cases,
		tc{"v6-plain", "gue", syn6(0, 60, packet.ProtoTCP, nil)},
		tc{"v6-ecn-ce", "gue", syn6(0x03, 60, packet.ProtoTCP, nil)},
		tc{"v6-hl0", "gue", syn6(0xb8, 0, packet.ProtoTCP, nil)},
		tc{"v6-hbh", "gue", syn6(0, 60, 0, ext6(packet.ProtoTCP, 0, 0, 0))},
		tc{"v6-hbh-dst-rh0left0", "gue", syn6(0, 60, 0, cat(ext6(60, 0, 0, 0), ext6(43, 0, 0, 0), []byte{packet.ProtoTCP, 2, 0, 0, 0, 0, 0, 0}, make([]byte, 16)))},
		tc{"v6-srh-left0", "gue", syn6(0, 60, 43, cat([]byte{packet.ProtoTCP, 2, 4, 0, 0, 0, 0, 0}, make([]byte, 16)))},
		tc{"v6-atomic-frag", "gue", syn6(0, 60, 44, frag6(packet.ProtoTCP, 0, false, 9))},
		tc{"v6-frag-then-dst", "gue", syn6(0, 60, 44, cat(frag6(60, 0, false, 9), ext6(packet.ProtoTCP, 0, 0, 0)))},
		tc{"v6-vlan-padded", "gue", append(framingTag(syn6(0x01, 60, packet.ProtoTCP, nil), 0x8100), make([]byte, 8)...)},
	)
	var frames [][]byte
	for _, c := range cases {
		frames = append(frames, c.f)
	}
	l.send(frames...)
	out := l.recv(len(frames), 10*time.Second)
	if len(out) != len(frames) {
		t.Fatalf("received %d of %d; counters %+v", len(out), len(frames), l.counters())
	}
	for i, c := range cases {
		name := c.kind + "/" + c.name
		o := out[i]
		if !bytes.Equal(o[0:6], gwMAC[:]) || !bytes.Equal(o[6:12], l.eng.PortMAC[:]) {
			t.Errorf("%s: Ethernet % x", name, o[:14])
		}
		inner := framingOuter(t, name, o, c.kind)
		want := ipPacket(stripTags(c.f))
		if !bytes.Equal(inner, want) {
			t.Errorf("%s: inner packet differs\n got % x\nwant % x", name, inner, want)
		}
		if strings.HasPrefix(c.name, "mtu-exact") && len(o)-14 != 1500 {
			t.Errorf("%s: outer packet %d bytes, want exactly the MTU", name, len(o)-14)
		}
	}
	if c := l.counters(); c.Encap[encap.Forward] != uint64(len(frames)) || c.RxPackets != uint64(len(frames)) || c.TxPackets != uint64(len(frames)) {
		t.Errorf("rx %d forwarded %d tx %d, want %d each", c.RxPackets, c.Encap[encap.Forward], c.TxPackets, len(frames))
	}
}

// TestEngineVIPBytesIgnorePadding: a VIP's and a backend's forwarded
// bytes (fulcrum_{vip,backend}_bytes_total, fulcrumctl's BYTES and
// BYTE/S) must not count what is not forwarded: the Ethernet padding of a
// minimum-size frame, or bytes a sender appends past the IP packet's own
// length. Two flows with the same IP packets, one sent bare and one with
// a trailer, must count the same bytes; today the trailer counts, so a
// client can make a VIP's byte counters (and rates) anything it likes
// while the backend receives 40-byte SYNs.
func TestEngineVIPBytesIgnorePadding(t *testing.T) {
	l := newLab(t, Config)
	const n = 32
	var bare, padded [][]byte
	for i := range n {
		f := raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(uint16(20000+i), 80, packet.TCPAck, 0))
		bare = append(bare, f)
		g := raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(uint16(21000+i), 80, packet.TCPAck, 0))
		if i%2 == 0 {
			g = append(g, make([]byte, 60-len(g))...) // Ethernet's minimum frame
		} else {
			g = append(g, bytes.Repeat([]byte{0xee}, 1800)...) // trailing bytes past the IP length
		}
		padded = append(padded, g)
	}
	v := framingVIP(t, l, "gre")
	l.send(bare...)
	if out := l.recv(n, 10*time.Second); len(out) != n {
		t.Fatalf("bare: received %d of %d", len(out), n)
	}
	c1 := framingWorker(t, l)
	l.send(padded...)
	out := l.recv(n, 10*time.Second)
	if len(out) != n {
		t.Fatalf("padded: received %d of %d", len(out), n)
	}
	for i, o := range out {
		if len(o) != 14+20+4+40 {
			t.Errorf("padded frame %d forwarded as %d bytes, want %d", i, len(o), 14+20+4+40)
		}
	}
	c2 := framingWorker(t, l)
	bareBytes := c1.VIP(v.ID).Bytes
	padBytes := c2.VIP(v.ID).Bytes - bareBytes
	if c2.VIP(v.ID).Packets != 2*n {
		t.Fatalf("VIP packets %d, want %d", c2.VIP(v.ID).Packets, 2*n)
	}
	if padBytes != bareBytes {
		t.Errorf("VIP bytes: %d for %d bare 40-byte packets, %d for the same packets padded or with a trailer (forwarded the same %d bytes)", bareBytes, n, padBytes, n*(14+20+4+40))
	}
	be := l.shared.Services.Load().Backends[v.Members[0]]
	if b1, b2 := c1.Backend(be.ID).Bytes, c2.Backend(be.ID).Bytes; b2-b1 != b1 {
		t.Errorf("backend bytes: %d bare, %d padded", b1, b2-b1)
	}
}

type logCountHandler struct{ n *atomic.Int64 }

func (h logCountHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h logCountHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h logCountHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logCountHandler) WithGroup(string) slog.Handler      { return h }

// TestEngineBadFramesLogNothing: 1,024 malformed, refused or too-big
// frames through the engine produce no DPDK log record (a per-packet log
// on an error path would let a flood fill the journal); each is counted.
func TestEngineBadFramesLogNothing(t *testing.T) {
	var n atomic.Int64
	if err := dpdk.SetLogger(slog.New(logCountHandler{&n})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dpdk.SetLogger(nil) })
	l := newLab(t, Config)
	base := n.Load()
	syn := raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(1, 80, packet.TCPSyn, 0))
	ihl4 := append([]byte(nil), syn...)
	ihl4[14] = 0x44
	v5 := append([]byte(nil), syn...)
	v5[14] = 0x55
	big := raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(2, 80, packet.TCPAck, 1700))
	bigNoDF := raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0, tcpSeg(3, 80, packet.TCPAck, 1700))
	bad := [][]byte{syn[:13], ihl4, v5, framingTag(syn, 0x8100, 0x8100, 0x8100), big, bigNoDF,
		raw6(hpClient6, "2001:db8:ffff::7", 60, []byte{packet.ProtoTCP, 3, 1, 4, 0, 0, 0, 0}),
		raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(4, 80, 0, 0))}
	var frames [][]byte
	for i := 0; i < 1024; i++ {
		frames = append(frames, bad[i%len(bad)])
	}
	l.send(frames...)
	deadline := time.Now().Add(10 * time.Second)
	for l.counters().RxPackets < uint64(len(frames)) && time.Now().Before(deadline) {
		l.drain(10 * time.Millisecond)
	}
	l.drain(20 * time.Millisecond)
	c := l.counters()
	if c.RxPackets != uint64(len(frames)) {
		t.Fatalf("rx %d of %d", c.RxPackets, len(frames))
	}
	dpdk.FlushLog() // lines of the EAL's own threads are queued
	if got := n.Load() - base; got != 0 {
		t.Errorf("%d DPDK log records for %d bad frames", got, len(frames))
	}
}
