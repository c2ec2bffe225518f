package header

// IPv6 extension headers (RFC 8200 §4). Every walk over them in Fulcrum is
// WalkIPv6Ext; the callers differ only in which headers they step over
// (IPv6ExtSet) and how many they allow.

// IPv6FragmentSize is the fragment header's fixed length (RFC 8200 §4.5).
const IPv6FragmentSize = 8

// IPv6ExtSet is a set of IPv6 extension header numbers. Every extension
// header number is below 64, so a set is one word and a membership test one
// shift.
type IPv6ExtSet uint64

// Extension header sets.
const (
	// IPv6ExtAll is every extension header the parser steps over:
	// hop-by-hop, routing, fragment, destination options and AH.
	IPv6ExtAll IPv6ExtSet = 1<<ProtoHopByHop | 1<<ProtoRouting | 1<<ProtoFragment |
		1<<ProtoDestOpts | 1<<ProtoAH
	// IPv6ExtOptions is the headers a receiver can skip without acting
	// on them: hop-by-hop, routing and destination options. A walk over
	// it stops at a fragment header or AH, which the caller then handles.
	IPv6ExtOptions IPv6ExtSet = 1<<ProtoHopByHop | 1<<ProtoRouting | 1<<ProtoDestOpts
	// IPv6ExtFragment is the fragment header alone, to take out of a set
	// (IPv6ExtAll &^ IPv6ExtFragment) for a walk that stops at one.
	IPv6ExtFragment IPv6ExtSet = 1 << ProtoFragment
)

// Has reports whether nh is in s.
func (s IPv6ExtSet) Has(nh uint8) bool { return nh < 64 && s>>nh&1 != 0 }

// IPv6ExtStatus says how a walk ended.
type IPv6ExtStatus uint8

const (
	// IPv6ExtOK: the walk reached a header not in the set.
	IPv6ExtOK IPv6ExtStatus = iota
	// IPv6ExtTooMany: the limit was reached with another header of the
	// set still to step over.
	IPv6ExtTooMany
	// IPv6ExtTruncated: a header of the set runs past the end of the
	// slice.
	IPv6ExtTruncated
)

// IPv6Ext is the result of WalkIPv6Ext.
type IPv6Ext struct {
	// Proto is the next header that ended the walk: the upper-layer
	// protocol, or an extension header outside the set. After a
	// non-first fragment it is the fragment header's next header.
	Proto uint8
	// Status is IPv6ExtOK unless the chain was too long or truncated; then
	// the other fields describe where the walk stopped.
	Status IPv6ExtStatus
	// Fragment is set if a fragment header was stepped over (only when
	// the set holds ProtoFragment); the Frag* fields are from the last.
	Fragment bool
	// MoreFragments is the fragment header's M flag.
	MoreFragments bool
	// FragOffset is the fragment's offset in bytes.
	FragOffset uint16
	// FragID is the fragment header's identification.
	FragID uint32
	// FragEnd is where the last fragment header stepped over ends in the
	// walked slice: the fragment's data (its fragmentable part) follows.
	FragEnd int
	// Fragments is the number of fragment headers stepped over: more
	// than one only when a first (or atomic) fragment's chain holds
	// another, which no sender writes (RFC 8200 §4.1).
	Fragments int
	// RoutingLeft is set if a routing header with segments left was
	// stepped over (only when the set holds ProtoRouting): the
	// destination address is then not the packet's final one (§4.4).
	RoutingLeft bool
	// Off is where Proto's header starts in the walked slice.
	Off int
	// N is the number of extension headers stepped over.
	N int
}

// WalkIPv6Ext steps over the extension headers of the set s that start at
// b[off:], where nh is the next header value that announced the first, and
// returns what comes after them. It steps over at most limit headers and
// never reads past len(b), so b should end where the IPv6 packet ends.
//
// A fragment header (when in s) is recorded in the result; the walk goes on
// after the first fragment (offset 0), whose transport header follows, and
// stops after any other, whose rest is payload (RFC 8200 §4.5). AH's length
// is in 4-octet units minus 2 (RFC 4302 §2.2); every other header's in
// 8-octet units not counting the first 8 (RFC 8200 §4.3-4.6).
//
// It is not inlined: a hot caller that mostly sees no extension header
// tests s.Has(nh) first and skips the call.
func WalkIPv6Ext(b []byte, off int, nh uint8, s IPv6ExtSet, limit int) IPv6Ext {
	var w IPv6Ext
	for ; s.Has(nh); w.N++ {
		if w.N == limit {
			w.Status = IPv6ExtTooMany
			break
		}
		if off < 0 || len(b)-off < 8 {
			w.Status = IPv6ExtTruncated
			break
		}
		h := b[off : off+8]
		var hlen int
		switch nh {
		case ProtoFragment:
			hlen = IPv6FragmentSize
			f := IPv6Fragment(h)
			w.Fragment = true
			w.Fragments++
			w.FragOffset = f.FragmentOffset()
			w.MoreFragments = f.More()
			w.FragID = f.ID()
			w.FragEnd = off + IPv6FragmentSize
		case ProtoAH:
			hlen = (int(h[1]) + 2) * 4
		case ProtoRouting:
			hlen = (int(h[1]) + 1) * 8
			w.RoutingLeft = w.RoutingLeft || h[3] != 0
		default:
			hlen = (int(h[1]) + 1) * 8
		}
		if len(b)-off < hlen {
			w.Status = IPv6ExtTruncated
			break
		}
		nh = h[0]
		off += hlen
		if w.Fragment && w.FragOffset != 0 {
			w.N++
			break
		}
	}
	w.Proto, w.Off = nh, off
	return w
}

// IPv6Fragment is a view of an IPv6 fragment header (RFC 8200 §4.5): next
// header, reserved, offset and M flag, identification.
type IPv6Fragment []byte

// NextHeader is the header after this one in the first fragment.
func (b IPv6Fragment) NextHeader() uint8 { return b[0] }

// FragmentOffset is the fragment's offset in bytes.
func (b IPv6Fragment) FragmentOffset() uint16 { return be.Uint16(b[2:]) &^ 7 }

// More reports whether the M (more fragments) flag is set.
func (b IPv6Fragment) More() bool { return b[3]&1 != 0 }

// ID is the identification.
func (b IPv6Fragment) ID() uint32 { return be.Uint32(b[4:]) }
