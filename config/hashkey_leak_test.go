package config

import (
	"errors"
	"strings"
	"testing"
)

// dataplane.hash_key is a secret (README: "known to nobody else"; the
// systemd unit keeps `fulcrum check`'s stdout, which holds it, out of the
// journal). A key mistyped by a character (one too many, one too few, an
// 'o' for a '0') is still nearly all of the fleet's key, and its problem
// is printed by `fulcrum check` on stderr (the journal, under
// ExecStartPre and ExecReload), logged by the daemon's "reload rejected"
// and returned by the admin API's reload: none may quote it.
func TestHashKeyProblemDoesNotQuoteTheKey(t *testing.T) {
	const secret = "5be1c3e6a07f42d9b81c0e2f6a4d3917"
	own := strings.Replace(base, "000102030405060708090a0b0c0d0e0f", secret, 1)
	for _, tc := range []struct{ name, key string }{
		{"one too many", secret + "a"},
		{"one too few", secret[:31]},
		{"not hex", "o" + secret[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(own, secret, tc.key, 1)), "f.toml")
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 || es[0].Key != "dataplane.hash_key" {
				t.Fatalf("got %v, want one problem at dataplane.hash_key", err)
			}
			if s := err.Error(); strings.Contains(s, secret[1:31]) {
				t.Errorf("the problem quotes the key: %s", s)
			}
		})
	}
}
