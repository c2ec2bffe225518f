package sched

import (
	"fmt"
	"strings"
)

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

// params are Options after New has checked them and filled in defaults.
type params struct {
	draws   int
	replace bool
	penalty int64 // µs
}

// kindInfo is everything the package knows about one scheduler.
type kindInfo struct {
	name string                // the configuration name
	new  func(p params) Picker // nil: not a picker (Maglev)
}

// kinds is the registry of schedulers: String, ParseKind, Kinds, New and
// the error listing the valid names all read it, and config and
// fulcrum-sim ask Kinds. Adding a scheduler is a constant above, a row here
// and the picker's own file (see docs/architecture.md).
var kinds = [numKinds]kindInfo{
	Maglev:    {name: "maglev"},
	P2C:       {name: "p2c", new: func(p params) Picker { return &bestOf{draws: p.draws, replace: p.replace} }},
	LeastConn: {name: "least-conn", new: func(params) Picker { return &bestOf{all: true} }},
	PeakEWMA: {name: "peak-ewma", new: func(p params) Picker {
		return &bestOf{draws: p.draws, replace: p.replace, peak: true, penalty: p.penalty}
	}},
	RoundRobin: {name: "round-robin", new: func(params) Picker { return &roundRobin{} }},
	Random:     {name: "random", new: func(params) Picker { return randomPicker{} }},
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
		return kinds[k].name
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// IsPicker reports whether New makes a Picker for k: every known kind but
// Maglev, whose choice is the VIP's Maglev table.
func (k Kind) IsPicker() bool { return k < numKinds && kinds[k].new != nil }

// ParseKind reads a configuration name. An unknown name is an error that
// lists the known ones and wraps ErrUnknownKind.
func ParseKind(s string) (Kind, error) {
	for k := range kinds {
		if s == kinds[k].name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want %s)", ErrUnknownKind, s, kindList())
}

// kindList is the names for an error message: "a, b or c".
func kindList() string {
	names := make([]string, numKinds)
	for k := range kinds {
		names[k] = kinds[k].name
	}
	return strings.Join(names[:numKinds-1], ", ") + " or " + names[numKinds-1]
}

// UnmarshalText reads a configuration name, as ParseKind does, so that
// package config decodes vip.scheduler straight into a Kind.
func (k *Kind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseKind(string(b))
	return err
}

// MarshalText writes the configuration name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }
