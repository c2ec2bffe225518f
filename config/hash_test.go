package config

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/flow"
)

// withVIPKeys is base with lines added after the VIP's port (line 13), so
// the first added line is line 14.
func withVIPKeys(lines ...string) string {
	return strings.Replace(base, "port = 80", "port = 80\n"+strings.Join(lines, "\n"), 1)
}

// A bad hash setting is refused at its key's line, with the reason.
func TestHashRejectedAtKeyAndLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		toml string
		key  string
		line int
		msg  string
	}{
		{"unknown mode", withVIPKeys(`hash = "4-tuple"`), "vip[0].hash", 14, `"4-tuple" (want 5-tuple, 3-tuple, src-ip or src-ip-prefix)`},
		{"prefix without src-ip-prefix", withVIPKeys(`hash = "3-tuple"`, `hash_prefix = 24`), "vip[0].hash_prefix", 15, `only hash "src-ip-prefix" uses a prefix, not "3-tuple"`},
		{"prefix with the default mode", withVIPKeys(`hash_prefix6 = 48`), "vip[0].hash_prefix6", 14, `not "5-tuple"`},
		{"ipv4 prefix 0", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 0`), "vip[0].hash_prefix", 15, "0 is not a prefix length in 1..32"},
		{"ipv4 prefix 33", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 33`), "vip[0].hash_prefix", 15, "33 is not a prefix length in 1..32"},
		{"ipv4 prefix 280", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 280`), "vip[0].hash_prefix", 15, "280 is not"},
		{"ipv6 prefix 129", withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix6 = 129`), "vip[0].hash_prefix6", 15, "129 is not a prefix length in 1..128"},
		{"hash with a load-based scheduler", withVIPKeys(`scheduler = "least-conn"`, `hash = "src-ip"`), "vip[0].hash", 15, `needs scheduler "maglev"`},
		{"hash not a string", withVIPKeys(`hash = 5`), "vip[0].hash", 14, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { wantProblemAt(t, tc.toml, tc.key, tc.line, tc.msg) })
	}
}

// A valid setting reaches package flow's terms, src-ip-prefix with its
// defaults written back, and survives the effective-config round trip.
func TestHashAccepted(t *testing.T) {
	for _, tc := range []struct {
		toml string
		want flow.Fields
	}{
		{base, flow.Fields{}},
		{withVIPKeys(`hash = "5-tuple"`), flow.Fields{}},
		{withVIPKeys(`hash = "3-tuple"`), flow.Fields{Mode: flow.ThreeTuple}},
		{withVIPKeys(`hash = "src-ip"`), flow.Fields{Mode: flow.SrcIP}},
		{withVIPKeys(`hash = "src-ip-prefix"`), flow.Fields{Mode: flow.SrcIPPrefix, Prefix4: 24, Prefix6: 48}},
		{withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 20`, `hash_prefix6 = 56`), flow.Fields{Mode: flow.SrcIPPrefix, Prefix4: 20, Prefix6: 56}},
		{withVIPKeys(`hash = "src-ip-prefix"`, `hash_prefix = 32`, `hash_prefix6 = 128`), flow.Fields{Mode: flow.SrcIPPrefix, Prefix4: 32, Prefix6: 128}},
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
		c2, err := Parse([]byte(s), "encoded")
		if err != nil {
			t.Fatalf("effective config does not parse: %v\n%s", err, s)
		}
		if got := c2.VIPs[0].HashFields(); got != tc.want {
			t.Errorf("after the round trip: fields %+v, want %+v\n%s", got, tc.want, s)
		}
	}
}
