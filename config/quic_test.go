package config

import (
	"strings"
	"testing"
)

// quicBase is a UDP VIP with QUIC routing; line 8 is its [[vip]], 12 its
// quic, and the backends' quic_id lines are 17 and 22.
const quicBase = `
[dataplane]
port = "net_ring0"
lb_ipv4 = "192.0.2.10"
gateway_ipv4 = "192.0.2.1"
hash_key = "000102030405060708090a0b0c0d0e0f"

[[vip]]
address = "203.0.113.7"
port = 443
protocol = "udp"
quic = true

  [[vip.backend]]
  name = "a"
  address = "10.0.1.1"
  quic_id = 1

  [[vip.backend]]
  name = "b"
  address = "10.0.1.2"
  quic_id = 2
`

func TestQUICDefaultsAndRoundTrip(t *testing.T) {
	c, err := Parse([]byte(quicBase), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	v := c.VIPs[0]
	if !v.QUIC || v.CIDLen != 8 || v.ServerIDLen != 2 || v.ConfigID != 0 || *v.Backends[0].QUICID != 1 || *v.Backends[1].QUICID != 2 {
		t.Fatalf("effective: quic %v layout %+v ids %d %d", v.QUIC, v.QUICConfig, *v.Backends[0].QUICID, *v.Backends[1].QUICID)
	}
	// `fulcrum check` prints the effective configuration; it parses back
	// to the same settings.
	s, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"quic = true", "quic_cid_len = 8", "quic_server_id_len = 2", "quic_id = 2"} {
		if !strings.Contains(s, want) {
			t.Errorf("effective config lacks %q:\n%s", want, s)
		}
	}
	c2, err := Parse([]byte(s), "effective.toml")
	if err != nil {
		t.Fatalf("effective config: %v\n%s", err, s)
	}
	if c2.VIPs[0].QUICConfig != v.QUICConfig || !c2.VIPs[0].QUIC || *c2.VIPs[0].Backends[1].QUICID != 2 {
		t.Errorf("round trip: %+v", c2.VIPs[0])
	}
	// A VIP without QUIC prints none of the keys.
	c3, err := Parse([]byte(base), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := c3.Encode(); strings.Contains(s, "quic") {
		t.Errorf("a TCP VIP's effective config mentions quic:\n%s", s)
	}
}

func TestQUICRejectsAtKeyAndLine(t *testing.T) {
	repl := func(old, new string) string { return strings.Replace(quicBase, old, new, 1) }
	for _, tc := range []struct {
		name, toml, key string
		line            int
		msg             string
	}{
		{"quic on tcp", repl(`protocol = "udp"`, `protocol = "tcp"`), "vip[0].quic", 12, "QUIC runs over UDP"},
		{"cid too long", repl("quic = true", "quic = true\nquic_cid_len = 21"), "vip[0].quic_cid_len", 13, "outside 1..20"},
		{"cid too short for the nonce", repl("quic = true", "quic = true\nquic_cid_len = 6"), "vip[0].quic_cid_len", 13, "6 octets hold no first octet, 2 octets of server id (quic_server_id_len) and the QUIC-LB draft's nonce of at least 4 octets: at least 7"},
		{"server id does not fit cid", repl("quic = true", "quic = true\nquic_cid_len = 8\nquic_server_id_len = 4"), "vip[0].quic_cid_len", 13, "at least 9"},
		{"server id too long", repl("quic = true", "quic = true\nquic_cid_len = 20\nquic_server_id_len = 9"), "vip[0].quic_server_id_len", 14, "outside 1..8"},
		{"config id 7", repl("quic = true", "quic = true\nquic_config_id = 7"), "vip[0].quic_config_id", 13, "outside 0..6"},
		{"id too big for 2 octets", repl("quic_id = 2", "quic_id = 65536"), "vip[0].backend[1].quic_id", 22, "65536 does not fit quic_server_id_len = 2 octets (at most 65535)"},
		{"negative id", repl("quic_id = 2", "quic_id = -2"), "vip[0].backend[1].quic_id", 22, "negative"},
		{"duplicate id", repl("quic_id = 2", "quic_id = 1"), "vip[0].backend[1].quic_id", 22, "already backend #1's (line 17)"},
		{"layout without quic", repl("quic = true", "quic_cid_len = 10"), "vip[0].quic_cid_len", 12, "quic is off"},
		{"quic_id without quic", repl("quic = true", ""), "vip[0].backend[0].quic_id", 17, "quic is off"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantProblemAt(t, tc.toml, tc.key, tc.line, tc.msg) })
	}
	// One-octet ids: 256 is too big.
	s := strings.Replace(strings.Replace(quicBase, "quic = true", "quic = true\nquic_server_id_len = 1", 1), "quic_id = 2", "quic_id = 256", 1)
	if _, err := Parse([]byte(s), "f.toml"); err == nil || !strings.Contains(err.Error(), "256 does not fit quic_server_id_len = 1 octets (at most 255)") {
		t.Errorf("256 in one octet: %v", err)
	}
	// A backend without quic_id is fine: it is reached by the hash.
	if _, err := Parse([]byte(strings.Replace(quicBase, "  quic_id = 2\n", "", 1)), "f.toml"); err != nil {
		t.Errorf("backend without quic_id: %v", err)
	}
}
