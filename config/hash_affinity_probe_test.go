package config

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/flow"
)

// Hash settings at and past their limits, as a careless operator writes
// them: every refusal names the offending key (at its line) and says why;
// every acceptance applies exactly what was written.

func TestAffinityHashValuesPastLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		toml string
		key  string
		line int
		msg  string
	}{
		{"ipv4 prefix -1", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = -1`), "vip[0].hash_prefix", 15, "-1 is not a prefix length in 1..32"},
		{"ipv4 prefix 256 (wraps to 0 as a byte)", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 256`), "vip[0].hash_prefix", 15, "256 is not a prefix length"},
		{"ipv4 prefix 2^32+24 (wraps to 24 as uint32)", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 4294967320`), "vip[0].hash_prefix", 15, "is not a prefix length"},
		{"ipv4 prefix huge", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 9223372036854775807`), "vip[0].hash_prefix", 15, "is not a prefix length"},
		{"ipv6 prefix 0", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix6 = 0`), "vip[0].hash_prefix6", 15, "0 is not a prefix length in 1..128"},
		{"ipv6 prefix 384 (wraps to 128 as a byte)", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix6 = 384`), "vip[0].hash_prefix6", 15, "384 is not a prefix length"},
		{"ipv6 prefix -128", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix6 = -128`), "vip[0].hash_prefix6", 15, "is not a prefix length"},
		{"prefix6 with src-ip", withVIPKeys(`hash = "src-ip"`, `hash_prefix6 = 64`), "vip[0].hash_prefix6", 15, `only hash "src-ip-prefix" uses a prefix`},
		{"empty mode", withVIPKeys(`hash = ""`), "vip[0].hash", 14, "want 5-tuple"},
		{"upper-case mode", withVIPKeys(`hash = "SRC-IP"`), "vip[0].hash", 14, "want 5-tuple"},
		{"padded mode", withVIPKeys(`hash = " src-ip"`), "vip[0].hash", 14, "want 5-tuple"},
		{"mode with prefix glued", withVIPKeys(`hash = "src-ip-prefix/24"`), "vip[0].hash", 14, "want 5-tuple"},
		{"4-tuple", withVIPKeys(`hash = "4-tuple"`), "vip[0].hash", 14, "want 5-tuple"},
		{"src-ip-prefix with p2c", withVIPKeys(`scheduler = "p2c"`, `hash = "src-ip-prefix"`), "vip[0].hash", 15, `needs scheduler "maglev"`},
		{"3-tuple with random", withVIPKeys(`scheduler = "random"`, `hash = "3-tuple"`), "vip[0].hash", 15, `needs scheduler "maglev"`},
	} {
		t.Run(tc.name, func(t *testing.T) { wantProblemAt(t, tc.toml, tc.key, tc.line, tc.msg) })
	}
}

// A value of the wrong TOML type is refused by the decoder, at its line,
// naming the key (the decoder spells it without the VIP's index, as for
// every key of the file).
func TestAffinityHashWrongTypes(t *testing.T) {
	for _, tc := range []struct {
		toml string
		key  string
		line int
	}{
		{withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = "24"`), "hash_prefix", 15},
		{withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 24.5`), "hash_prefix", 15},
		{withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix6 = true`), "hash_prefix6", 15},
		{withVIPKeys(`hash = ["src-ip"]`), "hash", 14},
	} {
		_, err := Parse([]byte(tc.toml), "f.toml")
		if err == nil {
			t.Errorf("accepted:\n%s", tc.toml)
			continue
		}
		ps := problemsOf(t, err)
		if len(ps) == 0 || !strings.HasSuffix(ps[0].key, "."+tc.key) || ps[0].line != tc.line {
			t.Errorf("%s: want a problem at line %d naming %s, got %v", tc.toml, tc.line, tc.key, err)
		}
	}
}

// Both prefixes wrong at once: both keys are reported, not only the first.
// README "Configuration": "fulcrum check reports every problem of the
// file, one a line, each at its key's line".
func TestAffinityBothPrefixesWrongBothNamed(t *testing.T) {
	for _, toml := range []string{
		withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 40`, `hash_prefix6 = 200`),
		withVIPKeys(`hash = "src-ip"`, `hash_prefix = 24`, `hash_prefix6 = 48`),
		withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 0`, `hash_prefix6 = 0`),
	} {
		_, err := Parse([]byte(toml), "f.toml")
		if err == nil {
			t.Fatal("accepted")
		}
		keys := map[string]int{}
		for _, p := range problemsOf(t, err) {
			keys[p.key] = p.line
		}
		for k, line := range map[string]int{"vip[0].hash_prefix": 15, "vip[0].hash_prefix6": 16} {
			if keys[k] != line {
				t.Errorf("%s: %s not reported at line %d: %v", strings.Join(strings.Split(toml, "\n")[13:16], "; "), k, line, err)
			}
		}
	}
}

// The limits themselves are accepted and applied as written; the explicit
// "maglev" scheduler with a hash is accepted.
func TestAffinityHashLimitsAccepted(t *testing.T) {
	for _, tc := range []struct {
		toml string
		want flow.Fields
	}{
		{withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 1`, `hash_prefix6 = 1`), flow.Fields{Mode: flow.SrcIPPrefix, Prefix4: 1, Prefix6: 1}},
		{withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix6 = 64`), flow.Fields{Mode: flow.SrcIPPrefix, Prefix4: 24, Prefix6: 64}},
		{withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix6 = 65`), flow.Fields{Mode: flow.SrcIPPrefix, Prefix4: 24, Prefix6: 65}},
		{withVIPKeys(`scheduler = "maglev"`, `hash = "src-ip"`), flow.Fields{Mode: flow.SrcIP}},
	} {
		c, err := Parse([]byte(tc.toml), "f.toml")
		if err != nil {
			t.Fatalf("%s\nrefused: %v", tc.toml, err)
		}
		if got := c.VIPs[0].HashFields(); got != tc.want {
			t.Errorf("%s\nfields %+v, want %+v", tc.toml, got, tc.want)
		}
		s, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if tc.want.Mode == flow.SrcIPPrefix && !strings.Contains(s, "hash_prefix6") {
			t.Errorf("effective config lacks the applied prefixes:\n%s", s)
		}
	}
}
