package header

// TCP field offsets (RFC 9293 §3.1).
const (
	TCPSrcPortOffset  = 0
	TCPDstPortOffset  = 2
	TCPSeqNumOffset   = 4
	TCPAckNumOffset   = 8
	TCPDataOffOffset  = 12 // data offset in the high nibble
	TCPFlagsOffset    = 13
	TCPWindowOffset   = 14
	TCPChecksumOffset = 16
	TCPUrgentOffset   = 18

	// TCPMinimumSize is a header without options.
	TCPMinimumSize = 20
)

// TCP flag bits as they sit in the flags byte.
const (
	TCPFlagFin = 0x01
	TCPFlagSyn = 0x02
	TCPFlagRst = 0x04
	TCPFlagPsh = 0x08
	TCPFlagAck = 0x10
	TCPFlagUrg = 0x20
)

// TCP is a view of a TCP header. Accessors need TCPMinimumSize bytes.
type TCP []byte

// SourcePort is the source port.
func (b TCP) SourcePort() uint16 { return be.Uint16(b[TCPSrcPortOffset:]) }

// DestinationPort is the destination port.
func (b TCP) DestinationPort() uint16 { return be.Uint16(b[TCPDstPortOffset:]) }

// SequenceNumber is the sequence number.
func (b TCP) SequenceNumber() uint32 { return be.Uint32(b[TCPSeqNumOffset:]) }

// AckNumber is the acknowledgment number.
func (b TCP) AckNumber() uint32 { return be.Uint32(b[TCPAckNumOffset:]) }

// DataOffset is the header's length in bytes, options included.
func (b TCP) DataOffset() int { return int(b[TCPDataOffOffset]>>4) * 4 }

// Flags is the flags byte (TCPFlagFin, ...; ECE and CWR are 0x40, 0x80).
func (b TCP) Flags() uint8 { return b[TCPFlagsOffset] }

// WindowSize is the window field, unscaled.
func (b TCP) WindowSize() uint16 { return be.Uint16(b[TCPWindowOffset:]) }

// Checksum is the checksum field.
func (b TCP) Checksum() uint16 { return be.Uint16(b[TCPChecksumOffset:]) }

// SetSourcePort sets the source port.
func (b TCP) SetSourcePort(p uint16) { be.PutUint16(b[TCPSrcPortOffset:], p) }

// SetDestinationPort sets the destination port.
func (b TCP) SetDestinationPort(p uint16) { be.PutUint16(b[TCPDstPortOffset:], p) }

// SetSequenceNumber sets the sequence number.
func (b TCP) SetSequenceNumber(n uint32) { be.PutUint32(b[TCPSeqNumOffset:], n) }

// SetAckNumber sets the acknowledgment number.
func (b TCP) SetAckNumber(n uint32) { be.PutUint32(b[TCPAckNumOffset:], n) }

// SetDataOffset sets the header length in bytes (a multiple of 4); the
// low nibble of the byte is reserved and written zero.
func (b TCP) SetDataOffset(n int) { b[TCPDataOffOffset] = uint8(n/4) << 4 }

// SetFlags sets the flags byte.
func (b TCP) SetFlags(f uint8) { b[TCPFlagsOffset] = f }

// SetWindowSize sets the window field.
func (b TCP) SetWindowSize(w uint16) { be.PutUint16(b[TCPWindowOffset:], w) }

// SetChecksum sets the checksum field.
func (b TCP) SetChecksum(c uint16) { be.PutUint16(b[TCPChecksumOffset:], c) }

// UDP field offsets (RFC 768).
const (
	UDPSrcPortOffset  = 0
	UDPDstPortOffset  = 2
	UDPLengthOffset   = 4
	UDPChecksumOffset = 6

	// UDPMinimumSize is the UDP header.
	UDPMinimumSize = 8
)

// UDP is a view of a UDP header. Accessors need UDPMinimumSize bytes.
type UDP []byte

// SourcePort is the source port.
func (b UDP) SourcePort() uint16 { return be.Uint16(b[UDPSrcPortOffset:]) }

// DestinationPort is the destination port.
func (b UDP) DestinationPort() uint16 { return be.Uint16(b[UDPDstPortOffset:]) }

// Length is the datagram's length, header included.
func (b UDP) Length() uint16 { return be.Uint16(b[UDPLengthOffset:]) }

// Checksum is the checksum field; zero means none was computed (IPv4
// only, or IPv6 under RFC 6935).
func (b UDP) Checksum() uint16 { return be.Uint16(b[UDPChecksumOffset:]) }

// SetSourcePort sets the source port.
func (b UDP) SetSourcePort(p uint16) { be.PutUint16(b[UDPSrcPortOffset:], p) }

// SetDestinationPort sets the destination port.
func (b UDP) SetDestinationPort(p uint16) { be.PutUint16(b[UDPDstPortOffset:], p) }

// SetLength sets the length field.
func (b UDP) SetLength(n uint16) { be.PutUint16(b[UDPLengthOffset:], n) }

// SetChecksum sets the checksum field.
func (b UDP) SetChecksum(c uint16) { be.PutUint16(b[UDPChecksumOffset:], c) }

// Ports are the source and destination ports of a TCP or UDP header, which
// sit alike in both: what a 5-tuple needs. b needs 4 bytes.
func Ports(b []byte) (src, dst uint16) {
	_ = b[3]
	return be.Uint16(b[0:]), be.Uint16(b[2:])
}

// GRE field offsets and bits (RFC 2784 §2).
const (
	GREFlagsOffset    = 0 // C, reserved0, version
	GREProtocolOffset = 2
	GREChecksumOffset = 4 // present when GREFlagChecksum is set

	// GREMinimumSize is the base header, without the optional checksum.
	GREMinimumSize = 4
	// GREChecksumSize is the header with the checksum and Reserved1 words.
	GREChecksumSize = 8

	// GREFlagChecksum is C: the checksum words are present.
	GREFlagChecksum = 0x8000
	// GREFlagsMustBeZero are bits 1-5 (RFC 1701's R, K, S, s, Recur),
	// which a receiver not implementing RFC 1701 must see clear.
	GREFlagsMustBeZero = 0x7c00
	// GREVersionMask is the version, bits 13-15; RFC 2784 is version 0.
	GREVersionMask = 0x0007
)

// GRE is a view of a GRE header. Accessors need GREMinimumSize bytes.
type GRE []byte

// Flags is the first word: C, the reserved bits and the version.
func (b GRE) Flags() uint16 { return be.Uint16(b[GREFlagsOffset:]) }

// ProtocolType is the payload's EtherType.
func (b GRE) ProtocolType() uint16 { return be.Uint16(b[GREProtocolOffset:]) }

// SetFlags sets the first word.
func (b GRE) SetFlags(f uint16) { be.PutUint16(b[GREFlagsOffset:], f) }

// SetProtocolType sets the payload's EtherType.
func (b GRE) SetProtocolType(t uint16) { be.PutUint16(b[GREProtocolOffset:], t) }

// ICMP and ICMPv6 field offsets: the two share the first 4 bytes (RFC 792,
// RFC 4443 §2.1).
const (
	ICMPTypeOffset     = 0
	ICMPCodeOffset     = 1
	ICMPChecksumOffset = 2

	// ICMPv4MinimumSize and ICMPv6MinimumSize are the header up to the
	// body or the quoted packet.
	ICMPv4MinimumSize = 8
	ICMPv6MinimumSize = 8

	// ICMPv4MTUOffset is the next-hop MTU of a "fragmentation needed"
	// (RFC 1191 §4), a 16-bit word.
	ICMPv4MTUOffset = 6
	// ICMPv6MTUOffset is the MTU of a "packet too big" (RFC 4443 §3.2),
	// a 32-bit word.
	ICMPv6MTUOffset = 4
)

// ICMP types Fulcrum sends or answers.
const (
	ICMPv4EchoReply      = 0
	ICMPv4DstUnreachable = 3
	ICMPv4EchoRequest    = 8
	ICMPv4FragNeededCode = 4 // code of "fragmentation needed and DF set"
	ICMPv6PacketTooBig   = 2
	ICMPv6EchoRequest    = 128
	ICMPv6EchoReply      = 129
	// Neighbour discovery (RFC 4861): router and neighbour solicitations
	// and advertisements, and redirects, 133 to 137.
	ICMPv6RouterSolicit = 133
	ICMPv6Redirect      = 137
	// Multicast listener discovery (RFC 2710, RFC 3810): query, report,
	// done; the MLDv2 report.
	ICMPv6MLDQuery    = 130
	ICMPv6MLDDone     = 132
	ICMPv6MLDv2Report = 143
)

// ICMPv4 is a view of an ICMP header.
type ICMPv4 []byte

// Type is the message type.
func (b ICMPv4) Type() uint8 { return b[ICMPTypeOffset] }

// Code is the message code.
func (b ICMPv4) Code() uint8 { return b[ICMPCodeOffset] }

// Checksum is the checksum field.
func (b ICMPv4) Checksum() uint16 { return be.Uint16(b[ICMPChecksumOffset:]) }

// MTU is the next-hop MTU of a "fragmentation needed".
func (b ICMPv4) MTU() uint16 { return be.Uint16(b[ICMPv4MTUOffset:]) }

// SetType sets the message type.
func (b ICMPv4) SetType(t uint8) { b[ICMPTypeOffset] = t }

// SetCode sets the message code.
func (b ICMPv4) SetCode(c uint8) { b[ICMPCodeOffset] = c }

// SetChecksum sets the checksum field.
func (b ICMPv4) SetChecksum(c uint16) { be.PutUint16(b[ICMPChecksumOffset:], c) }

// SetMTU sets the next-hop MTU of a "fragmentation needed".
func (b ICMPv4) SetMTU(m uint16) { be.PutUint16(b[ICMPv4MTUOffset:], m) }

// ICMPv6 is a view of an ICMPv6 header.
type ICMPv6 []byte

// Type is the message type.
func (b ICMPv6) Type() uint8 { return b[ICMPTypeOffset] }

// Code is the message code.
func (b ICMPv6) Code() uint8 { return b[ICMPCodeOffset] }

// Checksum is the checksum field.
func (b ICMPv6) Checksum() uint16 { return be.Uint16(b[ICMPChecksumOffset:]) }

// MTU is the MTU of a "packet too big".
func (b ICMPv6) MTU() uint32 { return be.Uint32(b[ICMPv6MTUOffset:]) }

// SetType sets the message type.
func (b ICMPv6) SetType(t uint8) { b[ICMPTypeOffset] = t }

// SetCode sets the message code.
func (b ICMPv6) SetCode(c uint8) { b[ICMPCodeOffset] = c }

// SetChecksum sets the checksum field.
func (b ICMPv6) SetChecksum(c uint16) { be.PutUint16(b[ICMPChecksumOffset:], c) }

// SetMTU sets the MTU of a "packet too big".
func (b ICMPv6) SetMTU(m uint32) { be.PutUint32(b[ICMPv6MTUOffset:], m) }

// SetICMPType sets the type byte of the ICMP or ICMPv6 message b and
// updates its checksum incrementally: HC' = ~(~HC + ~m + m') (RFC 1624,
// eqn. 3), as an echo reply built from the request needs.
func SetICMPType(b []byte, typ uint8) {
	_ = b[3]
	old := uint64(be.Uint16(b[0:2]))
	b[ICMPTypeOffset] = typ
	now := uint64(be.Uint16(b[0:2]))
	hc := uint64(^be.Uint16(b[ICMPChecksumOffset:]))
	be.PutUint16(b[ICMPChecksumOffset:], ^foldSum(hc+(^old&0xffff)+now))
}

// SetRestOfHeader sets the 4 bytes after the checksum: zero and the
// next-hop MTU in a "fragmentation needed" (RFC 1191 §4), identifier and
// sequence number in an echo.
func (b ICMPv4) SetRestOfHeader(v uint32) { be.PutUint32(b[ICMPv4RestOffset:], v) }

// ICMPv4RestOffset is the "rest of header" word after the checksum.
const ICMPv4RestOffset = 4

// GUE variant 0 header (draft-ietf-intarea-gue §3.1): |00|C|Hlen(5)|
// Proto/ctype(8)|Flags(16)|, Hlen in 32-bit words of optional fields.
const (
	// GUEMinimumSize is the variant 0 base header, without optional
	// fields.
	GUEMinimumSize = 4
	// GUEControlBit is C: a control message, not a data packet.
	GUEControlBit = 0x20
)

// GUE is a view of a GUE header. Accessors need 1 byte (Variant) or
// GUEMinimumSize bytes (the rest).
type GUE []byte

// Variant is the 2-bit variant: 0 for a GUE header, 1 for a bare IPv4 or
// IPv6 header (draft-ietf-intarea-gue §5).
func (b GUE) Variant() uint8 { return b[0] >> 6 }

// Control reports whether C is set.
func (b GUE) Control() bool { return b[0]&GUEControlBit != 0 }

// HeaderLength is the header's length in bytes, optional fields included.
func (b GUE) HeaderLength() int { return GUEMinimumSize + int(b[0]&0x1f)*4 }

// Protocol is the payload's IP protocol number (a data message).
func (b GUE) Protocol() uint8 { return b[1] }

// Flags is the flags word.
func (b GUE) Flags() uint16 { return be.Uint16(b[2:]) }

// Encode writes a variant 0 data header with no optional fields and no
// flags, carrying protocol proto.
func (b GUE) Encode(proto uint8) { be.PutUint32(b[0:], uint32(proto)<<16) }
