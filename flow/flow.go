// Package flow defines the identity of a flow (its 5-tuple) and the keyed
// flow hash that every Fulcrum instance in a fleet computes identically.
//
// The hash is part of the fleet's contract: two instances configured with the
// same 128-bit cluster key must map every packet of a flow to the same Maglev
// slot, whatever their architecture or build, or a flow that ECMP moves from
// one instance to another changes backend. The exact byte layout that is
// hashed is therefore specified here and in docs/flow-hash.md, with test
// vectors, and must never change without a new key version.
package flow

import "net/netip"

// Tuple is a flow's 5-tuple: addresses, ports and IP protocol. It is a small
// comparable value (usable as a map key, never allocating). IPv4 addresses
// are stored in their IPv4-mapped IPv6 form (::ffff:a.b.c.d) so both families
// share one layout; V6 tells the families apart.
//
// For protocols without ports, and for IPv4 fragments (see the dataplane's
// fragment policy), SrcPort and DstPort are zero: the flow is the 3-tuple.
type Tuple struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16
	Proto            uint8
	V6               bool
}

// v4Prefix is the IPv4-mapped IPv6 prefix ::ffff:0:0/96.
var v4Prefix = [12]byte{10: 0xff, 11: 0xff}

// TupleFrom builds a Tuple from netip addresses. Both addresses must be of
// the same family (an IPv4-mapped IPv6 address counts as IPv4); ok is false
// otherwise or when either address is invalid.
func TupleFrom(src, dst netip.Addr, srcPort, dstPort uint16, proto uint8) (t Tuple, ok bool) {
	if !src.IsValid() || !dst.IsValid() {
		return Tuple{}, false
	}
	src, dst = src.Unmap(), dst.Unmap()
	if src.Is4() != dst.Is4() {
		return Tuple{}, false
	}
	t = Tuple{Src: src.As16(), Dst: dst.As16(), SrcPort: srcPort, DstPort: dstPort, Proto: proto, V6: src.Is6()}
	return t, true
}

// SetV4 sets the addresses from raw 4-byte IPv4 addresses (network order).
func (t *Tuple) SetV4(src, dst [4]byte) {
	copy(t.Src[:12], v4Prefix[:])
	copy(t.Src[12:], src[:])
	copy(t.Dst[:12], v4Prefix[:])
	copy(t.Dst[12:], dst[:])
	t.V6 = false
}

// SrcAddr is the source address (IPv4 unmapped).
func (t *Tuple) SrcAddr() netip.Addr { return t.addr(&t.Src) }

// DstAddr is the destination address (IPv4 unmapped).
func (t *Tuple) DstAddr() netip.Addr { return t.addr(&t.Dst) }

func (t *Tuple) addr(a *[16]byte) netip.Addr {
	ad := netip.AddrFrom16(*a)
	if !t.V6 {
		return ad.Unmap()
	}
	return ad
}

// Reverse is the tuple of the opposite direction (source and destination
// swapped), used to find the flow an ICMP error quotes.
func (t Tuple) Reverse() Tuple {
	t.Src, t.Dst = t.Dst, t.Src
	t.SrcPort, t.DstPort = t.DstPort, t.SrcPort
	return t
}

// String formats the tuple as "proto src:port -> dst:port".
func (t Tuple) String() string {
	s := netip.AddrPortFrom(t.SrcAddr(), t.SrcPort).String()
	d := netip.AddrPortFrom(t.DstAddr(), t.DstPort).String()
	return protoName(t.Proto) + " " + s + " -> " + d
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	case 58:
		return "icmpv6"
	}
	return "proto-" + itoa(int(p))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [4]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
