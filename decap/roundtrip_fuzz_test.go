package decap

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
)

// FuzzEncapRoundTrip: whatever client packet package packet accepts and
// package encap forwards, this package takes back out unchanged:
// Strip(Encap(x)) is x (the inner IP packet, byte for byte), of the kind
// encap wrote, naming the second chance encap wrote (and none when the
// kind cannot carry it). The two ends configured alike (GUE port, zero
// UDP checksums over IPv6) must agree on every packet; the only refusal
// allowed is an inner packet that is itself a tunnel (ErrInnerTunnel,
// documented).
//
// frame is a whole Ethernet frame as the LB receives it; sel picks bits
// 0-1 the kind, 2 the backend's family, 3-4 the chance (none, IPv4,
// IPv6), 5 zero checksums over IPv6, 6-7 the DF mode.
func FuzzEncapRoundTrip(f *testing.F) {
	for _, v6 := range []bool{false, true} {
		in := innerSYN(f, v6)
		eth := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0}
		if v6 {
			eth[12], eth[13] = 0x86, 0xdd
		}
		fr := append(eth, in...)
		for sel := 0; sel < 256; sel += 7 {
			f.Add(fr, uint8(sel), uint64(sel)*0x9e3779b97f4a7c15, uint16(6080))
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte, sel uint8, hash uint64, port uint16) {
		var p packet.Parsed
		if packet.Parse(frame, &p) != packet.OK {
			return
		}
		if port == 0 {
			port = encap.DefaultGUEPort
		}
		zero := sel&32 != 0
		e, err := encap.New(encap.Config{SrcV4: netip.MustParseAddr("192.0.2.1"), SrcV6: netip.MustParseAddr("2001:db8:1::1"),
			GUEPort: int(port), GUEZeroChecksumV6: zero, DF: encap.DF(sel >> 6 % 3), MTU: encap.MaxMTU})
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(Config{GUEPort: port, GUEZeroChecksumV6: zero})
		if err != nil {
			t.Fatal(err)
		}
		kind := encap.Kind(sel & 3 % 3)
		beAddr := "192.0.2.21"
		if sel&4 != 0 {
			beAddr = "2001:db8:1::21"
		}
		be, err := e.Backend(netip.MustParseAddr(beAddr))
		if err != nil {
			t.Fatal(err)
		}
		var ch *encap.Backend
		switch sel >> 3 & 3 {
		case 1:
			c, _ := e.Backend(netip.MustParseAddr("192.0.2.22"))
			ch = &c
		case 2:
			c, _ := e.Backend(netip.MustParseAddr("2001:db8:1::22"))
			ch = &c
		}
		const room = 128
		buf := make([]byte, room+len(frame))
		copy(buf[room:], frame)
		inner := append([]byte(nil), frame[p.L3Off:int(p.L3Off)+int(p.IPLen)]...)
		start, length, res := e.EncapChance(buf, room, len(frame), &p, hash, kind, &be, ch, [6]byte{2}, [6]byte{4})
		if res != encap.Forward {
			return
		}
		out := buf[start+14 : start+length]
		got, gotKind, gotCh, err := d.StripChance(out)
		if errors.Is(err, ErrInnerTunnel) {
			return
		}
		if errors.Is(err, ErrUDPChecksum) && !innerChecksumsOK(inner) {
			return // encap's documented shortcut: a bad inner checksum makes the outer one bad
		}
		if err != nil {
			t.Fatalf("%v (outer v6 %v, chance %v): decap refused encap's packet: %v\nframe %x\nout %x", kind, be.IsV6(), ch, err, frame, out)
		}
		if gotKind != kind {
			t.Fatalf("kind %v, wrote %v", gotKind, kind)
		}
		if !bytes.Equal(got, inner) {
			t.Fatalf("%v: inner changed\n got %x\nwant %x", kind, got, inner)
		}
		want := netip.Addr{}
		if ch != nil && encap.CanCarry(kind, ch) {
			want = ch.Addr()
		}
		if gotCh != want {
			t.Fatalf("%v: chance %v, wrote %v", kind, gotCh, want)
		}
	})
}

// sum16 is the ones'-complement sum of b (big-endian words, an odd last
// byte padded), folded.
func sum16(s uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return s
}

// innerChecksumsOK reports whether every checksum the inner packet carries
// verifies: an IPv4 header's, and a TCP, UDP (non-zero), ICMP or ICMPv6
// segment's right after the fixed IP header of an unfragmented packet
// whose length fields agree with its size. Anything else counts as OK.
func innerChecksumsOK(pkt []byte) bool {
	var pseudo uint32
	var seg []byte
	var proto uint8
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&15) * 4
		if ihl < 20 || ihl > len(pkt) || sum16(0, pkt[:ihl]) != 0xffff {
			return false
		}
		if int(pkt[2])<<8|int(pkt[3]) != len(pkt) || pkt[6]&0x3f != 0 || pkt[7] != 0 || pkt[6]&0x20 != 0 {
			return true
		}
		proto, seg = pkt[9], pkt[ihl:]
		pseudo = sum16(0, pkt[12:20])
	case 6:
		if 40+(int(pkt[4])<<8|int(pkt[5])) != len(pkt) {
			return true
		}
		proto, seg = pkt[6], pkt[40:]
		pseudo = sum16(0, pkt[8:40])
	}
	pseudo = sum16(pseudo+uint32(proto)+uint32(len(seg)>>16)+uint32(len(seg)&0xffff), nil)
	switch proto {
	case 6:
		if len(seg) < 20 {
			return true
		}
	case 17:
		if len(seg) < 8 || seg[6]|seg[7] == 0 {
			return true
		}
	case 1:
		return len(seg) < 8 || sum16(0, seg) == 0xffff
	case 58:
		if len(seg) < 4 {
			return true
		}
	default:
		return true
	}
	return sum16(pseudo, seg) == 0xffff
}
