package maglev

import (
	"errors"
	"testing"
)

// Found by a mutation audit (no other test pinned it down): a duplicate of the smallest key (the
// first two in canonical order) is refused like any other duplicate.
func TestEdgeDuplicateSmallestKey(t *testing.T) {
	_, err := Build([]Backend{{Key: "b", Weight: 1}, {Key: "a", Weight: 1}, {Key: "a", Weight: 2}}, 251)
	if !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("Build with key %q twice (the smallest): %v, want ErrDuplicateKey", "a", err)
	}
}
