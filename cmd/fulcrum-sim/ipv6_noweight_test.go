package main

import (
	"bytes"
	"strings"
	"testing"
)

// An IPv6 backend written as the configuration writes it, without a
// weight: the text after its last ':' is a hex group of the address, not
// a weight. fulcrum-sim must print the daemon's table or refuse the
// input, never a table of other keys ("2001:db8:" of weight 1 for
// 2001:db8::1, "2001:db8:" of weight 2 for 2001:db8::2).
func TestTableIPv6WithoutWeight(t *testing.T) {
	cases := []struct {
		name     string
		backends string
		config   []string
	}{
		{"two ipv6 addresses", "2001:db8::1,2001:db8:1::1",
			[]string{`address = "2001:db8::1"`, `address = "2001:db8:1::1"`}},
		{"one of them looks weighted", "2001:db8::1:1,2001:db8::2",
			[]string{`address = "2001:db8::1:1"`, `address = "2001:db8::2"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run([]string{"table", "--backends", c.backends, "--size", "251"}, strings.NewReader(""), &out, &errOut)
			if code == 2 {
				return // refused: the operator is told, not misled
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			want := daemonSlots(t, 251, c.config...)
			if out.String() != want {
				g, w := strings.Split(out.String(), "\n"), strings.Split(want, "\n")
				t.Errorf("fulcrum-sim table --backends %q: exit 0 with another table than the daemon builds (sim %q, daemon %q)",
					c.backends, g[0], w[0])
			}
		})
	}
}
