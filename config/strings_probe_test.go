package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/internal/testtls"
)

// Operator-written strings on their way out: what config refuses, and
// that a refusal names the entry and keeps each problem on one line.

func probeBase() *configtest.Builder {
	return configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`)
}

// probeKeys parses toml and returns the problems by key (nil: valid).
func probeKeys(t *testing.T, toml string) map[string]string {
	t.Helper()
	_, err := config.Parse([]byte(toml), "f.toml")
	if err == nil {
		return nil
	}
	var es config.Errors
	if !errors.As(err, &es) {
		t.Fatalf("not a config.Errors: %v", err)
	}
	out := map[string]string{}
	for _, p := range es {
		out[p.Key] += p.Msg
	}
	return out
}

func wantRefusedAt(t *testing.T, what, toml, key string, words ...string) {
	t.Helper()
	got := probeKeys(t, toml)
	msg, ok := got[key]
	if !ok {
		t.Errorf("%s: accepted (problems %q), want a problem at %s", what, got, key)
		return
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: %s: %q lacks %q", what, key, msg, w)
		}
	}
}

func wantAccepted(t *testing.T, what, toml string) {
	t.Helper()
	if got := probeKeys(t, toml); got != nil {
		t.Errorf("%s: refused: %q", what, got)
	}
}

// A name that reads as an address shadows the address: the admin API
// resolves a backend (and a VIP) by name first, then by address, so
// `fulcrumctl drain web 10.0.1.2` would drain the backend *named*
// 10.0.1.2 (at 10.0.1.1), not the server at 10.0.1.2.
func TestStringsProbeNameThatIsAnotherAddress(t *testing.T) {
	wantRefusedAt(t, "backend named another address",
		probeBase().Web(0).Backend("10.0.1.2", "10.0.1.1").Backend("b2", "10.0.1.2").String(),
		"vip[0].backend[0].name", "10.0.1.1")
	wantRefusedAt(t, "backend named another IPv6 address",
		probeBase().Web(0).Backend("2001:db8::2", "10.0.1.1").String(),
		"vip[0].backend[0].name")
	wantRefusedAt(t, "backend named a mapped address",
		probeBase().Web(0).Backend("::ffff:10.0.1.2", "10.0.1.1").String(),
		"vip[0].backend[0].name")
	wantAccepted(t, "backend named its own address",
		probeBase().Web(0).Backend("10.0.1.1", "10.0.1.1").String())
	wantRefusedAt(t, "vip named another address:port",
		probeBase().VIP("203.0.113.8:80", configtest.Web, 80).Backend("b", "10.0.1.1").
			VIP("other", "203.0.113.8", 80).Backend("b", "10.0.1.1").String(),
		"vip[0].name", "203.0.113.7")
	wantRefusedAt(t, "vip named another address",
		probeBase().VIP("203.0.113.8", configtest.Web, 80).Backend("b", "10.0.1.1").String(),
		"vip[0].name")
	wantAccepted(t, "vip named its own address and port",
		probeBase().VIP(configtest.Web+":80", configtest.Web, 80).Backend("b", "10.0.1.1").String())
}

// Characters that print as nothing (variation selectors, fillers, a
// combining grapheme joiner: default-ignorable code points that are not
// of category Cf) make "web" and "web\uFE0F" two names that look alike.
// Two spellings of one text (NFC and NFD) are two names too.
func TestStringsProbeInvisibleAndUnnormalisedNames(t *testing.T) {
	for _, n := range []string{"web\ufe0f", "\u3164", "be\u034f1", "\u115f", "b\U000e0100"} {
		wantRefusedAt(t, strconv.Quote(n), probeBase().Web(0).Backend(n, "10.0.1.1").String(),
			"vip[0].backend[0].name", "U+")
		wantRefusedAt(t, strconv.Quote(n)+" (vip)", probeBase().VIP(n, configtest.Web, 80).Backend("b", "10.0.1.1").String(),
			"vip[0].name", "U+")
	}
	wantRefusedAt(t, "NFD name", probeBase().Web(0).Backend("caf\u00e9", "10.0.1.1").Backend("cafe\u0301", "10.0.1.2").String(),
		"vip[0].backend[1].name", "normal")
	wantAccepted(t, "NFC non-ASCII names", probeBase().Web(0).Backend("caf\u00e9", "10.0.1.1").Backend("\u0928\u092e\u0938\u094d\u0924\u0947", "10.0.1.2").String())
}

// A path in an error message is quoted: a newline in it must not start
// a line of its own in `fulcrum check`'s output or fulcrumctl reload's
// answer (where it reads as another problem).
func TestStringsProbeFilePathsInProblemsAreOneLine(t *testing.T) {
	dir := t.TempDir()
	cert, _, _ := testtls.SelfSigned(t, dir, "admin")
	forged := filepath.Join(dir, "x\nf.toml:1: forged")
	if err := os.WriteFile(forged, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ key, toml string }{
		{"admin.token_file", probeBase().Web(1).Section("admin", "token_file = "+strconv.Quote(forged+"-missing")).String()},
		{"admin.token_file", probeBase().Web(1).Section("admin", "token_file = "+strconv.Quote(dir)).String()},
		{"admin.tls_cert", probeBase().Web(1).Section("admin", "tls_cert = "+strconv.Quote(forged), "tls_key = "+strconv.Quote(forged)).String()},
		{"admin.tls_key", probeBase().Web(1).Section("admin", "tls_cert = "+strconv.Quote(cert), "tls_key = "+strconv.Quote(forged)).String()},
	} {
		_, err := config.Parse([]byte(c.toml), "f.toml")
		if err == nil {
			t.Errorf("%s: accepted", c.key)
			continue
		}
		for _, l := range config.Lines(err) {
			if strings.ContainsAny(l, "\r\n") {
				t.Errorf("%s: problem spans lines: %q", c.key, l)
			}
		}
	}
}

// Health-check strings the Go client would send other than as written
// (a raw non-ASCII query, a Host that punycodes a line separator or a
// bidi control into something else), or that no server takes (a request
// line of megabytes, a Host beyond DNS's 253 bytes).
func TestStringsProbeHealthRequestStrings(t *testing.T) {
	h := func(keys ...string) string {
		return probeBase().Section("health", append([]string{`kind = "http"`}, keys...)...).Web(1).String()
	}
	wantRefusedAt(t, "1 MB path", h(`path = "/`+strings.Repeat("a", 1<<20)+`"`), "health.path", "bytes")
	wantRefusedAt(t, "1 MB host", h(`host = "`+strings.Repeat("a", 1<<20)+`"`), "health.host", "bytes")
	wantRefusedAt(t, "raw non-ASCII query", h("path = \"/h?q=\u00e9\""), "health.path", "query")
	wantRefusedAt(t, "host with a line separator", h("host = \"example.com\u2028x\""), "health.host")
	wantRefusedAt(t, "host with an RLO", h("host = \"a\u202eb.example\""), "health.host")
	wantRefusedAt(t, "host with an ideographic space", h("host = \"a\u3000b\""), "health.host")
	wantAccepted(t, "non-ASCII path (percent-encoded by the client)", h("path = \"/caf\u00e9\""))
	wantAccepted(t, "IDN host", h("host = \"ex\u00e4mple.com:8443\""))
	wantAccepted(t, "253-byte host with port", h(`host = "`+strings.Repeat("a.", 126)+`a:443"`))
	wantAccepted(t, "encoded query", h(`path = "/h?q=%C3%A9&x=%0d%0a"`))
}

// A token of invisible characters is a token nobody can read back or
// type; like blanks, they are refused.
func TestStringsProbeInvisibleToken(t *testing.T) {
	wantRefusedAt(t, "zero-width token",
		probeBase().Web(1).Section("admin", `token = "`+strings.Repeat("\u200b", 16)+`"`).String(), "admin.token", "U+200B")
	wantRefusedAt(t, "token with a BOM",
		probeBase().Web(1).Section("admin", `token = "abcdefghijklmnopq`+"\ufeff"+`"`).String(), "admin.token", "U+FEFF")
}

// BGP's well-known community names are ASCII: strings.ToLower folds the
// Kelvin sign K (U+212A) into "k", so "BLAC\u212AHOLE" was announced as
// BLACKHOLE (65535:666), dropping the VIP's traffic at the peer.
func TestStringsProbeCommunityLookAlike(t *testing.T) {
	b := func(comm string) string {
		return probeBase().Web(1).Section("bgp", `asn = 65001`, `router_id = "192.0.2.10"`, `communities = [`+strconv.Quote(comm)+`]`).
			Sub("[[bgp.neighbor]]", `address = "192.0.2.1"`, `peer_asn = 65000`).String()
	}
	wantRefusedAt(t, "Kelvin-sign blackhole", b("BLAC\u212aHOLE"), "bgp.communities")
	wantAccepted(t, "upper-case no-export", b("NO-EXPORT"))
}
