package decap

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzStrip feeds arbitrary bytes to all three entry points: none may
// panic, every refusal is an Error with a nil inner packet, and every
// accepted inner packet is an IP packet of its stated length inside the
// input.
func FuzzStrip(f *testing.F) {
	for _, c := range append(okCases(f), badCases(f)...) {
		f.Add(c.pkt)
	}
	lenient, err := New(Config{GUEZeroChecksumV6: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range []*Decapsulator{std, lenient} {
			check := func(what string, in []byte, inner []byte, kind Kind, err error) {
				var e Error
				if err != nil {
					if !errors.As(err, &e) || e == 0 || e >= NumErrors {
						t.Fatalf("%s: error %v (%T) is not an Error", what, err, err)
					}
					if inner != nil {
						t.Fatalf("%s: inner %x with error %v", what, inner, err)
					}
					return
				}
				if int(kind) >= numKinds {
					t.Fatalf("%s: kind %d", what, kind)
				}
				if !within(inner, in) {
					t.Fatalf("%s: inner is not inside the input", what)
				}
				switch inner[0] >> 4 {
				case 4:
					if len(inner) < ipv4Len || int(inner[2])<<8|int(inner[3]) != len(inner) {
						t.Fatalf("%s: inner ipv4 of %d bytes: %x", what, len(inner), inner)
					}
				case 6:
					if len(inner) < ipv6Len || ipv6Len+(int(inner[4])<<8|int(inner[5])) != len(inner) {
						t.Fatalf("%s: inner ipv6 of %d bytes: %x", what, len(inner), inner)
					}
				default:
					t.Fatalf("%s: inner is not IP: %x", what, inner)
				}
			}
			inner, kind, err := d.Strip(b)
			check("Strip", b, inner, kind, err)
			// StripChance agrees with Strip, and a chance it returns is a
			// unicast address (never from a refused packet).
			inner2, kind2, ch, err2 := d.StripChance(b)
			if err2 != err || kind2 != kind || !bytes.Equal(inner2, inner) {
				t.Fatalf("StripChance %v %v %x, Strip %v %v %x", err2, kind2, inner2, err, kind, inner)
			}
			if ch.IsValid() && (err != nil || !chanceAddr(ch)) {
				t.Fatalf("chance %v with err %v", ch, err)
			}
			inner, kind, err = d.StripGUE(b)
			check("StripGUE", b, inner, kind, err)
			if len(b) > 0 {
				inner, kind, err = d.StripPayload(b[0], b[1:])
				check("StripPayload", b[1:], inner, kind, err)
			}
		}
	})
}
