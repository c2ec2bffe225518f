package sched

import "fmt"

// Kind names a VIP's scheduler as the configuration spells it. The zero
// value is Maglev, the default.
type Kind uint8

// The schedulers. Only Maglev gives the same answer on every instance of
// the fleet (see the package documentation).
const (
	Maglev     Kind = iota // "maglev": the VIP's Maglev table (package maglev)
	P2C                    // "p2c": best of Draws distinct weighted draws by (active+1)/weight
	LeastConn              // "least-conn": lowest (active+1)/weight over all backends
	PeakEWMA               // "peak-ewma": best of Draws distinct draws by latency × (active+1)/weight
	RoundRobin             // "round-robin": smooth weighted round robin (nginx)
	Random                 // "random": one weighted random draw
	numKinds
)

var kindNames = [numKinds]string{
	Maglev:     "maglev",
	P2C:        "p2c",
	LeastConn:  "least-conn",
	PeakEWMA:   "peak-ewma",
	RoundRobin: "round-robin",
	Random:     "random",
}

// Kinds lists every scheduler, Maglev first.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// String returns the configuration name ("maglev", "p2c", ...).
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind reads a configuration name. An unknown name is an error that
// lists the known ones and wraps ErrUnknownKind.
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want maglev, p2c, least-conn, peak-ewma, round-robin or random)", ErrUnknownKind, s)
}

// MarshalText lets configuration encoders write a Kind by name.
func (k Kind) MarshalText() ([]byte, error) {
	if k >= numKinds {
		return nil, fmt.Errorf("%w: Kind(%d)", ErrUnknownKind, uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText lets configuration decoders (TOML) read a Kind by name.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}
