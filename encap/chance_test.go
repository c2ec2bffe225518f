package encap

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TestEncapChance checks the second-chance field byte by byte: a GRE key
// (RFC 2890) holding the second backend's IPv4 address, a GUE private
// data block holding its IPv4 or IPv6 address, nothing for IPIP or for a
// GRE packet naming an IPv6 backend; the rest of the frame is what Encap
// writes without the field, the lengths grow by the field, and the GUE
// checksum over IPv6 still verifies.
func TestEncapChance(t *testing.T) {
	e := newEnc(t, nil)
	ch4 := mustBackend(t, e, netip.MustParseAddr("10.0.0.9"))
	ch6 := mustBackend(t, e, netip.MustParseAddr("2001:db8:b::9"))
	for _, s := range []spec{forwardSpecs[0], forwardSpecs[12]} { // v4-tcp, v6-tcp
		for _, kind := range []Kind{GRE, IPIP, GUE} {
			for _, be := range []Backend{mustBackend(t, e, backend4), mustBackend(t, e, backend6)} {
				for _, ch := range []*Backend{&ch4, &ch6} {
					name := fmt.Sprintf("%s/%s/to-%s/chance-%s", s.name, kind, be.Addr(), ch.Addr())
					t.Run(name, func(t *testing.T) {
						frame := build(t, s)
						buf, off, n, p := load(t, frame, headroom)
						plain := append([]byte(nil), buf...)
						ps, pl, res := e.Encap(plain, off, n, &p, 0x1234567, kind, &be, nextHop, portMAC)
						if res != Forward {
							t.Fatalf("Encap: %v", res)
						}
						start, length, res := e.EncapChance(buf, off, n, &p, 0x1234567, kind, &be, ch, nextHop, portMAC)
						if res != Forward {
							t.Fatalf("EncapChance: %v", res)
						}
						out, ref := buf[start:start+length], plain[ps:ps+pl]
						var field []byte // the bytes the field adds, independently built
						switch {
						case kind == GRE && !ch.IsV6():
							field = ch.Addr().AsSlice()
						case kind == GUE && !ch.IsV6():
							field = append([]byte{0x53, 0x43, 4, 0}, ch.Addr().AsSlice()...)
						case kind == GUE:
							field = append([]byte{0x53, 0x43, 6, 0}, ch.Addr().AsSlice()...)
						}
						if got := CanCarry(kind, ch); got != (field != nil) {
							t.Errorf("CanCarry = %v, want %v", got, field != nil)
						}
						if length != pl+len(field) {
							t.Fatalf("length %d, want %d + %d", length, pl, len(field))
						}
						ip := 14 + map[bool]int{false: 20, true: 40}[be.IsV6()]
						tunEnd := ip + map[Kind]int{GRE: 4, IPIP: 0, GUE: 12}[kind]
						equalBytes(t, "inner packet", out[tunEnd+len(field):], ref[tunEnd:])
						equalBytes(t, "ethernet", out[:14], ref[:14])
						if field == nil {
							equalBytes(t, "frame without a field", out, ref)
							return
						}
						pkt := decode(out)
						switch kind {
						case GRE:
							g, ok := pkt.Layer(layers.LayerTypeGRE).(*layers.GRE)
							if !ok {
								t.Fatalf("no GRE layer: %v", pkt)
							}
							if !g.KeyPresent || g.ChecksumPresent || g.SeqPresent || g.RoutingPresent || g.Key != uint32(field[0])<<24|uint32(field[1])<<16|uint32(field[2])<<8|uint32(field[3]) {
								t.Errorf("GRE %+v: want K only, key %x", g, field)
							}
							equalBytes(t, "GRE header", out[ip:ip+8], append([]byte{0x20, 0, out[ip+2], out[ip+3]}, field...))
						case GUE:
							u, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
							if !ok {
								t.Fatalf("no UDP layer")
							}
							if int(u.Length) != length-ip {
								t.Errorf("UDP length %d, want %d", u.Length, length-ip)
							}
							innerProto := map[bool]byte{false: 4, true: 41}[s.v6]
							want := append([]byte{byte(len(field) / 4), innerProto, 0, 0}, field...)
							equalBytes(t, "GUE header", out[ip+8:ip+12+len(field)], want)
							if be.IsV6() {
								seg := out[ip:]
								if refSum(pseudo6(lbSrc6.AsSlice(), backend6.AsSlice(), len(seg), 17), seg) != 0xffff {
									t.Errorf("UDP checksum %#04x does not verify", u.Checksum)
								}
							}
						}
						// The outer length fields grew by the field.
						if !be.IsV6() {
							var o layers.IPv4
							if err := o.DecodeFromBytes(out[14:], gopacket.NilDecodeFeedback); err != nil || int(o.Length) != length-14 || refSum(out[14:34]) != 0xffff {
								t.Errorf("outer IPv4 length %d (want %d), checksum ok %v, err %v", o.Length, length-14, refSum(out[14:34]) == 0xffff, err)
							}
						} else if got := int(out[18])<<8 | int(out[19]); got != length-54 {
							t.Errorf("outer IPv6 payload length %d, want %d", got, length-54)
						}
					})
				}
			}
		}
	}
}

// TestEncapChanceMTU: the field counts toward the MTU, in Fits and Encap
// alike: a packet that just fits without it is too big with it.
func TestEncapChanceMTU(t *testing.T) {
	e := newEnc(t, func(c *Config) { c.MTU = 600 })
	be := mustBackend(t, e, backend4)
	ch := mustBackend(t, e, netip.MustParseAddr("10.0.0.9"))
	s := spec{name: "v4-tcp", l4: "tcp", df: true, payload: 600 - 24 - 40} // exactly the MTU in GRE
	frame := build(t, s)
	buf, off, n, p := load(t, frame, headroom)
	if !e.Fits(GRE, &be, int(p.IPLen)) || e.FitsChance(GRE, &be, &ch, int(p.IPLen)) || !e.FitsChance(GRE, &be, nil, int(p.IPLen)) {
		t.Fatalf("Fits %v FitsChance %v: want true, false", e.Fits(GRE, &be, int(p.IPLen)), e.FitsChance(GRE, &be, &ch, int(p.IPLen)))
	}
	if _, _, res := e.EncapChance(buf, off, n, &p, 1, GRE, &be, &ch, nextHop, portMAC); res != ICMPReply {
		t.Fatalf("EncapChance of a packet 4 bytes over: %v, want icmp-reply", res)
	}
}

// TestEncapChanceMTUNoDF: an IPv4 packet without DF that fits only without
// the field goes without it (no ICMP can make its sender send less, and a
// drop would lose every such packet of the flow); with one byte more it
// does not fit either way and is dropped as before.
func TestEncapChanceMTUNoDF(t *testing.T) {
	e := newEnc(t, func(c *Config) { c.MTU = 600 })
	be := mustBackend(t, e, backend4)
	ch := mustBackend(t, e, netip.MustParseAddr("10.0.0.9"))
	for _, kind := range []Kind{GRE, GUE} {
		ovh := Overhead(kind, false)
		s := spec{name: "v4-tcp", l4: "tcp", df: false, payload: 600 - ovh - 40} // exactly the MTU without the field
		frame := build(t, s)
		buf, off, n, p := load(t, frame, headroom)
		plain := append([]byte(nil), buf...)
		ps, pl, res := e.Encap(plain, off, n, &p, 1, kind, &be, nextHop, portMAC)
		if res != Forward {
			t.Fatalf("%v: Encap: %v", kind, res)
		}
		start, length, res := e.EncapChance(buf, off, n, &p, 1, kind, &be, &ch, nextHop, portMAC)
		if res != Forward {
			t.Fatalf("%v: EncapChance of a packet that fits without the field: %v, want forward", kind, res)
		}
		equalBytes(t, kind.String()+" frame without the field", buf[start:start+length], plain[ps:ps+pl])

		s.payload++
		frame = build(t, s)
		buf, off, n, p = load(t, frame, headroom)
		if _, _, res := e.EncapChance(buf, off, n, &p, 1, kind, &be, &ch, nextHop, portMAC); res != DropTooBigNoDF {
			t.Errorf("%v: EncapChance one byte over without the field: %v, want %v", kind, res, DropTooBigNoDF)
		}
	}
}
