package health

import "testing"

// FuzzParseStatusCodes: ParseStatusCodes never panics; what it accepts is
// within 100..599 and formats (String) to a list it reads back the same.
func FuzzParseStatusCodes(f *testing.F) {
	for _, s := range []string{"200-399,404", "200", "200-299, 301", "", ",", "299-200", "200-600", "2xx", "-", "100-599", " 404 ", "200--300", "9999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := ParseStatusCodes(s)
		if err != nil {
			return
		}
		for _, r := range sc {
			if r.Lo < 100 || r.Hi > 599 || r.Lo > r.Hi {
				t.Fatalf("%q: accepted range %+v", s, r)
			}
		}
		back, err := ParseStatusCodes(sc.String())
		if err != nil || back.String() != sc.String() {
			t.Fatalf("%q -> %q -> %v, %v", s, sc.String(), back, err)
		}
		for code := 100; code < 600; code++ {
			if sc.Contains(code) != back.Contains(code) {
				t.Fatalf("%q: %d differs after the round trip", s, code)
			}
		}
	})
}
