package flow

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// Edge cases that no other test of the package pinned down: a mutation
// audit changed each line they guard (a comparison, a condition, a
// constant) and every other test still passed.

func TestEdgeValidatePrefix6OutsidePrefixMode(t *testing.T) {
	if err := (Fields{Mode: FiveTuple, Prefix6: 48}).Validate(); !errors.Is(err, ErrPrefix6) {
		t.Fatalf("Fields{5-tuple, Prefix6 48}.Validate() = %v, want ErrPrefix6", err)
	}
}

func TestEdgeTupleFromFamilies(t *testing.T) {
	if _, ok := TupleFrom(netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"), 1, 2, 6); ok {
		t.Error("TupleFrom(v4, v6) ok")
	}
	// A v4-mapped pair is the IPv4 flow the dataplane parses.
	m, ok := TupleFrom(netip.MustParseAddr("::ffff:192.0.2.1"), netip.MustParseAddr("::ffff:203.0.113.7"), 1, 2, 6)
	p, _ := TupleFrom(netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("203.0.113.7"), 1, 2, 6)
	if !ok || m != p {
		t.Errorf("TupleFrom(v4-mapped) = %+v, %v; want %+v", m, ok, p)
	}
}

func TestEdgeMaskedV4Dst(t *testing.T) {
	tu, _ := TupleFrom(netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("203.0.113.7"), 1, 2, 6)
	m := Fields{Mode: SrcIP}.Masked(&tu)
	if got := m.DstAddr(); got != netip.IPv4Unspecified() {
		t.Errorf("src-ip Masked IPv4 destination = %v, want 0.0.0.0", got)
	}
}

func TestEdgeParseKeyTooLong(t *testing.T) {
	for _, s := range []string{strings.Repeat("ab", 17), strings.Repeat("0", 64)} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("ParseKey(%d digits) panicked: %v", len(s), r)
				}
			}()
			if _, err := ParseKey(s); err == nil {
				t.Errorf("ParseKey(%d digits) accepted", len(s))
			}
		}()
	}
}
