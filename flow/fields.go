package flow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Mode names which fields of a packet's tuple a VIP's flow hash covers, as
// the configuration spells it (vip.hash). The zero value is FiveTuple, the
// default. Katran, IPVS (the sh scheduler) and GLB offer the same choice:
// hashing fewer fields keeps more of a client's connections together on one
// backend (session affinity without shared state), at the price of a
// coarser spread.
type Mode uint8

const (
	// FiveTuple hashes addresses, ports and protocol: each connection is
	// placed on its own.
	FiveTuple Mode = iota
	// ThreeTuple hashes the addresses and the protocol, not the ports: all
	// of a client's connections to the VIP go to one backend.
	ThreeTuple
	// SrcIP hashes the source address only: a client's connections to
	// every VIP of this mode with the same backends go to the same backend
	// name (tables depend only on the backends' names and weights and on
	// the table size).
	SrcIP
	// SrcIPPrefix hashes the source address's first Prefix4 (IPv4) or
	// Prefix6 (IPv6) bits only: the clients of one carrier-grade NAT pool
	// or one IPv6 site go to one backend.
	SrcIPPrefix

	numModes
)

var modeNames = [numModes]string{
	FiveTuple:   "5-tuple",
	ThreeTuple:  "3-tuple",
	SrcIP:       "src-ip",
	SrcIPPrefix: "src-ip-prefix",
}

// Defaults and bounds of the source prefixes of SrcIPPrefix. A /24 covers
// the typical carrier-grade NAT pool (RFC 6598 shared space is handed out in
// such blocks, and a subscriber's connections may leave from any address of
// its pool); a /48 is the largest site prefix RIPE-690 recommends for an
// IPv6 customer, so one site (whose hosts rotate privacy addresses within
// their /64s, RFC 8981) stays on one backend. A prefix of 0 would send
// every client to one backend: refused.
const (
	DefaultPrefix4 = 24
	DefaultPrefix6 = 48
	MaxPrefix4     = 32
	MaxPrefix6     = 128
)

// Errors of Fields.Validate, for callers that name the offending setting.
var (
	ErrMode    = errors.New("unknown hash mode")
	ErrPrefix4 = errors.New("IPv4 hash prefix")
	ErrPrefix6 = errors.New("IPv6 hash prefix")
)

// String is the mode's configuration name.
func (m Mode) String() string {
	if m < numModes {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode reads a configuration name; an unknown one is an error that
// lists the known names and wraps ErrMode.
func ParseMode(s string) (Mode, error) {
	for m, n := range modeNames {
		if s == n {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want %s)", ErrMode, s, strings.Join(modeNames[:numModes-1], ", ")+" or "+modeNames[numModes-1])
}

// UnmarshalText reads a configuration name, as ParseMode does, so that
// package config decodes vip.hash straight into a Mode.
func (m *Mode) UnmarshalText(b []byte) (err error) {
	*m, err = ParseMode(string(b))
	return err
}

// MarshalText writes the configuration name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// Fields is a VIP's hash setting: its Mode and, for SrcIPPrefix, the
// source prefix lengths. It is a small comparable value; the zero value is
// the 5-tuple, and every mode but SrcIPPrefix has zero prefixes (so two
// equal settings compare equal).
type Fields struct {
	Mode    Mode
	Prefix4 uint8 // SrcIPPrefix: bits of an IPv4 source kept (1..32)
	Prefix6 uint8 // SrcIPPrefix: bits of an IPv6 source kept (1..128)
}

// NewFields is the setting of a mode and the prefixes a configuration
// gives, nil where it gives none: under SrcIPPrefix an absent prefix takes
// its default (DefaultPrefix4, DefaultPrefix6); under any other mode a
// prefix is an error, as is one out of range (see Validate).
func NewFields(m Mode, prefix4, prefix6 *int) (Fields, error) {
	f := Fields{Mode: m}
	var errs []error
	if m == SrcIPPrefix {
		f.Prefix4, f.Prefix6 = DefaultPrefix4, DefaultPrefix6
	}
	for _, p := range []struct {
		v   *int
		max int
		err error
		dst *uint8
	}{{prefix4, MaxPrefix4, ErrPrefix4, &f.Prefix4}, {prefix6, MaxPrefix6, ErrPrefix6, &f.Prefix6}} {
		switch {
		case p.v == nil:
		case m != SrcIPPrefix:
			errs = append(errs, fmt.Errorf("%w %d: only hash %q uses a prefix, not %q", p.err, *p.v, SrcIPPrefix.String(), m.String()))
		case *p.v < 1 || *p.v > p.max:
			errs = append(errs, fmt.Errorf("%w: %d is not a prefix length in 1..%d", p.err, *p.v, p.max))
		default:
			*p.dst = uint8(*p.v)
		}
	}
	if len(errs) > 0 {
		return Fields{}, errors.Join(errs...) // both prefixes' problems, each wrapping its own error
	}
	return f, f.Validate()
}

// Validate reports a mode this package does not know (ErrMode), a prefix
// out of range under SrcIPPrefix (ErrPrefix4, ErrPrefix6), or a prefix set
// under another mode (which would be ignored: an operator's mistake).
func (f Fields) Validate() error {
	switch {
	case f.Mode >= numModes:
		return fmt.Errorf("%w %v", ErrMode, f.Mode)
	case f.Mode != SrcIPPrefix && f.Prefix4 != 0:
		return fmt.Errorf("%w %d: only hash %q uses a prefix, not %q", ErrPrefix4, f.Prefix4, SrcIPPrefix.String(), f.Mode.String())
	case f.Mode != SrcIPPrefix && f.Prefix6 != 0:
		return fmt.Errorf("%w %d: only hash %q uses a prefix, not %q", ErrPrefix6, f.Prefix6, SrcIPPrefix.String(), f.Mode.String())
	case f.Mode == SrcIPPrefix && (f.Prefix4 < 1 || f.Prefix4 > MaxPrefix4):
		return fmt.Errorf("%w: %d is not a prefix length in 1..%d", ErrPrefix4, f.Prefix4, MaxPrefix4)
	case f.Mode == SrcIPPrefix && (f.Prefix6 < 1 || f.Prefix6 > MaxPrefix6):
		return fmt.Errorf("%w: %d is not a prefix length in 1..%d", ErrPrefix6, f.Prefix6, MaxPrefix6)
	}
	return nil
}

// String is the mode's name, with the prefixes for SrcIPPrefix:
// "src-ip-prefix /24 /48".
func (f Fields) String() string {
	if f.Mode == SrcIPPrefix {
		return fmt.Sprintf("%v /%d /%d", f.Mode, f.Prefix4, f.Prefix6)
	}
	return f.Mode.String()
}

// Masked is t with the fields f ignores set to zero, as the hash sees it:
// ThreeTuple zeroes the ports; SrcIP also the destination address and the
// protocol; SrcIPPrefix also the source bits past the family's prefix.
// IPv4 addresses keep their mapped prefix (Message reads only the last 4
// bytes). The 5-tuple is t unchanged.
func (f Fields) Masked(t *Tuple) Tuple {
	m := *t
	if f.Mode == FiveTuple {
		return m
	}
	m.SrcPort, m.DstPort = 0, 0
	if f.Mode == ThreeTuple {
		return m
	}
	m.Proto = 0
	if m.V6 {
		m.Dst = [16]byte{}
	} else {
		m.Dst = [16]byte{10: 0xff, 11: 0xff}
	}
	if f.Mode == SrcIPPrefix {
		if m.V6 {
			hi, lo := binary.BigEndian.Uint64(m.Src[0:8]), binary.BigEndian.Uint64(m.Src[8:16])
			n := uint(f.Prefix6)
			if n <= 64 {
				hi &= ^uint64(0) << (64 - n) // a shift of 64 or more is 0 in Go
				lo = 0
			} else {
				lo &= ^uint64(0) << (128 - n)
			}
			binary.BigEndian.PutUint64(m.Src[0:8], hi)
			binary.BigEndian.PutUint64(m.Src[8:16], lo)
		} else {
			a := binary.BigEndian.Uint32(m.Src[12:16])
			a &= ^uint32(0) << (32 - uint(f.Prefix4))
			binary.BigEndian.PutUint32(m.Src[12:16], a)
		}
	}
	return m
}

// pad is the message's last two bytes (the family's padding under the
// 5-tuple): the mode, and the prefix length applied under SrcIPPrefix.
func (f Fields) pad(v6 bool) (mode, plen byte) {
	if f.Mode == SrcIPPrefix {
		if v6 {
			return byte(f.Mode), f.Prefix6
		}
		return byte(f.Mode), f.Prefix4
	}
	return byte(f.Mode), 0
}

// MessageFields appends the exact bytes the flow hash covers under f to
// dst: Message of f.Masked(t), with the mode in the first padding byte and
// the applied prefix length (SrcIPPrefix; 0 otherwise) in the second:
//
//	IPv4: src(4) dst(4) sport(2) dport(2) proto(1) 0x04 mode(1) plen(1)
//	IPv6: src(16) dst(16) sport(2) dport(2) proto(1) 0x06 mode(1) plen(1)
//
// Under the 5-tuple (mode 0) it is Message, byte for byte. It is the
// specification (docs/flow-hash.md); HashFields computes SipHash-1-3 over
// these bytes without building them.
func (t *Tuple) MessageFields(dst []byte, f Fields) []byte {
	m := f.Masked(t)
	dst = m.Message(dst)
	mode, plen := f.pad(t.V6)
	dst[len(dst)-2], dst[len(dst)-1] = mode, plen
	return dst
}

// HashFields is the flow hash of t under a VIP's hash setting f: SipHash-1-3
// over MessageFields (computed without building it, and without Masked).
// Under the 5-tuple it is Hash. It allocates nothing.
func (h Hasher) HashFields(t *Tuple, f Fields) uint64 { return h.sum(t, f) }
