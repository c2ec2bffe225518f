package header

// Ethernet field offsets and sizes (IEEE 802.3, untagged).
const (
	EthernetDstOffset  = 0
	EthernetSrcOffset  = 6
	EthernetTypeOffset = 12

	// EthernetMinimumSize is an untagged Ethernet header.
	EthernetMinimumSize = 14
	// VLANTagSize is one 802.1Q/802.1ad tag: TPID then TCI.
	VLANTagSize = 4
)

// Ethernet is a view of an Ethernet header. The EtherType accessors read
// the type after the source address; with VLAN tags that is the first TPID.
type Ethernet []byte

// Destination is the destination MAC address.
func (b Ethernet) Destination() [6]byte { return [6]byte(b[EthernetDstOffset:]) }

// Source is the source MAC address.
func (b Ethernet) Source() [6]byte { return [6]byte(b[EthernetSrcOffset:]) }

// Type is the EtherType (or, on a tagged frame, the outer tag's TPID).
func (b Ethernet) Type() uint16 { return be.Uint16(b[EthernetTypeOffset:]) }

// SetDestination sets the destination MAC address.
func (b Ethernet) SetDestination(a [6]byte) { copy(b[EthernetDstOffset:EthernetDstOffset+6], a[:]) }

// SetSource sets the source MAC address.
func (b Ethernet) SetSource(a [6]byte) { copy(b[EthernetSrcOffset:EthernetSrcOffset+6], a[:]) }

// SetType sets the EtherType.
func (b Ethernet) SetType(t uint16) { be.PutUint16(b[EthernetTypeOffset:], t) }

// Encode writes an untagged header: dst, src, EtherType t.
func (b Ethernet) Encode(dst, src [6]byte, t uint16) {
	_ = b[EthernetMinimumSize-1]
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	be.PutUint16(b[12:], t)
}
