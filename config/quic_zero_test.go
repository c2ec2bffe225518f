package config

import (
	"strings"
	"testing"
)

// docs/quic.md: `fulcrum check` refuses "a CID length outside 1..20" and
// "a server id length outside 1..8". Written as 0 (servers with
// zero-length connection IDs, which no LB can route by, or a template's
// placeholder), both keys are taken as unset and the defaults (8, 2)
// silently replace them.
func TestQUICExplicitZeroLayoutRefused(t *testing.T) {
	repl := func(old, new string) string { return strings.Replace(quicBase, old, new, 1) }
	for _, tc := range []struct {
		name, toml, key string
		line            int
		msg             string
	}{
		{"cid length 0", repl("quic = true", "quic = true\nquic_cid_len = 0"), "vip[0].quic_cid_len", 13, "outside 1..20"},
		{"server id length 0", repl("quic = true", "quic = true\nquic_server_id_len = 0"), "vip[0].quic_server_id_len", 13, "outside 1..8"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantProblemAt(t, tc.toml, tc.key, tc.line, tc.msg) })
	}
}
