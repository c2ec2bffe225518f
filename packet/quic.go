package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// QUIC connection-ID routing (docs/quic.md).
//
// A QUIC client may change its address mid-connection (RFC 9000 section 9:
// a new network, a NAT rebinding); a 5-tuple hash then sends the rest of
// the connection to another backend, which has no state for it. What stays
// the same is the destination connection ID (DCID) the server chose, so a
// server that writes its own id into its connection IDs can be found from
// any address. The layout is the plaintext algorithm of the QUIC-LB draft
// (draft-ietf-quic-load-balancers, since draft 17: "First CID octet",
// "CID format", "Plaintext CID Algorithm"):
//
//	octet 0:                    config rotation (top 3 bits) | CID length - 1 (low 5 bits)
//	octets 1..ServerIDLen:      the server id, big-endian
//	the rest, up to CIDLen:     the nonce: the server's own octets (random, unique), at least 4
//
// Only short-header packets (RFC 9000 section 17.3: first bit 0, fixed bit
// 1) are routed by it: the DCID follows the first octet, without a length
// (the LB knows it, CIDLen). Long headers (Initial, 0-RTT, Handshake,
// Retry) carry a DCID the client chose before it knew the server, so they
// go by the flow hash like any UDP datagram.

// QUIC CID layout limits and defaults.
const (
	// MaxQUICCIDLen is RFC 9000's longest connection ID (section 17.2:
	// "In QUIC version 1, this value MUST NOT exceed 20 bytes").
	MaxQUICCIDLen = 20
	// DefaultQUICCIDLen is quic-go's and most servers' connection-ID
	// length (and Katran's minimum).
	DefaultQUICCIDLen = 8
	// DefaultQUICServerIDLen: 2 octets, 65536 server ids, leaves 5
	// octets of nonce in an 8-octet CID.
	DefaultQUICServerIDLen = 2
	// MaxQUICServerIDLen: a server id is read into a uint64.
	MaxQUICServerIDLen = 8
	// MinQUICNonceLen: the draft's "The nonce length MUST be at least 4
	// octets": the octets after the server id that keep a server's CIDs
	// unique.
	MinQUICNonceLen = 4
	// MaxQUICConfigID: the config rotation bits are 3; the draft reserves
	// 0b111 for CIDs that are not routable (servers without a
	// configuration, "Configuration Failover": the LB routes them by the
	// 5-tuple).
	MaxQUICConfigID = 6
)

// QUICConfig is the connection-ID layout of one VIP's QUIC servers, read
// from the VIP's keys quic_cid_len, quic_server_id_len and quic_config_id.
// The zero value means "the defaults" (see WithDefaults).
type QUICConfig struct {
	CIDLen      int `toml:"quic_cid_len,omitzero"`       // the servers' connection-ID length, 2..20 (default 8)
	ServerIDLen int `toml:"quic_server_id_len,omitzero"` // octets of server id after the first, 1..8 (default 2)
	ConfigID    int `toml:"quic_config_id,omitzero"`     // the config rotation bits the servers write, 0..6 (default 0)
}

// WithDefaults is c with its unset lengths set to the defaults.
func (c QUICConfig) WithDefaults() QUICConfig {
	if c.CIDLen == 0 {
		c.CIDLen = DefaultQUICCIDLen
	}
	if c.ServerIDLen == 0 {
		c.ServerIDLen = DefaultQUICServerIDLen
	}
	return c
}

// Errors of QUICConfig.Validate, for errors.Is; the message names the key.
var (
	ErrQUICCIDLen      = errors.New("quic_cid_len")
	ErrQUICServerIDLen = errors.New("quic_server_id_len")
	ErrQUICConfigID    = errors.New("quic_config_id")
)

// Validate reports the first problem of c (after WithDefaults), wrapping
// one of the Err* sentinels.
func (c QUICConfig) Validate() error {
	if c.CIDLen < 1 || c.CIDLen > MaxQUICCIDLen {
		return fmt.Errorf("%w: %d is outside 1..%d (RFC 9000 17.2)", ErrQUICCIDLen, c.CIDLen, MaxQUICCIDLen)
	}
	if c.ServerIDLen < 1 || c.ServerIDLen > MaxQUICServerIDLen {
		return fmt.Errorf("%w: %d is outside 1..%d", ErrQUICServerIDLen, c.ServerIDLen, MaxQUICServerIDLen)
	}
	if 1+c.ServerIDLen+MinQUICNonceLen > c.CIDLen {
		return fmt.Errorf("%w: %d octets hold no first octet, %d octets of server id (quic_server_id_len) and the QUIC-LB draft's nonce of at least %d octets: at least %d", ErrQUICCIDLen, c.CIDLen, c.ServerIDLen, MinQUICNonceLen, 1+c.ServerIDLen+MinQUICNonceLen)
	}
	if c.ConfigID < 0 || c.ConfigID > MaxQUICConfigID {
		return fmt.Errorf("%w: %d is outside 0..%d (0b111 is the draft's \"unroutable\": route by the 5-tuple)", ErrQUICConfigID, c.ConfigID, MaxQUICConfigID)
	}
	return nil
}

// MaxServerID is the largest server id ServerIDLen octets hold.
func (c QUICConfig) MaxServerID() uint64 {
	if c.ServerIDLen >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*c.ServerIDLen) - 1
}

// PutServerID writes the first octet and the server id into cid, a
// connection ID of CIDLen octets whose other octets the caller fills (with
// random bytes). It is what a backend's connection-ID generator does; c
// must be valid and id at most MaxServerID.
func (c QUICConfig) PutServerID(cid []byte, id uint64) {
	cid[0] = byte(c.ConfigID)<<5 | byte(c.CIDLen-1)&0x1f
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], id)
	copy(cid[1:1+c.ServerIDLen], b[8-c.ServerIDLen:])
}

// QUICHeader is what QUICServerID found in a UDP payload.
type QUICHeader uint8

const (
	QUICLong  QUICHeader = iota // a long header (or an empty payload): route by the flow hash
	QUICShort                   // a short header with a server id of this layout
	QUICNoID                    // a short header without one: too short for the CID, fixed bit clear, or another config rotation (0b111 included)
)

// QUICServerID reads the server id from the DCID of a UDP payload sent to
// a VIP whose servers use layout c (valid, with defaults). It reads at most
// 1+CIDLen octets and never fails: what is not a short header of this
// layout is QUICLong or QUICNoID.
func QUICServerID(payload []byte, c *QUICConfig) (QUICHeader, uint64) {
	if len(payload) == 0 || payload[0]&0x80 != 0 {
		return QUICLong, 0
	}
	// RFC 9000 17.3.1: the fixed bit is 1 in every version-1 packet; a
	// clear one is not QUIC (or RFC 9287's greased bit, which a server
	// only allows after the handshake; the hash still finds it a home).
	if payload[0]&0x40 == 0 || len(payload) < 1+c.CIDLen {
		return QUICNoID, 0
	}
	if int(payload[1]>>5) != c.ConfigID {
		return QUICNoID, 0
	}
	var id uint64
	for _, b := range payload[2 : 2+c.ServerIDLen] {
		id = id<<8 | uint64(b)
	}
	return QUICShort, id
}

// QUICClientInitial reports whether a UDP payload is a client's Initial
// of QUIC version 1 (RFC 9000 17.2.2: long header, fixed bit, type 0) or
// 2 (RFC 9369: type 1) in a datagram of at least 1200 octets, the least a
// client sends one in (RFC 9000 14.1): a new connection.
func QUICClientInitial(payload []byte) bool {
	if len(payload) < 1200 || payload[0]&0xc0 != 0xc0 {
		return false
	}
	typ := payload[0] >> 4 & 3
	switch binary.BigEndian.Uint32(payload[1:5]) {
	case 1:
		return typ == 0
	case 0x6b3343cf:
		return typ == 1
	}
	return false
}

// UDPPayload is the payload of the UDP datagram p describes in frame (the
// frame Parse decoded into p, with Proto UDP and not a fragment): up to the
// UDP length, which Parse checked against the IP packet. It is empty for
// anything else.
func UDPPayload(frame []byte, p *Parsed) []byte {
	l4 := int(p.L4Off)
	if p.Proto != ProtoUDP || p.Fragment || l4+8 > len(frame) {
		return nil
	}
	end := l4 + int(binary.BigEndian.Uint16(frame[l4+4:]))
	if end > len(frame) || end < int(p.PayloadOff) {
		return nil
	}
	return frame[p.PayloadOff:end]
}
