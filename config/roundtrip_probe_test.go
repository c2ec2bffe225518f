package config

import (
	"errors"
	"strings"
	"testing"
)

// keysOf is every problem's key and line of a Parse error.
func keysOf(t *testing.T, err error) map[string]int {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v is not Errors", err)
	}
	out := map[string]int{}
	for _, p := range es {
		out[p.Key] = p.Line
	}
	return out
}

// The hash key has one spelling in the effective configuration: the
// same key in upper-case digits is the same key (before, it stayed as
// written, so two instances' effective configurations differed and a
// reload that only changed the case was refused as a new fleet key).
func TestHashKeyIsNormalised(t *testing.T) {
	up := strings.Replace(base, "000102030405060708090a0b0c0d0e0f", "000102030405060708090A0B0C0D0E0F", 1)
	c, err := Parse([]byte(up), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dataplane.HashKey != "000102030405060708090a0b0c0d0e0f" {
		t.Errorf("hash_key %q, want lower-case hex", c.Dataplane.HashKey)
	}
}

// A file of only a byte order mark (and comments) is empty, as one
// without the mark is: one problem, not four about missing keys.
func TestBOMOnlyFileIsEmpty(t *testing.T) {
	for _, body := range []string{"\ufeff", "\ufeff# only a comment\r\n"} {
		_, err := Parse([]byte(body), "f.toml")
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || es[0].Line != 1 || !strings.HasPrefix(es[0].Msg, "empty file") {
			t.Errorf("%q: %v; want the one empty-file problem at line 1", body, err)
		}
	}
}

// Redacted replaces the secrets the file holds, leaves the Config it was
// called on alone, and its placeholder is refused in either key, at the
// key's line.
func TestRedactedSecrets(t *testing.T) {
	src := base + "[admin]\ntoken = \"0123456789abcdef0123\"\n" + bgpSection + "password = \"md5key\"\n"
	c, err := Parse([]byte(src), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redacted()
	if r.Admin.Token != RedactedSecret || r.BGP.Neighbors[0].Password != RedactedSecret {
		t.Errorf("redacted: token %q password %q", r.Admin.Token, r.BGP.Neighbors[0].Password)
	}
	if c.Admin.Token != "0123456789abcdef0123" || c.BGP.Neighbors[0].Password != "md5key" || c.Admin.Secret() != "0123456789abcdef0123" {
		t.Errorf("Redacted changed the original: %+v %+v", c.Admin, c.BGP.Neighbors[0])
	}
	s, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "0123456789abcdef0123") || strings.Contains(s, "md5key") {
		t.Fatalf("redacted encoding holds a secret:\n%s", s)
	}
	_, err = Parse([]byte(s), "f.toml")
	keys := keysOf(t, err)
	for _, k := range []string{"admin.token", "bgp.neighbor[0].password"} {
		if keys[k] < 2 {
			t.Errorf("placeholder in %s: problems %v; want it refused at its line", k, keys)
		}
	}
	// Without secrets there is nothing to redact: the encodings agree.
	c2, err := Parse([]byte(base+bgpSection), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c2.Encode()
	b, _ := c2.Redacted().Encode()
	if a != b {
		t.Errorf("redaction of a config without secrets changed it:\n%s\n---\n%s", a, b)
	}
}

// A bad value of megabytes is not printed whole: each problem's line is
// cut at MaxProblemLen bytes and says how long it was, and the other
// problems of the file are still listed.
func TestLongBadValueIsClipped(t *testing.T) {
	long := strings.Repeat("9@9,", 1<<20)
	toml := "[eal]\nlcore_map = \"" + long + "\"\nmemory_mb = 1\n" + `[dataplane]
port = "net_ring0"
lb_ipv4 = "192.0.2.10"
next_hop_mac = "02:00:00:00:00:fe"
hash_key = "000102030405060708090a0b0c0d0e0f"
[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
  [[vip.backend]]
  address = "10.0.1.1"
`
	_, err := Parse([]byte(toml), "f.toml")
	if err == nil {
		t.Fatal("accepted")
	}
	lines := Lines(err)
	if len(lines) < 2 {
		t.Fatalf("%d problems, want lcore_map's and memory_mb's", len(lines))
	}
	for _, l := range lines {
		if len(l) > MaxProblemLen+100 {
			t.Errorf("a problem of %d bytes: %.80s...", len(l), l)
		}
	}
	if !strings.Contains(err.Error(), "eal.memory_mb") || !strings.Contains(err.Error(), "bytes in all") {
		t.Errorf("want memory_mb's problem and a clipped one: %.300s", err.Error())
	}
}
