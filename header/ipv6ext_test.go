package header_test

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/header"
)

// ext is one extension header of a test chain.
type ext struct {
	typ  uint8 // its own number: what the previous header's next header says
	size int   // bytes, a multiple of 8 (AH: of 4, at least 12)
	// fragment header fields
	fragOff uint16 // bytes, a multiple of 8
	more    bool
	id      uint32
	segLeft uint8 // a routing header's segments left
}

// chain builds an IPv6 packet with the extension headers es and then a
// 20-byte TCP header, with gopacket's fixed header so the addresses and
// lengths come from an independent encoder. It returns the packet and the
// TCP header's offset.
func chain(t testing.TB, es ...ext) ([]byte, int) {
	t.Helper()
	var body []byte
	for i, e := range es {
		next := uint8(header.ProtoTCP)
		if i+1 < len(es) {
			next = es[i+1].typ
		}
		h := make([]byte, e.size)
		h[0] = next
		switch e.typ {
		case header.ProtoFragment:
			binary.BigEndian.PutUint16(h[2:], e.fragOff)
			if e.more {
				h[3] |= 1
			}
			binary.BigEndian.PutUint32(h[4:], e.id)
		case header.ProtoAH:
			h[1] = uint8(e.size/4 - 2)
		default:
			h[1] = uint8(e.size/8 - 1)
			if e.typ != header.ProtoRouting {
				// PadN options filling the header (RFC 8200 §4.2).
				h[2], h[3] = 1, uint8(e.size-4)
			} else {
				h[3] = e.segLeft
			}
		}
		body = append(body, h...)
	}
	tcpOff := header.IPv6MinimumSize + len(body)
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 443)
	tcp[12] = 5 << 4
	tcp[13] = header.TCPFlagSyn
	nh := layers.IPProtocolTCP
	if len(es) > 0 {
		nh = layers.IPProtocol(es[0].typ)
	}
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: nh, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
	return build(t, ip, gopacket.Payload(append(body, tcp...))), tcpOff
}

var (
	hbh  = ext{typ: header.ProtoHopByHop, size: 8}
	hbh2 = ext{typ: header.ProtoHopByHop, size: 16}
	rt   = ext{typ: header.ProtoRouting, size: 24}
	dst  = ext{typ: header.ProtoDestOpts, size: 8}
	ah   = ext{typ: header.ProtoAH, size: 24}
	frag = ext{typ: header.ProtoFragment, size: 8, more: true, id: 0xdeadbeef}
	late = ext{typ: header.ProtoFragment, size: 8, fragOff: 1448, id: 7}
)

func TestWalkIPv6Ext(t *testing.T) {
	tests := []struct {
		name   string
		es     []ext
		set    header.IPv6ExtSet
		limit  int
		proto  uint8 // 0: TCP
		off    int   // -1: the TCP header's
		status header.IPv6ExtStatus
		frag   bool
		n      int
	}{
		{name: "none", off: -1},
		{name: "hop-by-hop", es: []ext{hbh}, off: -1, n: 1},
		{name: "hbh routing dest", es: []ext{hbh2, rt, dst}, off: -1, n: 3},
		{name: "first fragment", es: []ext{hbh, frag, dst}, off: -1, frag: true, n: 3},
		{name: "later fragment", es: []ext{hbh, late, dst}, proto: header.ProtoDestOpts, off: 56, frag: true, n: 2},
		{name: "ah", es: []ext{ah, dst}, off: -1, n: 2},
		{name: "all of rfc 8200's order", es: []ext{hbh, dst, rt, frag, ah, dst}, off: -1, frag: true, n: 6},
		{name: "limit reached", es: []ext{dst, dst, dst}, limit: 2, proto: header.ProtoDestOpts, off: 56, status: header.IPv6ExtTooMany, n: 2},
		{name: "limit exact", es: []ext{dst, dst}, limit: 2, off: -1, n: 2},
		{name: "options stop at fragment", es: []ext{hbh, frag}, set: header.IPv6ExtOptions, proto: header.ProtoFragment, off: 48, n: 1},
		{name: "options stop at ah", es: []ext{rt, ah}, set: header.IPv6ExtOptions, proto: header.ProtoAH, off: 64, n: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, tcpOff := chain(t, tt.es...)
			set, limit := tt.set, tt.limit
			if set == 0 {
				set = header.IPv6ExtAll
			}
			if limit == 0 {
				limit = 8
			}
			proto, off := tt.proto, tt.off
			if proto == 0 {
				proto = header.ProtoTCP
			}
			if off < 0 {
				off = tcpOff
			}
			w := header.WalkIPv6Ext(b, header.IPv6MinimumSize, header.IPv6(b).NextHeader(), set, limit)
			if w.Proto != proto || w.Off != off || w.Status != tt.status || w.Fragment != tt.frag || w.N != tt.n {
				t.Fatalf("walk = %+v, want proto %d off %d status %d fragment %v n %d", w, proto, off, tt.status, tt.frag, tt.n)
			}
			if tt.frag {
				var f ext
				for _, e := range tt.es {
					if e.typ == header.ProtoFragment {
						f = e
					}
				}
				if w.FragOffset != f.fragOff || w.MoreFragments != f.more || w.FragID != f.id {
					t.Fatalf("fragment %+v, want %+v", w, f)
				}
			}
			// gopacket, decoding the same chain, finds TCP where the walk
			// does (it stops at a non-first fragment, like the walk).
			if w.Status != header.IPv6ExtOK || proto != header.ProtoTCP || set != header.IPv6ExtAll {
				return
			}
			p := gopacket.NewPacket(b, layers.LayerTypeIPv6, gopacket.Default)
			l := p.Layer(layers.LayerTypeTCP)
			if l == nil {
				if !tt.frag { // gopacket does not go past a fragment header
					t.Fatalf("gopacket found no TCP: %v", p.ErrorLayer())
				}
				return
			}
			if got := len(b) - len(l.LayerContents()) - len(l.LayerPayload()); got != w.Off {
				t.Fatalf("walk put TCP at %d, gopacket at %d", w.Off, got)
			}
		})
	}
}

// TestWalkIPv6ExtRoutingAndFragments: the walk notes a routing header
// with segments left and counts the fragment headers, as far as it goes
// (nothing after a non-first fragment, which is payload).
func TestWalkIPv6ExtRoutingAndFragments(t *testing.T) {
	left := ext{typ: header.ProtoRouting, size: 24, segLeft: 1}
	atomic := ext{typ: header.ProtoFragment, size: 8, id: 9}
	for _, tt := range []struct {
		name        string
		es          []ext
		routingLeft bool
		fragments   int
	}{
		{name: "routing, no segment left", es: []ext{hbh, rt, dst}},
		{name: "routing, a segment left", es: []ext{hbh, left, dst}, routingLeft: true},
		{name: "after a first fragment", es: []ext{frag, left}, routingLeft: true, fragments: 1},
		{name: "after a later fragment: payload", es: []ext{late, left}, fragments: 1},
		{name: "two fragment headers", es: []ext{frag, atomic}, fragments: 2},
		{name: "a later fragment's payload", es: []ext{late, atomic}, fragments: 1},
	} {
		b, _ := chain(t, tt.es...)
		w := header.WalkIPv6Ext(b, header.IPv6MinimumSize, header.IPv6(b).NextHeader(), header.IPv6ExtAll, 8)
		if w.Status != header.IPv6ExtOK || w.RoutingLeft != tt.routingLeft || w.Fragments != tt.fragments {
			t.Errorf("%s: walk = %+v, want routing left %v, %d fragment headers", tt.name, w, tt.routingLeft, tt.fragments)
		}
	}
}

// TestWalkIPv6ExtTruncated cuts every chain at every length: the walk
// must report truncation or stop inside the slice, never panic.
func TestWalkIPv6ExtTruncated(t *testing.T) {
	chains := [][]ext{{hbh}, {hbh2, rt, dst}, {hbh, frag, dst}, {ah, dst}, {hbh, late, dst}}
	for _, es := range chains {
		b, tcpOff := chain(t, es...)
		for n := 0; n < tcpOff; n++ {
			w := header.WalkIPv6Ext(b[:n], header.IPv6MinimumSize, header.IPv6(b).NextHeader(), header.IPv6ExtAll, 8)
			if w.Status == header.IPv6ExtOK && w.Off > n {
				t.Fatalf("%v cut at %d: walk OK to %d, past the end", es, n, w.Off)
			}
			if w.Status == header.IPv6ExtOK && w.Off == tcpOff {
				t.Fatalf("%v cut at %d: walk reached TCP", es, n)
			}
		}
	}
}

func FuzzWalkIPv6Ext(f *testing.F) {
	for _, es := range [][]ext{{}, {hbh}, {hbh2, rt, dst}, {hbh, frag, dst}, {ah, dst}, {hbh, late, dst}} {
		b, _ := chain(f, es...)
		f.Add(b, 40, uint8(b[6]), uint64(header.IPv6ExtAll), 8)
		f.Add(b, 40, uint8(b[6]), uint64(header.IPv6ExtOptions), 4)
	}
	f.Fuzz(func(t *testing.T, b []byte, off int, nh uint8, set uint64, limit int) {
		w := header.WalkIPv6Ext(b, off, nh, header.IPv6ExtSet(set), limit)
		if w.N > 0 && w.Status == header.IPv6ExtOK && (w.Off < off || w.Off > len(b)) {
			t.Fatalf("walk of %d headers ended at %d, outside [%d, %d]", w.N, w.Off, off, len(b))
		}
		if header.IPv6ExtSet(set).Has(w.Proto) && w.Status == header.IPv6ExtOK && !(w.Fragment && w.FragOffset != 0) {
			t.Fatalf("walk OK but stopped at %d, which is in the set", w.Proto)
		}
	})
}
