package maglev

import "fmt"

// Delta counts what a table change does to the slots and hence, with
// uniformly spread flow hashes, to new flows.
type Delta struct {
	// Size is the number of slots compared.
	Size int
	// Changed is the number of slots whose backend key differs between the
	// two tables: the flows in them move (unless conntrack pins them).
	Changed int
	// Needless is the number of changed slots whose old backend still owns
	// slots in the new table: those flows moved although their backend is
	// alive. Maglev trades a few of these for even load (paper, section 3.4).
	Needless int
}

// Diff compares two tables of the same size slot by slot, by backend key,
// so it is meaningful across backend lists that differ. It returns an error
// wrapping ErrSizeMismatch if the sizes differ.
func Diff(a, b *Table) (Delta, error) {
	if a.size != b.size {
		return Delta{}, fmt.Errorf("maglev: diff: sizes %d and %d: %w", a.size, b.size, ErrSizeMismatch)
	}
	inB := make(map[string]int, len(b.backends))
	for j, be := range b.backends {
		inB[be.Key] = j
	}
	// Translate a's backend indices into b's once, so the slot loop compares
	// integers. -1: the key is not in b at all.
	toB := make([]int, len(a.backends))
	alive := make([]bool, len(a.backends))
	for i, ae := range a.backends {
		j, ok := inB[ae.Key]
		if !ok {
			toB[i] = -1
			continue
		}
		toB[i] = j
		alive[i] = b.counts[j] > 0
	}
	d := Delta{Size: int(a.size)}
	for s := range d.Size {
		ai := a.Slot(s)
		if toB[ai] == b.Slot(s) {
			continue
		}
		d.Changed++
		if alive[ai] {
			d.Needless++
		}
	}
	return d, nil
}
