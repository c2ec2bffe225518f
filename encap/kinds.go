package encap

// Kind is a tunnel encapsulation. The zero value is GRE, Fulcrum's default.
type Kind uint8

const (
	// GRE is RFC 2784 GRE with no key, checksum or sequence number; the
	// protocol type is the inner packet's EtherType.
	GRE Kind = iota
	// IPIP is plain IP-in-IP: IPv4-in-IPv4 and 4in6 (protocol 4, RFC 2003,
	// RFC 2473), IPv6-in-IPv6 and 6in4 (protocol 41, RFC 2473, RFC 4213).
	IPIP
	// GUE is Generic UDP Encapsulation variant 0 (draft-ietf-intarea-gue):
	// UDP, then a 4-byte GUE header whose proto/ctype is 4 or 41.
	GUE

	// NumKinds is the number of kinds, for tables indexed by Kind (decap's
	// accept table, counters).
	NumKinds
)

// numKinds is NumKinds under the name this package's tables use.
const numKinds = NumKinds

// kindInfo is what the package knows about one kind outside Encap's
// per-packet switch, which writes the tunnel header itself.
type kindInfo struct {
	name string // the config name
	// tunnelLen is the tunnel header after the outer IP header, in bytes:
	// with the outer IP header it makes Overhead.
	tunnelLen int
}

// kinds is the registry of encapsulations: String, ParseKind, Kinds,
// Overhead and the error listing the valid names read it; package config
// and package decap ask ParseKind, Kinds and NumKinds rather than naming
// any. Adding a kind is a constant above, a row here and its cases in
// Encap's two switches, outer protocol and header (see
// docs/architecture.md).
var kinds = [numKinds]kindInfo{
	GRE:  {name: "gre", tunnelLen: greLen},
	IPIP: {name: "ipip", tunnelLen: 0},
	GUE:  {name: "gue", tunnelLen: udpLen + gueLen},
}

// kindNames are the kinds' config names, in Kind order.
var kindNames = func() (names [numKinds]string) {
	for k := range kinds {
		names[k] = kinds[k].name
	}
	return names
}()

// Kinds lists every kind, GRE (the default) first.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// String is the kind's config name: "gre", "ipip", "gue", ...
func (k Kind) String() string { return enumName(kindNames[:], k, "kind") }

// ParseKind reads a kind's config name; an unknown name is an error that
// lists the known ones and wraps ErrConfig.
func ParseKind(s string) (Kind, error) { return parseName[Kind]("kind", s, kindNames[:]) }

// UnmarshalText reads a kind's config name, as ParseKind does, so that
// package config decodes dataplane.encap and vip.encap straight into a
// Kind.
func (k *Kind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseKind(string(b))
	return err
}

// MarshalText writes the kind's config name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }
