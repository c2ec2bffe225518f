package decap

import "fmt"

// Error is why a packet was refused; see the package doc. Each value is a
// sentinel for errors.Is and the index of its drop counter.
type Error uint8

// The refusals, in the order the headers are read. The zero Error is not an
// error and is never returned; it names the "ok" slot of a counter array.
const (
	_ Error = iota

	// ErrTruncated: a header, or the length an outer header states, runs
	// past the end of the buffer.
	ErrTruncated
	// ErrIPVersion: the outer header is neither IPv4 nor IPv6.
	ErrIPVersion
	// ErrIPHeader: an outer IPv4 IHL below 5 or a total length shorter
	// than the header, or a chain of more than MaxExtHeaders IPv6
	// extension headers.
	ErrIPHeader
	// ErrIPChecksum: the outer IPv4 header checksum is wrong.
	ErrIPChecksum
	// ErrFragment: the outer packet is an IPv4 fragment or carries an IPv6
	// fragment header. Fulcrum sends atomic datagrams; raw sockets get
	// reassembled packets, so only AF_PACKET readers see this.
	ErrFragment
	// ErrProtocol: the outer protocol is not GRE, IPIP (4 or 41) or UDP.
	ErrProtocol
	// ErrUDPPort: UDP to a port other than the GUE port.
	ErrUDPPort
	// ErrKindDisabled: a well-formed tunnel of a kind this Decapsulator
	// was configured to refuse.
	ErrKindDisabled
	// ErrGREVersion: a GRE version other than 0 (1 is PPTP's, RFC 2637).
	ErrGREVersion
	// ErrGREFlags: one of RFC 2784 §2.3's bits 1-5 is set: RFC 1701's
	// routing, key, sequence and strict-route bits and the top bit of its
	// recursion control (the key and sequence number are RFC 2890's too).
	ErrGREFlags
	// ErrGREChecksum: the GRE checksum is present and wrong.
	ErrGREChecksum
	// ErrGREProtocol: the GRE protocol type is not IPv4 or IPv6 (for
	// example 0x6558, transparent Ethernet bridging).
	ErrGREProtocol
	// ErrUDPLength: the UDP length is below 8 or beyond the packet.
	ErrUDPLength
	// ErrUDPChecksum: a non-zero UDP checksum is wrong.
	ErrUDPChecksum
	// ErrUDPZeroChecksum: a zero UDP checksum over IPv6 while
	// Config.GUEZeroChecksumV6 is off (RFC 8200 §8.1, RFC 6936 §5).
	ErrUDPZeroChecksum
	// ErrGUEVersion: GUE variant 2 or 3.
	ErrGUEVersion
	// ErrGUEControl: a GUE control message (C bit set); Fulcrum sends
	// none and this decapsulator answers none.
	ErrGUEControl
	// ErrGUEFlags: GUE flags are set; no optional field is implemented.
	ErrGUEFlags
	// ErrGUEProtocol: the GUE proto field (or a variant-1 IP version) is
	// not IPv4 (4) or IPv6 (41).
	ErrGUEProtocol
	// ErrInnerTruncated: the inner IP header, or the length it states,
	// runs past the tunnel payload.
	ErrInnerTruncated
	// ErrInnerVersion: the inner IP version is not the one the tunnel
	// header announced.
	ErrInnerVersion
	// ErrInnerHeader: an inner IPv4 IHL below 5 or a total length shorter
	// than its header.
	ErrInnerHeader
	// ErrSecondChance: a GRE key or a GUE private data block of Fulcrum's
	// type that does not name a unicast IPv4 or IPv6 address (see
	// docs/second-chance.md).
	ErrSecondChance
	// ErrInnerTunnel: the inner packet is itself a tunnel: IPv4 or IPv6
	// protocol 4 (IPIP), 41 (6in4) or 47 (GRE), or UDP to the GUE port
	// (after any IPv6 extension headers), or an inner IPv6 packet whose
	// extension header chain is too long (more than MaxInnerExtHeaders)
	// to tell. Fulcrum never nests tunnels; delivered, such a packet
	// would come back to the decapsulator to be stripped again, once per
	// layer.
	ErrInnerTunnel
	// ErrECN: the outer header is marked Congestion Experienced and the
	// inner packet is not ECN-capable (RFC 6040 §4.2: drop).
	ErrECN

	// NumErrors is the number of Error values including the zero one, for
	// counter arrays indexed by Error.
	NumErrors
)

var errorNames = [NumErrors]string{
	0:                  "ok",
	ErrTruncated:       "truncated",
	ErrIPVersion:       "ip-version",
	ErrIPHeader:        "ip-header",
	ErrIPChecksum:      "ip-checksum",
	ErrFragment:        "fragment",
	ErrProtocol:        "protocol",
	ErrUDPPort:         "udp-port",
	ErrKindDisabled:    "kind-disabled",
	ErrGREVersion:      "gre-version",
	ErrGREFlags:        "gre-flags",
	ErrGREChecksum:     "gre-checksum",
	ErrGREProtocol:     "gre-protocol",
	ErrUDPLength:       "udp-length",
	ErrUDPChecksum:     "udp-checksum",
	ErrUDPZeroChecksum: "udp-zero-checksum",
	ErrGUEVersion:      "gue-version",
	ErrGUEControl:      "gue-control",
	ErrGUEFlags:        "gue-flags",
	ErrGUEProtocol:     "gue-protocol",
	ErrInnerTruncated:  "inner-truncated",
	ErrInnerVersion:    "inner-version",
	ErrInnerHeader:     "inner-header",
	ErrSecondChance:    "second-chance",
	ErrInnerTunnel:     "inner-tunnel",
	ErrECN:             "ecn-ce-not-ect",
}

// String is the error's counter name, e.g. "gre-flags".
func (e Error) String() string {
	if e < NumErrors {
		return errorNames[e]
	}
	return fmt.Sprintf("decap-error(%d)", uint8(e))
}

// Error says what was refused, e.g. "decap: gre-flags".
func (e Error) Error() string { return "decap: " + e.String() }
