package config

import (
	"errors"
	"strings"
	"testing"
)

// The hash key written as a TOML number (an operator who writes hex as
// 0x..., or groups it with underscores) is refused by the TOML decoder,
// whose own message quotes the literal: "dataplane.hash_key:
// 0x5be1... is out of range for int64". README: "Errors about
// dataplane.hash_key never quote it."
func TestHashKeyDecoderErrorDoesNotQuoteTheKey(t *testing.T) {
	const secret = "5be1c3e6a07f42d9b81c0e2f6a4d3917"
	for _, lit := range []string{
		"0x" + secret,
		"0x5be1c3e6_a07f42d9_b81c0e2f_6a4d3917",
		"0x5be1c3e6a07f42d9_b81c0e2f6a4d3917_",
		"{ key = 0x" + secret + " }",
	} {
		t.Run(lit, func(t *testing.T) {
			own := strings.Replace(base, `"000102030405060708090a0b0c0d0e0f"`, lit, 1)
			if own == base {
				t.Fatal("base has no hash_key to replace")
			}
			_, err := Parse([]byte(own), "f.toml")
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 || !strings.HasPrefix(es[0].Key, "dataplane.hash_key") {
				t.Fatalf("got %v, want one problem at dataplane.hash_key", err)
			}
			if s := err.Error(); strings.Contains(s, secret[4:28]) || strings.Contains(s, "a07f42d9") {
				t.Errorf("the problem quotes the key: %s", s)
			}
		})
	}
}
