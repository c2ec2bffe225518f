package config

import (
	"strings"
	"testing"
)

// docs/quic.md: `fulcrum check` refuses "any of these keys [quic_cid_len,
// quic_server_id_len, quic_config_id, quic_id] on a VIP whose `quic` is
// off (the operator meant something by them)". Written with the value 0,
// the layout keys are taken as unset on a VIP without quic = true, and the
// configuration is accepted with QUIC routing silently off: the operator
// who wrote the layout (and forgot quic = true, or wrote quic = false) gets
// a plain UDP VIP.
func TestQUICLayoutKeyZeroWithoutQUICRefused(t *testing.T) {
	noQUIC := strings.NewReplacer("quic = true\n", "", "  quic_id = 1\n", "", "  quic_id = 2\n", "").Replace(quicBase)
	for _, tc := range []struct{ name, key, line string }{
		{"quic_config_id = 0", "vip[0].quic_config_id", "quic_config_id = 0"},
		{"quic_config_id = 0 with quic = false", "vip[0].quic_config_id", "quic = false\nquic_config_id = 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := strings.Replace(noQUIC, `protocol = "udp"`, "protocol = \"udp\"\n"+tc.line, 1)
			wantProblemAt(t, s, tc.key, 12+strings.Count(tc.line, "\n"), "quic is off")
		})
	}
}
