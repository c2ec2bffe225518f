package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// effective is the configuration part of `fulcrum check`'s output: the
// lines between the "valid" header and "# Maglev tables:".
func effective(t *testing.T, out string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "defaults filled in:\n")
	body, _, ok2 := strings.Cut(rest, "# Maglev tables:\n")
	if !ok || !ok2 {
		t.Fatalf("check output has no effective configuration:\n%s", out)
	}
	return body
}

// tables is the Maglev part of `fulcrum check`'s output.
func tables(out string) string {
	_, t, _ := strings.Cut(out, "# Maglev tables:\n")
	return t
}

func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

const probeBase = `[dataplane]
port = "net_ring0"
lb_ipv4 = "192.0.2.10"
lb_ipv6 = "2001:db8:100::10"
gateway_ipv4 = "192.0.2.1"
gateway_ipv6 = "2001:db8:100::1"
hash_key = "000102030405060708090a0b0c0d0e0f"
`

// The effective configuration check prints is a configuration that means
// the same: checked again it prints the same configuration and the same
// tables. Every kind of key is in richConfig.
func TestCheckEffectiveRoundTrips(t *testing.T) {
	dir := t.TempDir()
	tok := writeFile(t, dir, "tok", "0123456789abcdef0123456789abcdef\n", 0o600)
	rich := probeBase + `idle_max_sleep = "150us"
df = "set"
encap = "gue"
second_chance = true
second_chance_window = "90s"
[dataplane.punt]
neighbour = 100
[eal]
worker_lcores = [1, 2]
pci = []
lcore_map = "0@0,1@0,2@0"
[control]
panic_threshold = 0
slow_start = "1m30s"
slow_start_min = 1e-7
[health]
kind = "tcp"
port = 8080
jitter = 0
passive = "off"
passive_threshold = 0.3333333333333333
[admin]
token_file = "` + tok + `"
[bgp]
asn = 65100
router_id = "192.0.2.10"
communities = ["65100:1", "no-export"]
med = 0
next_hop_v6 = "2001:db8:100::10"
[[bgp.neighbor]]
address = "192.0.2.1"
peer_asn = 65000
hold_time = "30s"
[[bgp.vip]]
prefix = "203.0.113.7"
communities = ["65100:7"]
[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
scheduler = "p2c"
draws = 3
table_size = 251
on_down = "move"
  [vip.health]
  port = 0
  host = ""
  jitter = 0.2
  through = "tunnel"
  kind = "http"
  [[vip.backend]]
  name = "be1"
  address = "10.0.1.1"
  weight = 0
  [[vip.backend]]
  address = "10.0.1.2"
  drain = true
  [[vip.backend]]
  address = "10.0.1.3"
  weight = 65535
  [[vip.backend]]
  address = "10.0.1.4"
[[vip]]
address = "2001:db8:200::7"
port = 443
protocol = "udp"
quic = true
quic_cid_len = 12
quic_server_id_len = 3
hash = "src-ip-prefix"
hash_prefix6 = 56
encap = "ipip"
second_chance = false
  [[vip.backend]]
  name = "ünï\"q"
  address = "2001:db8:1::1"
  quic_id = 0
  [[vip.backend]]
  address = "2001:db8:1::2"
  quic_id = 16777215
[[vip]]
address = "203.0.113.8"
port = 0
scheduler = "peak-ewma"
ewma_penalty = "5ms"
  [vip.health]
  kind = "none"
  [[vip.backend]]
  address = "10.0.2.1"
`
	files := map[string]string{
		"fulcrum.toml": "../../examples/fulcrum.toml",
		"pcap.toml":    "../../examples/pcap.toml",
		"rich.toml":    writeFile(t, dir, "rich.toml", rich, 0o644),
	}
	for name, f := range files {
		t.Run(name, func(t *testing.T) {
			code, out, errs := runCmd("check", "-c", f)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			again := writeFile(t, t.TempDir(), "again.toml", effective(t, out), 0o644)
			code, out2, errs := runCmd("check", "-c", again)
			if code != 0 {
				t.Fatalf("the effective configuration: exit %d: %s\n%s", code, errs, effective(t, out))
			}
			if a, b := effective(t, out), effective(t, out2); a != b {
				t.Errorf("checked again, the effective configuration differs:\n%s\n---\n%s", a, b)
			}
			if a, b := tables(out), tables(out2); a != b {
				t.Errorf("checked again, the tables differ:\n%s\n---\n%s", a, b)
			}
		})
	}
}

// A backend written with drain = true takes no new flows: check prints
// the tables `fulcrum run` builds, in which it has no slot. Before, check
// built them from the configured weights alone and gave it a share.
func TestCheckDrainedBackendHasNoSlots(t *testing.T) {
	f := writeFile(t, t.TempDir(), "d.toml", probeBase+`[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
table_size = 251
  [[vip.backend]]
  name = "be1"
  address = "10.0.1.1"
  drain = true
  [[vip.backend]]
  name = "be2"
  address = "10.0.1.2"
`, 0o644)
	code, out, errs := runCmd("check", "-c", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	tb := tables(out)
	if strings.Contains(tb, "be1") || !strings.Contains(tb, "#     be2                      251 slots 100.00%\n") {
		t.Errorf("tables with be1 drained:\n%s\nwant be2 alone with all 251 slots", tb)
	}
	// Every backend drained: no table, as in the daemon.
	f = writeFile(t, t.TempDir(), "d.toml", probeBase+`[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
  [[vip.backend]]
  address = "10.0.1.1"
  drain = true
`, 0o644)
	if code, out, errs := runCmd("check", "-c", f); code != 0 || !strings.Contains(tables(out), `vip "web" 203.0.113.7: no backend takes new flows`) {
		t.Errorf("exit %d (%s), tables:\n%s\nwant web without a table", code, errs, tables(out))
	}
}

// Secrets written in the file (admin.token, a BGP neighbour's MD5
// password) are not printed; the placeholder printed instead is refused,
// at its key, when the output is used as a configuration.
func TestCheckDoesNotPrintSecrets(t *testing.T) {
	const token, password = "s3cr3t-admin-token-0123456789", "md5-Pa55word"
	f := writeFile(t, t.TempDir(), "s.toml", probeBase+`[admin]
token = "`+token+`"
[bgp]
asn = 65100
router_id = "192.0.2.10"
[[bgp.neighbor]]
address = "192.0.2.1"
peer_asn = 65000
password = "`+password+`"
[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
  [[vip.backend]]
  address = "10.0.1.1"
`, 0o600)
	code, out, errs := runCmd("check", "-c", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, token) || strings.Contains(out, password) {
		t.Fatalf("check printed a secret:\n%s", out)
	}
	again := writeFile(t, t.TempDir(), "again.toml", effective(t, out), 0o600)
	code, _, errs = runCmd("check", "-c", again)
	if code != 2 || !strings.Contains(errs, ": admin.token: ") || !strings.Contains(errs, ": bgp.neighbor[0].password: ") {
		t.Errorf("the printed configuration checked: exit %d, stderr %q; want 2 naming admin.token and bgp.neighbor[0].password", code, errs)
	}
}

// Exit codes and messages for files an operator may name by mistake.
func TestCheckOddFiles(t *testing.T) {
	dir := t.TempDir()
	valid, err := os.ReadFile("../../examples/pcap.toml")
	if err != nil {
		t.Fatal(err)
	}
	vs := string(valid)
	cases := []struct {
		name, body string
		code       int
		want       string // in stderr ("" for a valid file)
	}{
		{"empty", "", 2, ":1: empty file"},
		{"comments", "# a\n   # b\n\n", 2, ":1: empty file"},
		{"bom-only", "\ufeff", 2, ":1: empty file"},
		{"bom-comments", "\ufeff# a\r\n\r\n", 2, ":1: empty file"},
		{"bom", "\ufeff" + vs, 0, ""},
		{"crlf", strings.ReplaceAll(vs, "\n", "\r\n"), 0, ""},
		{"long-comment", "# " + strings.Repeat("x", 4<<20) + "\n" + vs, 0, ""},
		{"dup-table", vs + "\n[dataplane]\nmtu = 1400\n", 2, "has already been defined"},
		{"dup-key", strings.Replace(vs, "[dataplane]\n", "[dataplane]\nmtu = 1400\nmtu = 1500\n", 1), 2, "dataplane.mtu' has already been defined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := writeFile(t, dir, tc.name+".toml", tc.body, 0o644)
			code, out, errs := runCmd("check", "-c", f)
			if code != tc.code || (tc.want != "" && !strings.Contains(errs, tc.want)) {
				t.Errorf("exit %d, stderr %.300q; want %d and %q", code, errs, tc.code, tc.want)
			}
			if tc.code == 0 && !strings.Contains(out, "valid") {
				t.Errorf("stdout %.300q", out)
			}
		})
	}
	for _, p := range []string{filepath.Join(dir, "missing.toml"), dir} {
		if code, _, errs := runCmd("check", "-c", p); code != 2 || !strings.Contains(errs, p) {
			t.Errorf("check -c %s: exit %d, stderr %q; want 2 naming the path", p, code, errs)
		}
	}
}
