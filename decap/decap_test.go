package decap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

type stripCase struct {
	name  string
	d     *Decapsulator // nil: the package default
	pkt   []byte
	inner []byte // the expected inner packet, when err is nil
	kind  Kind
	err   Error
}

func mustNew(t testing.TB, c Config) *Decapsulator {
	t.Helper()
	d, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// okCases are the packets Fulcrum's encapsulator sends, and the variants a
// decapsulator must also accept, over every outer/inner family pair.
func okCases(t testing.TB) []stripCase {
	var cs []stripCase
	fams := map[bool]string{false: "4", true: "6"}
	for _, outer6 := range []bool{false, true} {
		for _, inner6 := range []bool{false, true} {
			in := innerSYN(t, inner6)
			n := fams[inner6] + "in" + fams[outer6]
			cs = append(cs,
				stripCase{name: "gre " + n, pkt: gre(t, outer6, in), inner: in, kind: GRE},
				stripCase{name: "ipip " + n, pkt: ipip(t, outer6, in), inner: in, kind: IPIP},
				stripCase{name: "gue " + n, pkt: gue(t, outer6, in), inner: in, kind: GUE},
				stripCase{name: "gre checksum " + n, pkt: greWith(t, outer6, &layers.GRE{ChecksumPresent: true, Protocol: greProto(in)}, in), inner: in, kind: GRE},
				stripCase{name: "gue hlen 2 " + n, pkt: udpWith(t, outer6, 6080, cat([]byte{2, byte(ipipProto(in)), 0, 0}, make([]byte, 8), in)), inner: in, kind: GUE},
				stripCase{name: "gue variant 1 " + n, pkt: udpWith(t, outer6, 6080, in), inner: in, kind: GUE},
			)
		}
	}
	in4, in6 := innerSYN(t, false), innerSYN(t, true)
	cs = append(cs,
		stripCase{name: "ethernet padding after the outer packet", pkt: cat(gre(t, false, in4), make([]byte, 10)), inner: in4, kind: GRE},
		stripCase{name: "bytes after the inner packet", pkt: ipip(t, false, cat(in4, []byte{1, 2, 3})), inner: in4, kind: IPIP},
		stripCase{name: "gre reserved0 bits 6-12 ignored", pkt: greWith(t, false, &layers.GRE{RecursionControl: 3, Flags: 0x1f, Protocol: layers.EthernetTypeIPv4}, in4), inner: in4, kind: GRE},
		stripCase{name: "outer ipv4 options", pkt: serialize(t,
			&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolGRE, SrcIP: lb4, DstIP: be4,
				Options: []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}},
			&layers.GRE{Protocol: layers.EthernetTypeIPv4}, gopacket.Payload(in4)), inner: in4, kind: GRE},
		stripCase{name: "outer ipv6 hop-by-hop and destination options", pkt: serialize(t,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6HopByHop, SrcIP: lb6, DstIP: be6},
			hopByHop(layers.IPProtocolIPv6Destination),
			destOpts(layers.IPProtocolGRE),
			&layers.GRE{Protocol: layers.EthernetTypeIPv6}, gopacket.Payload(in6)), inner: in6, kind: GRE},
		stripCase{name: "gue zero udp checksum over ipv4", pkt: patch(gue(t, false, in4), func(b []byte) { b[26], b[27] = 0, 0 }), inner: in4, kind: GUE},
		stripCase{name: "gue zero udp checksum over ipv6, allowed",
			d:   mustNew(t, Config{GUEZeroChecksumV6: true}),
			pkt: patch(gue(t, true, in6), func(b []byte) { b[46], b[47] = 0, 0 }), inner: in6, kind: GUE},
		stripCase{name: "gue on a configured port", d: mustNew(t, Config{GUEPort: 7777}),
			pkt: udpWith(t, false, 7777, cat(gueHdr(in4), in4)), inner: in4, kind: GUE},
		stripCase{name: "only the configured kind", d: mustNew(t, Config{Kinds: []Kind{IPIP}}),
			pkt: ipip(t, true, in4), inner: in4, kind: IPIP},
	)
	return cs
}

// badCases are one case per refusal, most of them built right and then
// broken in exactly one place.
func badCases(t testing.TB) []stripCase {
	in4, in6 := innerSYN(t, false), innerSYN(t, true)
	g4 := gre(t, false, in4)
	g6 := gre(t, true, in6)
	u4 := gue(t, false, in4)
	u6 := gue(t, true, in6)
	udp4 := func(payload []byte) []byte { return udpWith(t, false, DefaultGUEPort, payload) }
	dest := destOpts(layers.IPProtocolIPv6Destination)
	return []stripCase{
		{name: "empty", pkt: nil, err: ErrTruncated},
		{name: "ip version 5", pkt: patch(g4, func(b []byte) { b[0] = 0x55 }), err: ErrIPVersion},
		{name: "ipv4 shorter than its header", pkt: g4[:19], err: ErrTruncated},
		{name: "ipv4 ihl 4", pkt: patch(g4, func(b []byte) { b[0] = 0x44 }), err: ErrIPHeader},
		{name: "ipv4 total length below ihl", pkt: patch(g4, func(b []byte) { binary.BigEndian.PutUint16(b[2:], 19) }), err: ErrIPHeader},
		{name: "ipv4 total length past the buffer", pkt: g4[:len(g4)-1], err: ErrTruncated},
		{name: "ipv4 header checksum", pkt: patch(g4, func(b []byte) { b[10] ^= 1 }), err: ErrIPChecksum},
		{name: "ipv4 fragment", pkt: serialize(t,
			&layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4MoreFragments, Protocol: layers.IPProtocolGRE, SrcIP: lb4, DstIP: be4},
			&layers.GRE{Protocol: layers.EthernetTypeIPv4}, gopacket.Payload(in4)), err: ErrFragment},
		{name: "ipv6 shorter than its header", pkt: g6[:39], err: ErrTruncated},
		{name: "ipv6 payload length past the buffer", pkt: g6[:len(g6)-1], err: ErrTruncated},
		{name: "ipv6 fragment header", pkt: serialize(t,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Fragment, SrcIP: lb6, DstIP: be6},
			gopacket.Payload{47, 0, 0, 1, 0, 0, 0, 1}, &layers.GRE{Protocol: layers.EthernetTypeIPv6}, gopacket.Payload(in6)), err: ErrFragment},
		{name: "ipv6 extension header past the payload", pkt: serialize(t,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Destination, SrcIP: lb6, DstIP: be6},
			gopacket.Payload{47, 1, 0, 0, 0, 0, 0, 0}), err: ErrTruncated},
		{name: "ipv6 too many extension headers", pkt: serialize(t,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Destination, SrcIP: lb6, DstIP: be6},
			dest, dest, dest, dest, dest, gopacket.Payload(in6)), err: ErrIPHeader},
		{name: "not a tunnel: tcp", pkt: in4, err: ErrProtocol},
		{name: "udp to another port", pkt: udpWith(t, false, 53, cat(gueHdr(in4), in4)), err: ErrUDPPort},
		{name: "udp header truncated", pkt: patch(u4[:24], func(b []byte) {
			binary.BigEndian.PutUint16(b[2:], 24)
			b[10], b[11] = 0, 0
			binary.BigEndian.PutUint16(b[10:], ^checksum(b[:20]))
		}), err: ErrTruncated},

		{name: "gre disabled", d: mustNew(t, Config{Kinds: []Kind{IPIP, GUE}}), pkt: g4, kind: GRE, err: ErrKindDisabled},
		{name: "ipip disabled", d: mustNew(t, Config{Kinds: []Kind{GRE}}), pkt: ipip(t, false, in4), kind: IPIP, err: ErrKindDisabled},
		{name: "gue disabled", d: mustNew(t, Config{Kinds: []Kind{GRE, IPIP}}), pkt: u4, kind: GUE, err: ErrKindDisabled},

		{name: "gre truncated", pkt: serialize(t, outerIP(false, layers.IPProtocolGRE).(gopacket.SerializableLayer), gopacket.Payload{0, 0}), kind: GRE, err: ErrTruncated},
		{name: "gre version 1 (pptp)", pkt: greWith(t, false, &layers.GRE{Version: 1, KeyPresent: true, Protocol: 0x880b}, in4), kind: GRE, err: ErrGREVersion},
		{name: "gre key (rfc 2890) naming no unicast address", pkt: greWith(t, false, &layers.GRE{KeyPresent: true, Key: 7, Protocol: layers.EthernetTypeIPv4}, in4), kind: GRE, err: ErrSecondChance},
		{name: "gre sequence number (rfc 2890)", pkt: greWith(t, true, &layers.GRE{SeqPresent: true, Seq: 7, Protocol: layers.EthernetTypeIPv6}, in6), kind: GRE, err: ErrGREFlags},
		{name: "gre routing (rfc 1701)", pkt: patch(g4, func(b []byte) { b[20] |= 0x40 }), kind: GRE, err: ErrGREFlags},
		{name: "gre bit 5 (rfc 1701 recursion control's top bit)", pkt: greWith(t, false, &layers.GRE{RecursionControl: 4, Protocol: layers.EthernetTypeIPv4}, in4), kind: GRE, err: ErrGREFlags},
		{name: "gre checksum wrong", pkt: patch(greWith(t, false, &layers.GRE{ChecksumPresent: true, Protocol: layers.EthernetTypeIPv4}, in4), func(b []byte) { b[len(b)-1] ^= 0x10 }), kind: GRE, err: ErrGREChecksum},
		{name: "gre checksum word truncated", pkt: patch(g4[:24], func(b []byte) {
			b[20] |= 0x80
			binary.BigEndian.PutUint16(b[2:], 24)
			b[10], b[11] = 0, 0
			binary.BigEndian.PutUint16(b[10:], ^checksum(b[:20]))
		}), kind: GRE, err: ErrTruncated},
		{name: "gre transparent ethernet bridging", pkt: greWith(t, false, &layers.GRE{Protocol: layers.EthernetTypeTransparentEthernetBridging}, in4), kind: GRE, err: ErrGREProtocol},
		{name: "gre says ipv4, carries ipv6", pkt: greWith(t, false, &layers.GRE{Protocol: layers.EthernetTypeIPv4}, in6), kind: GRE, err: ErrInnerVersion},

		{name: "udp length below 8", pkt: patch(u4, func(b []byte) { binary.BigEndian.PutUint16(b[24:], 7) }), kind: GUE, err: ErrUDPLength},
		{name: "udp length past the packet", pkt: patch(u4, func(b []byte) { binary.BigEndian.PutUint16(b[24:], uint16(len(b)-20+1)) }), kind: GUE, err: ErrUDPLength},
		{name: "udp checksum wrong", pkt: patch(u4, func(b []byte) { b[len(b)-1] ^= 0x10 }), kind: GUE, err: ErrUDPChecksum},
		{name: "udp checksum wrong over ipv6", pkt: patch(u6, func(b []byte) { b[len(b)-1] ^= 0x10 }), kind: GUE, err: ErrUDPChecksum},
		{name: "udp zero checksum over ipv6", pkt: patch(u6, func(b []byte) { b[46], b[47] = 0, 0 }), kind: GUE, err: ErrUDPZeroChecksum},
		{name: "gue empty", pkt: udp4(nil), kind: GUE, err: ErrTruncated},
		{name: "gue variant 2", pkt: udp4(cat([]byte{0x80, 4, 0, 0}, in4)), kind: GUE, err: ErrGUEVersion},
		{name: "gue variant 0 truncated", pkt: udp4([]byte{0, 4, 0}), kind: GUE, err: ErrTruncated},
		{name: "gue control message", pkt: udp4(cat([]byte{0x20, 0, 0, 0}, in4)), kind: GUE, err: ErrGUEControl},
		{name: "gue flags", pkt: udp4(cat([]byte{0, 4, 0x80, 0}, in4)), kind: GUE, err: ErrGUEFlags},
		{name: "gue proto tcp", pkt: udp4(cat([]byte{0, 6, 0, 0}, in4)), kind: GUE, err: ErrGUEProtocol},
		{name: "gue variant 1, ip version 5", pkt: udp4(patch(in4, func(b []byte) { b[0] = 0x55 })), kind: GUE, err: ErrGUEProtocol},
		{name: "gue hlen past the packet", pkt: udp4([]byte{1, 4, 0, 0, 0, 0}), kind: GUE, err: ErrTruncated},
		{name: "gue says ipv6, carries ipv4", pkt: udp4(cat([]byte{0, 41, 0, 0}, in4)), kind: GUE, err: ErrInnerVersion},

		{name: "ipip empty", pkt: ipip(t, false, nil), kind: IPIP, err: ErrInnerTruncated},
		{name: "ipip 4 carries ipv6", pkt: serialize(t, outerIP(false, layers.IPProtocolIPv4).(gopacket.SerializableLayer), gopacket.Payload(in6)), kind: IPIP, err: ErrInnerVersion},
		{name: "ipip 41 carries ipv4", pkt: serialize(t, outerIP(true, layers.IPProtocolIPv6).(gopacket.SerializableLayer), gopacket.Payload(in4)), kind: IPIP, err: ErrInnerVersion},
		{name: "inner ipv4 shorter than its header", pkt: ipip(t, false, in4[:19]), kind: IPIP, err: ErrInnerTruncated},
		{name: "inner ipv4 length past the payload", pkt: ipip(t, false, in4[:len(in4)-1]), kind: IPIP, err: ErrInnerTruncated},
		{name: "inner ipv4 ihl 3", pkt: ipip(t, false, patch(in4, func(b []byte) { b[0] = 0x43 })), kind: IPIP, err: ErrInnerHeader},
		{name: "inner ipv4 length below ihl", pkt: ipip(t, false, patch(in4, func(b []byte) { binary.BigEndian.PutUint16(b[2:], 10) })), kind: IPIP, err: ErrInnerHeader},
		{name: "inner ipv6 shorter than its header", pkt: ipip(t, true, in6[:39]), kind: IPIP, err: ErrInnerTruncated},
		{name: "inner ipv6 length past the payload", pkt: gre(t, true, in6[:len(in6)-1]), kind: GRE, err: ErrInnerTruncated},

		// Tunnels in tunnels: delivered, the inner tunnel would come back
		// to the decapsulator, once per layer.
		{name: "gre in gre", pkt: gre(t, false, gre(t, false, in4)), kind: GRE, err: ErrInnerTunnel},
		{name: "gre in gre over ipv6", pkt: gre(t, true, gre(t, true, in6)), kind: GRE, err: ErrInnerTunnel},
		{name: "ipip in gue", pkt: gue(t, false, ipip(t, false, in4)), kind: GUE, err: ErrInnerTunnel},
		{name: "6in4 in ipip", pkt: ipip(t, false, ipip(t, false, in6)), kind: IPIP, err: ErrInnerTunnel},
		{name: "gue in ipip", pkt: ipip(t, false, gue(t, false, in4)), kind: IPIP, err: ErrInnerTunnel},
		{name: "gue in gue over ipv6", pkt: gue(t, true, gue(t, true, in6)), kind: GUE, err: ErrInnerTunnel},
		{name: "gre behind inner ipv6 destination options", pkt: gre(t, false, serialize(t,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Destination, SrcIP: lb6, DstIP: be6},
			destOpts(layers.IPProtocolGRE), &layers.GRE{Protocol: layers.EthernetTypeIPv4}, gopacket.Payload(in4))), kind: GRE, err: ErrInnerTunnel},
		{name: "udp to the gue port behind an inner ipv6 first fragment", pkt: gre(t, false, serialize(t,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Fragment, SrcIP: lb6, DstIP: be6},
			gopacket.Payload{17, 0, 0, 1, 0, 0, 0, 9}, gopacket.Payload(udpWith(t, false, DefaultGUEPort, cat(gueHdr(in4), in4))[20:]))), kind: GRE, err: ErrInnerTunnel},
		{name: "gre in a non-first inner ipv6 fragment", pkt: gre(t, false, serialize(t,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Fragment, SrcIP: lb6, DstIP: be6},
			gopacket.Payload{47, 0, 0, 8, 0, 0, 0, 9}, gopacket.Payload(in4))), kind: GRE, err: ErrInnerTunnel},
		{name: "gre in a non-first inner ipv4 fragment", pkt: ipip(t, false, serialize(t,
			&layers.IPv4{Version: 4, TTL: 64, FragOffset: 100, Protocol: layers.IPProtocolGRE, SrcIP: lb4, DstIP: be4}, gopacket.Payload(in4))), kind: IPIP, err: ErrInnerTunnel},
		{name: "inner ipv6 with too many extension headers", pkt: gre(t, false, serialize(t,
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6Destination, SrcIP: lb6, DstIP: be6},
			dest, dest, dest, dest, dest, dest, dest, dest, destOpts(layers.IPProtocolTCP), gopacket.Payload("x"))), kind: GRE, err: ErrInnerTunnel},
		{name: "udp to the gue port of a configured decapsulator", d: mustNew(t, Config{GUEPort: 7777}),
			pkt: gre(t, false, udpWith(t, false, 7777, []byte("x"))), kind: GRE, err: ErrInnerTunnel},
	}
}

// checksum is RFC 1071's checksum, written out here so the test does not
// use the code under test to build its packets.
func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// within reports whether sub lies inside b's memory (no copy was made).
func within(sub, b []byte) bool {
	if len(sub) == 0 || len(b) == 0 {
		return false
	}
	s, p := uintptr(unsafe.Pointer(unsafe.SliceData(sub))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return s >= p && s+uintptr(len(sub)) <= p+uintptr(len(b))
}

func checkCase(t *testing.T, c stripCase, inner []byte, kind Kind, err error) {
	t.Helper()
	if c.err != 0 {
		if err != c.err || !errors.Is(err, c.err) {
			t.Fatalf("err %v, want %v", err, c.err)
		}
		if inner != nil {
			t.Errorf("inner %x on error", inner)
		}
		if c.kind != 0 && kind != c.kind {
			t.Errorf("kind %v, want %v", kind, c.kind)
		}
		return
	}
	if err != nil {
		t.Fatalf("err %v", err)
	}
	if kind != c.kind {
		t.Errorf("kind %v, want %v", kind, c.kind)
	}
	if !bytes.Equal(inner, c.inner) {
		t.Errorf("inner\n %x\nwant\n %x", inner, c.inner)
	}
	if !within(inner, c.pkt) {
		t.Errorf("inner is not a sub-slice of the packet")
	}
}

// TestStripInnerNotTunnel: inner packets that look like a tunnel but are
// not one are delivered: UDP to another port, UDP to 6080 when GUE is on
// another port, a non-first UDP fragment (no port to read; its first
// fragment is what is refused).
func TestStripInnerNotTunnel(t *testing.T) {
	in4 := innerSYN(t, false)
	udp53 := udpWith(t, false, 53, []byte("query"))
	udpGUE := udpWith(t, false, DefaultGUEPort, cat(gueHdr(in4), in4))
	udpFrag := serialize(t, &layers.IPv4{Version: 4, TTL: 64, FragOffset: 100, Protocol: layers.IPProtocolUDP, SrcIP: lb4, DstIP: be4},
		gopacket.Payload(udpGUE[20:]))
	for _, c := range []stripCase{
		{name: "udp to another port", pkt: gre(t, false, udp53), inner: udp53, kind: GRE},
		{name: "udp to 6080, gue on 7777", d: mustNew(t, Config{GUEPort: 7777}), pkt: gre(t, false, udpGUE), inner: udpGUE, kind: GRE},
		{name: "non-first udp fragment", pkt: gre(t, false, udpFrag), inner: udpFrag, kind: GRE},
		{name: "udp to another port in gue", pkt: gue(t, true, udp53), inner: udp53, kind: GUE},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			if d == nil {
				d = std
			}
			inner, kind, err := d.Strip(c.pkt)
			checkCase(t, c, inner, kind, err)
		})
	}
}

func TestStrip(t *testing.T) {
	for _, c := range append(okCases(t), badCases(t)...) {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			if d == nil {
				d = std
			}
			inner, kind, err := d.Strip(c.pkt)
			checkCase(t, c, inner, kind, err)
		})
	}
}

// TestStripDecodesWithGopacket checks the inner packets once more with an
// independent decoder: the TCP SYN is intact behind every tunnel.
func TestStripDecodesWithGopacket(t *testing.T) {
	for _, c := range okCases(t) {
		inner, _, err := Strip(c.pkt)
		if c.d != nil {
			inner, _, err = c.d.Strip(c.pkt)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		first := layers.LayerTypeIPv4
		if innerV6(inner) {
			first = layers.LayerTypeIPv6
		}
		p := gopacket.NewPacket(inner, first, gopacket.Default)
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if tcp == nil || !tcp.SYN || tcp.DstPort != 80 || string(tcp.Payload) != "hello" {
			t.Errorf("%s: inner does not decode as the SYN: %v", c.name, p)
		}
	}
}

// TestStripPayload feeds what a raw IPv6 socket delivers: the packet
// after the IPv6 header, with the next header known from the socket.
func TestStripPayload(t *testing.T) {
	for _, c := range okCases(t) {
		if c.pkt[0]>>4 != 6 || c.kind == GUE || c.pkt[6] != byte(layers.IPProtocolGRE) && c.pkt[6] != 4 && c.pkt[6] != 41 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			if d == nil {
				d = std
			}
			inner, kind, err := d.StripPayload(c.pkt[6], c.pkt[40:])
			checkCase(t, c, inner, kind, err)
		})
	}
	if _, _, err := StripPayload(17, make([]byte, 64)); err != ErrProtocol {
		t.Errorf("udp payload: %v, want ErrProtocol", err)
	}
}

// TestStripGUE feeds what a UDP socket on the GUE port reads.
func TestStripGUE(t *testing.T) {
	for _, c := range append(okCases(t), badCases(t)...) {
		if c.kind != GUE || len(c.pkt) == 0 {
			continue
		}
		switch c.err {
		case ErrUDPLength, ErrUDPChecksum, ErrUDPZeroChecksum, ErrKindDisabled:
			continue // the kernel's UDP checks, or the config
		}
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			if d == nil {
				d = std
			}
			udp := c.pkt[outerLen(c.pkt):]
			ulen := binary.BigEndian.Uint16(udp[4:])
			inner, kind, err := d.StripGUE(udp[8:ulen])
			checkCase(t, c, inner, kind, err)
		})
	}
}

func TestNew(t *testing.T) {
	d, err := New(Config{Kinds: []Kind{GUE}, GUEPort: 9999})
	if err != nil {
		t.Fatal(err)
	}
	if d.Accepts(GRE) || d.Accepts(IPIP) || !d.Accepts(GUE) || d.Accepts(Kind(numKinds)) || d.GUEPort() != 9999 {
		t.Errorf("accepts gre %v ipip %v gue %v, port %d", d.Accepts(GRE), d.Accepts(IPIP), d.Accepts(GUE), d.GUEPort())
	}
	if _, err := New(Config{Kinds: []Kind{Kind(numKinds)}}); !errors.Is(err, ErrConfig) {
		t.Errorf("kind %d: %v, want ErrConfig", numKinds, err)
	}
	if std.GUEPort() != 6080 || !std.Accepts(GRE) || !std.Accepts(IPIP) || !std.Accepts(GUE) {
		t.Errorf("zero config: port %d", std.GUEPort())
	}
}

func TestErrorNames(t *testing.T) {
	seen := map[string]bool{}
	for e := Error(0); e < NumErrors; e++ {
		s := e.String()
		if s == "" || seen[s] {
			t.Errorf("error %d: name %q empty or repeated", e, s)
		}
		seen[s] = true
	}
	if got := ErrGREFlags.Error(); got != "decap: gre-flags" {
		t.Errorf("Error() = %q", got)
	}
	if got := Error(200).String(); got != "decap-error(200)" {
		t.Errorf("out of range: %q", got)
	}
}

func TestStripAllocs(t *testing.T) {
	cs := append(okCases(t), badCases(t)...)
	allocs := testing.AllocsPerRun(100, func() {
		for _, c := range cs {
			d := c.d
			if d == nil {
				d = std
			}
			d.Strip(c.pkt)
			if len(c.pkt) > 40 {
				d.StripPayload(c.pkt[6], c.pkt[40:])
				d.StripGUE(c.pkt[28:])
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

func BenchmarkStrip(b *testing.B) {
	in4 := innerSYN(b, false)
	for _, c := range []struct {
		name string
		pkt  []byte
	}{
		{"gre4", gre(b, false, in4)},
		{"ipip4", ipip(b, false, in4)},
		{"gue4", gue(b, false, in4)},
		{"gue6", gue(b, true, in4)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.pkt)))
			for b.Loop() {
				if _, _, err := Strip(c.pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func ExampleStrip() {
	// IPv4 192.0.2.1 -> 192.0.2.21, GRE, IPv4 198.51.100.10 -> 203.0.113.7
	// carrying no payload (protocol 253, for experiments).
	pkt := []byte{
		0x45, 0, 0, 44, 0, 0, 0x40, 0, 64, 47, 0xb6, 0x8c, 192, 0, 2, 1, 192, 0, 2, 21,
		0, 0, 0x08, 0x00,
		0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 253, 0, 0, 198, 51, 100, 10, 203, 0, 113, 7,
	}
	inner, kind, err := Strip(pkt)
	fmt.Println(kind, len(inner), err)
	_, _, err = Strip(pkt[:30])
	fmt.Println(err)
	// Output:
	// gre 20 <nil>
	// decap: truncated
}
