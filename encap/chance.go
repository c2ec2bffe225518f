package encap

import "encoding/binary"

// The second chance (docs/second-chance.md): the tunnel header of a packet
// may name a second backend, the one the VIP's previous Maglev table chose
// for the flow. A backend agent that finds no local socket for the packet
// forwards it there, once. The wire format is fixed here and read back by
// package decap.
const (
	// GREFlagKey is RFC 2890's K bit: a 4-byte key follows the base
	// header (Fulcrum never sets C, so the key is at offset 4).
	GREFlagKey = 0x2000

	// greKeyLen is the GRE key field: the second chance's IPv4 address.
	greKeyLen = 4

	// GUEChanceType is the first 16 bits of Fulcrum's GUE private data
	// block ("SC"): draft-ietf-intarea-gue §3.3 leaves the block's format
	// to the two ends, so it starts with a type a decapsulator can check.
	GUEChanceType = 0x5343

	// gueChanceLen4 and gueChanceLen6 are the private data block: type
	// (2 bytes), address family (1: 4 or 6), reserved (1, zero), then
	// the address (4 or 16 bytes). GUE's Hlen counts it in 4-byte words.
	gueChanceLen4 = 4 + 4
	gueChanceLen6 = 4 + 16
)

// CanCarry reports whether a tunnel of kind can name ch as a second
// chance: GRE an IPv4 backend (the key has 32 bits), GUE an IPv4 or IPv6
// backend, IPIP none (it has no header of its own).
func CanCarry(kind Kind, ch *Backend) bool { return chanceLen(kind, ch) != 0 }

// ChanceLen is the bytes the second chance ch adds to a tunnel of kind: 4
// for GRE, 8 or 20 for GUE, 0 when kind cannot carry it or ch is nil.
func ChanceLen(kind Kind, ch *Backend) int { return chanceLen(kind, ch) }

func chanceLen(kind Kind, ch *Backend) int {
	if ch == nil {
		return 0
	}
	switch kind {
	case GRE:
		if ch.fam == 4 {
			return greKeyLen
		}
	case GUE:
		switch ch.fam {
		case 4:
			return gueChanceLen4
		case 6:
			return gueChanceLen6
		}
	}
	return 0
}

// writeGREKey sets K in the GRE base header g and writes ch's IPv4
// address as the key.
func writeGREKey(g []byte, ch *Backend) {
	g = g[:greLen+greKeyLen]
	binary.BigEndian.PutUint16(g[0:], GREFlagKey)
	copy(g[greLen:], ch.addr[:4])
}

// writeGUEChance writes the private data block naming ch after the GUE
// base header g (already encoded, Hlen 0), sets Hlen to cover it, and
// returns the 16-bit words of the whole GUE header summed (for the UDP
// checksum over IPv6).
func writeGUEChance(g []byte, ch *Backend, cl int) uint64 {
	g = g[:gueLen+cl]
	g[0] = byte(cl / 4) // variant 0, C 0, Hlen in words
	b := g[gueLen:]
	binary.BigEndian.PutUint16(b[0:], GUEChanceType)
	b[2], b[3] = ch.fam, 0
	copy(b[4:], ch.addr[:cl-4])
	return uint64(g[0])<<8 | uint64(g[1]) + GUEChanceType + uint64(ch.fam)<<8 + ch.sum
}
