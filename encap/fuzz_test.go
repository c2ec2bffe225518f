package encap

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/packet"
)

// FuzzEncap feeds Encap random frames, random headroom, random (even
// inconsistent) Parsed values, kinds, backends and configs. It must never
// panic; a drop must leave the buffer alone; a forwarded frame must decode
// with gopacket, carry a valid outer IPv4 checksum and the inner packet
// unchanged; an ICMP reply must carry valid checksums and quote the packet.
//
// sel picks: bits 0-1 the kind (3 is invalid), 2-3 the backend, 4-5 the
// config, 6 whether Parsed comes from packet.Parse or from the raw fields.
func FuzzEncap(f *testing.F) {
	for i, s := range append(append([]spec(nil), forwardSpecs...),
		spec{l4: "tcp", payload: 1480, df: true},
		spec{v6: true, l4: "udp", payload: 1480},
		spec{l4: "icmperr", payload: 1480, df: true},
	) {
		frame := build(f, s)
		var p packet.Parsed
		packet.Parse(frame, &p)
		for sel := 0; sel < 64; sel += 5 {
			f.Add(frame, uint8(headroom), uint8(sel), uint64(i)*0x9e3779b97f4a7c15, p.L3Off, p.IPLen, uint8(p.L3)|boolBit(p.IPv4DF, 2))
		}
		f.Add(frame, uint8(headroom), uint8(64|i), uint64(i), p.L3Off, p.IPLen, uint8(p.L3)|boolBit(p.IPv4DF, 2))
	}
	f.Add([]byte{}, uint8(0), uint8(64), uint64(0), uint16(0), uint16(0), uint8(1))

	encs := [4]*Encapsulator{
		newEnc(f, nil),
		newEnc(f, func(c *Config) { c.MTU = 576; c.DF = DFClear }),
		newEnc(f, func(c *Config) { c.GUEZeroChecksumV6 = true; c.DF = DFSet }),
		newEnc(f, func(c *Config) { c.SrcV6 = netip.Addr{}; c.MTU = 9000 }),
	}
	b4 := mustBackend(f, encs[0], backend4)
	b6 := mustBackend(f, encs[0], backend6)
	backends := [4]*Backend{&b4, &b6, {}, nil}

	f.Fuzz(func(t *testing.T, frame []byte, room, sel uint8, hash uint64, l3off, iplen uint16, flags uint8) {
		e := encs[sel>>4&3]
		be := backends[sel>>2&3]
		kind := Kind(sel & 3)
		var p packet.Parsed
		if sel&64 != 0 {
			if packet.Parse(frame, &p) != packet.OK {
				return
			}
		} else {
			p = packet.Parsed{
				L3: packet.L3(flags & 3), L3Off: l3off, IPLen: iplen, L4Off: l3off + 20,
				IPv4DF: flags&4 != 0, Fragment: flags&8 != 0, FragOffset: uint16(flags&16) << 6,
				Proto: [4]uint8{1, 6, 17, 58}[flags>>5&3], ICMPType: uint8(hash >> 56), TOS: uint8(hash >> 48),
			}
		}
		buf := make([]byte, int(room)+len(frame)+int(sel&7))
		off := int(room)
		copy(buf[off:], frame)
		before := append([]byte(nil), buf...)

		start, length, res := e.Encap(buf, off, len(frame), &p, hash, kind, be, nextHop, portMAC)
		if res >= NumResults {
			t.Fatalf("result %d out of range", res)
		}
		if res.Drop() {
			if start != 0 || length != 0 || !bytes.Equal(buf, before) {
				t.Fatalf("%v: start %d length %d, buffer changed %v", res, start, length, !bytes.Equal(buf, before))
			}
			return
		}
		if start < 0 || length <= 0 || start+length > len(buf) {
			t.Fatalf("%v: output [%d:+%d] outside buffer of %d", res, start, length, len(buf))
		}
		out := buf[start : start+length]
		inner := frame[p.L3Off : int(p.L3Off)+int(p.IPLen)]
		ls := decode(out).Layers()
		if len(ls) < 2 || ls[0].LayerType() != layers.LayerTypeEthernet {
			t.Fatalf("%v: output does not decode: %v", res, ls)
		}
		if res == ICMPReply {
			q := out[42:]
			if p.L3 == packet.L3IPv6 {
				q = out[62:]
			}
			if len(q) == 0 || !bytes.HasPrefix(inner, q) {
				t.Fatalf("quote is not a prefix of the packet")
			}
			if p.L3 == packet.L3IPv4 {
				if refSum(out[14:34]) != 0xffff || refSum(out[34:]) != 0xffff {
					t.Fatalf("ICMP checksums do not verify")
				}
			} else if refSum(pseudo6(out[22:38], out[38:54], len(out)-54, 58), out[54:]) != 0xffff {
				t.Fatalf("ICMPv6 checksum does not verify")
			}
			return
		}
		if !bytes.Equal(out[len(out)-len(inner):], inner) {
			t.Fatalf("inner packet changed")
		}
		switch ip := ls[1].(type) {
		case *layers.IPv4:
			if be.IsV6() || int(ip.Length) != length-14 || refSum(out[14:34]) != 0xffff {
				t.Fatalf("outer IPv4 wrong: %+v", ip)
			}
		case *layers.IPv6:
			if !be.IsV6() || int(ip.Length) != length-54 {
				t.Fatalf("outer IPv6 wrong: %+v", ip)
			}
		default:
			t.Fatalf("layer 1 is %v", ls[1].LayerType())
		}
		if hl := length - len(inner); hl != 14+Overhead(kind, be.IsV6()) {
			t.Fatalf("header length %d for %v", hl, kind)
		}
		if want, ok := tunnelLayer[kind]; ok && (len(ls) < 3 || ls[2].LayerType() != want) {
			t.Fatalf("%v: tunnel header does not decode: %v", kind, ls)
		}
	})
}

func boolBit(b bool, bit uint8) uint8 {
	if b {
		return bit
	}
	return 0
}
