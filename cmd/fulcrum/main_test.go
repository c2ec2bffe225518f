package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/conntrack"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestCheckExample(t *testing.T) {
	code, out, errs := runCmd("check", "-c", "../../examples/pcap.toml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"valid", `hash_key = "000102030405060708090a0b0c0d0e0f"`, `vip "web"`, "be2", "M=65537"} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q", want)
		}
	}
}

func TestBadInvocations(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[dataplane]\nport = \"x\"\nlb_ipv4 = \"192.0.2.10\"\nhash_key = \"000102030405060708090a0b0c0d0e0f\"\n[[vip]]\naddress = \"203.0.113.7\"\ntable_size = 100\n[[vip.backend]]\naddress = \"10.0.0.1\"\n"), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"check", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"run", "--log-level", "loud"}, 2, "--log-level"},
		{[]string{"check", "-c", filepath.Join(dir, "missing.toml")}, 2, "no such file"},
		{[]string{"check", "-c", bad}, 2, "bad.toml:7: vip[0].table_size: 100 is not a prime"},
		{[]string{"check", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"run", "-c", bad}, 2, "not a prime"},
	}
	for _, tc := range cases {
		code, _, errs := runCmd(tc.args...)
		if tc.args != nil && tc.args[0] == "run" && strings.Contains(errs, "built without DPDK") {
			continue // run without DPDK says so before reading the config
		}
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("fulcrum %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd("version")
	if code != 0 || !strings.HasPrefix(out, "fulcrum ") {
		t.Errorf("exit %d, %q", code, out)
	}
}

// check reports every problem of the file, one a line with its line
// number: here a health check `run` used to reject after check passed
// it, and a [bgp] section without a neighbor.
func TestCheckReportsEveryProblem(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte(`[dataplane]
port = "x"
lb_ipv4 = "192.0.2.10"
gateway_ipv4 = "192.0.2.1"
hash_key = "000102030405060708090a0b0c0d0e0f"
[[vip]]
address = "203.0.113.7"
port = 80
[vip.health]
kind = "http"
expect = "abc"
[[vip.backend]]
address = "10.0.0.1"
[bgp]
asn = 65001
router_id = "192.0.2.10"
`), 0o644)
	code, _, errs := runCmd("check", "-c", bad)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, errs)
	}
	want := []string{
		"fulcrum: " + bad + ":11: vip[0].health.expect: ",
		"fulcrum: " + bad + ":14: bgp.neighbor: ",
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), errs)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d %q, want it to start with %q", i, lines[i], w)
		}
	}
}

// TestHelp: help exits 0 and lists every flag of every command.
func TestHelp(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"fulcrum run", "fulcrum check", "fulcrum version", "--log-format", "--log-level", "--stats-interval", "--exit-when-idle", "--cpu-profile", defaultConfig, "SIGHUP", "READY"}},
		{[]string{"help"}, []string{"fulcrum run"}},
		{[]string{"-h"}, []string{"fulcrum run"}},
		{[]string{"run", "--help"}, []string{"-c file", defaultConfig, "-log-format", "-log-level", "-stats-interval", "-exit-when-idle", "-cpu-profile file"}},
		{[]string{"run", "-h"}, []string{"-log-level"}},
		{[]string{"check", "--help"}, []string{"-c file", defaultConfig}},
	}
	for _, tc := range cases {
		code, out, errs := runCmd(tc.args...)
		if code != 0 {
			t.Errorf("fulcrum %v: exit %d, stderr %q", tc.args, code, errs)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("fulcrum %v: stdout lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
}

// TestDefaultConfig: without -c, check reads /etc/fulcrum/fulcrum.toml.
func TestDefaultConfig(t *testing.T) {
	code, _, errs := runCmd("check")
	if _, err := os.Stat(defaultConfig); err == nil {
		if code != 0 {
			t.Errorf("check of the installed %s: exit %d: %s", defaultConfig, code, errs)
		}
		return
	}
	if code != 2 || !strings.Contains(errs, defaultConfig) {
		t.Errorf("check without -c: exit %d, %q; want 2 and the default path", code, errs)
	}
}

// `fulcrum check` refuses more backends than the dataplane holds, at the
// first one too many; before, it built the tables and failed without a
// line, or passed a file `fulcrum run` refused.
func TestCheckRefusesTooManyBackends(t *testing.T) {
	var b strings.Builder
	b.WriteString("[dataplane]\nport = \"x\"\nlb_ipv4 = \"192.0.2.10\"\ngateway_ipv4 = \"192.0.2.1\"\nhash_key = \"000102030405060708090a0b0c0d0e0f\"\n")
	b.WriteString("[[vip]]\naddress = \"203.0.113.7\"\nport = 80\ntable_size = 655373\n") // lines 6-9
	const n = conntrack.MaxBackends + 1
	for i := 0; i < n; i++ { // backend i at lines 10+2i, 11+2i
		fmt.Fprintf(&b, "[[vip.backend]]\naddress = \"10.%d.%d.%d\"\n", 1+i>>16, i>>8&255, i&255)
	}
	f := filepath.Join(t.TempDir(), "many.toml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCmd("check", "-c", f)
	want := fmt.Sprintf("fulcrum: %s:%d: vip[0].backend[%d]: ", f, 10+2*(n-1), n-1)
	if code != 2 || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want 2 and one line starting %q", code, errs, want)
	}
}

// TestRunRefusesNegativeDurations: a negative --stats-interval or
// --exit-when-idle is bad usage, refused (exit 2) before anything starts
// (here: no CPU profile file is created). Before, it was taken as 0.
func TestRunRefusesNegativeDurations(t *testing.T) {
	dir := t.TempDir()
	for _, flag := range []string{"--stats-interval", "--exit-when-idle"} {
		prof := filepath.Join(dir, "cpu"+flag+".pprof")
		code, _, errs := runCmd("run", "-c", filepath.Join(dir, "missing.toml"), flag, "-1s", "--cpu-profile", prof)
		if code != 2 {
			t.Errorf("run %s -1s: exit %d, want 2: %s", flag, code, errs)
		}
		if _, err := os.Stat(prof); err == nil {
			t.Errorf("run %s -1s started: it created %s", flag, prof)
		}
	}
}

// `fulcrum check` of a file every user can read with an inline token
// passes and warns on stderr, naming the key; the token itself is in
// neither output.
func TestCheckWarnsOfInlineSecret(t *testing.T) {
	const tok = "0123456789abcdef0123"
	src, err := os.ReadFile("../../examples/pcap.toml")
	if err != nil {
		t.Fatal(err)
	}
	own := strings.Replace(string(src), "000102030405060708090a0b0c0d0e0f", "5be1c3e6a07f42d9b81c0e2f6a4d3917", 1) // not a published key: no warning of its own
	f := writeFile(t, t.TempDir(), "f.toml", own+"\n[admin]\ntoken = \""+tok+"\"\n", 0o644)
	if err := os.Chmod(f, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	code, out, errs := runCmd("check", "-c", f)
	if code != 0 || !strings.Contains(errs, "warning: admin.token is written in "+f) || strings.Contains(out+errs, tok) {
		t.Fatalf("exit %d, stderr %q: want 0 and a warning naming admin.token, the secret in neither output", code, errs)
	}
	if err := os.Chmod(f, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCmd("check", "-c", f); code != 0 || errs != "" {
		t.Fatalf("mode 0600: exit %d, stderr %q; want 0 and nothing", code, errs)
	}
}
