package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Each problem names the TOML key, then says what is wrong in the
// operator's words: the value as written and the bounds, never a Go
// field name (OtherTimeout), a key that does not exist (backoff_base), a
// key the operator did not write (keepalive, when only hold_time was), the
// key again (quic_cid_len: quic_cid_len: ...), or a value of kilobytes
// that pushes the reason out of the clipped line.
func TestProblemTextsAreTheOperatorsWords(t *testing.T) {
	for _, tc := range []struct {
		name string
		toml string
		key  string
		line int
		msg  string // the whole message after "KEY: "
	}{
		// (a) conntrack's bounds, with the values as durations.
		{"conntrack udp too short", base + "[conntrack]\nudp = \"500us\"\n", "conntrack.udp", 18, "500µs is outside 1ms..168h0m0s"},
		{"conntrack udp negative", base + "[conntrack]\nudp = \"-1s\"\n", "conntrack.udp", 18, "-1s is outside 1ms..168h0m0s"},
		{"conntrack tcp_established too long", base + "[conntrack]\ntcp_established = \"200h\"\n", "conntrack.tcp_established", 18, "200h0m0s is outside 1ms..168h0m0s"},
		{"conntrack tcp_syn too short", base + "[conntrack]\ntcp_syn = \"1ns\"\n", "conntrack.tcp_syn", 18, "1ns is outside 1ms..168h0m0s"},
		{"conntrack tcp_closing too long", base + "[conntrack]\ntcp_closing = \"169h\"\n", "conntrack.tcp_closing", 18, "169h0m0s is outside 1ms..168h0m0s"},
		{"conntrack capacity negative", base + "[conntrack]\ncapacity = -1\n", "conntrack.capacity", 18, "-1 is outside 1..134217728 entries"},
		{"conntrack capacity too big", base + "[conntrack]\ncapacity = 134217729\n", "conntrack.capacity", 18, "134217729 is outside 1..134217728 entries"},
		// (b) the key is flap_backoff.
		{"flap_backoff_max over an hour", base + "[health]\nflap_backoff_max = \"1h0m1s\"\n", "health.flap_backoff_max", 18, "1h0m1s is outside flap_backoff (10s)..1h0m0s"},
		{"flap_backoff_max below flap_backoff", base + "[health]\nflap_backoff = \"1m\"\nflap_backoff_max = \"30s\"\n", "health.flap_backoff_max", 19, "30s is outside flap_backoff (1m0s)..1h0m0s"},
		{"vip flap_backoff_max", base + "[vip.health]\nflap_backoff_max = \"2h\"\n", "vip[0].health.flap_backoff_max", 18, "2h0m0s is outside flap_backoff (10s)..1h0m0s"},
		// (d) the key once, then the value.
		{"quic_cid_len 21", withVIPKeys(`protocol = "udp"`, `quic = true`, `quic_cid_len = 21`), "vip[0].quic_cid_len", 16, "21 is outside 1..20 (RFC 9000 17.2)"},
		{"quic_server_id_len 9", withVIPKeys(`protocol = "udp"`, `quic = true`, `quic_server_id_len = 9`), "vip[0].quic_server_id_len", 16, "9 is outside 1..8"},
		{"quic_config_id 7", withVIPKeys(`protocol = "udp"`, `quic = true`, `quic_config_id = 7`), "vip[0].quic_config_id", 16, `7 is outside 0..6 (0b111 is the draft's "unroutable": route by the 5-tuple)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblemText(t, tc.toml, tc.key, tc.line, tc.msg)
		})
	}
}

// wantProblemText parses toml and fails t unless its problem at key is
// at line and says exactly msg, and no problem's text holds a Go field
// name of the owning packages.
func wantProblemText(t *testing.T, toml, key string, line int, msg string) {
	t.Helper()
	_, err := Parse([]byte(toml), "f.toml")
	if err == nil {
		t.Fatal("accepted")
	}
	found := false
	for _, p := range problemsOf(t, err) {
		for _, goName := range []string{"Timeout", "Capacity", "invalid conntrack config", "backoff_base", "BackoffMax"} {
			if strings.Contains(p.msg, goName) {
				t.Errorf("%s: %q holds %q, not the operator's words", p.key, p.msg, goName)
			}
		}
		if p.key == key {
			found = true
			if p.line != line || p.msg != msg {
				t.Errorf("%s at line %d: %q\nwant line %d: %q", key, p.line, p.msg, line, msg)
			}
		}
	}
	if !found {
		t.Errorf("no problem names %s: %v", key, err)
	}
}

// (c) A neighbor that writes only hold_time, too short, is told so at
// hold_time; the keepalive it never wrote (its default, a third of
// hold_time in whole seconds, is 0s then) is not blamed. A keepalive the
// operator did write is still checked at its own key.
func TestBGPHoldTimeAloneIsBlamedOnHoldTime(t *testing.T) {
	_, err := Parse([]byte(base+bgpSection+"hold_time = \"2s\"\n"), "f.toml")
	if err == nil {
		t.Fatal("accepted")
	}
	var hold bool
	for _, p := range problemsOf(t, err) {
		if strings.Contains(p.key, "keepalive") || strings.Contains(p.msg, "keepalive") {
			t.Errorf("blames the keepalive the file does not write: %s: %s", p.key, p.msg)
		}
		if p.key == "bgp.neighbor[0].hold_time" && p.line == 23 && strings.Contains(p.msg, "hold_time 2s is out of range 3s-") {
			hold = true
		}
	}
	if !hold {
		t.Errorf("no problem at bgp.neighbor[0].hold_time (line 23): %v", err)
	}

	wantProblemAt(t, base+bgpSection+"keepalive = \"10s\"\n", "bgp.neighbor[0].keepalive", 23, "keepalive 10s must be at least 1s and shorter than hold_time 9s")
	wantProblemAt(t, base+bgpSection+"hold_time = \"2s\"\nkeepalive = \"2s\"\n", "bgp.neighbor[0].keepalive", 24, "keepalive 2s must be at least 1s and shorter than hold_time 2s")
	if _, err := Parse([]byte(base+bgpSection+"hold_time = \"3s\"\n"), "f.toml"); err != nil {
		t.Errorf("hold_time 3s alone (keepalive 1s): %v", err)
	}
}

// (e) An over-long health path is not echoed whole: the value is clipped
// so that the line, itself cut at MaxProblemLen, still says what is wrong.
func TestLongHealthPathIsClippedInItsProblem(t *testing.T) {
	for _, tc := range []struct {
		section, key string
	}{{"[health]", "health.path"}, {"[vip.health]\nkind = \"http\"", "vip[0].health.path"}} {
		long := "/" + strings.Repeat("a", 4148) // 4149 bytes, over health.MaxPathLen
		_, err := Parse([]byte(base+tc.section+"\npath = \""+long+"\"\n"), "f.toml")
		if err == nil {
			t.Fatal("accepted")
		}
		var es Errors
		if !errors.As(err, &es) {
			t.Fatalf("not Errors: %v", err)
		}
		found := false
		for _, p := range es {
			if p.Key != tc.key {
				continue
			}
			found = true
			line := p.Error()
			if strings.Contains(p.Msg, long) || len(p.Msg) > 300 {
				t.Errorf("%s: the message holds the path whole (%d bytes): %.120s...", tc.key, len(p.Msg), p.Msg)
			}
			if !strings.Contains(line, "is 4149 bytes long, longer than 4096") {
				t.Errorf("%s: the line does not say why: %s", tc.key, line)
			}
			if !strings.Contains(line, `"/aaaa`) || !strings.Contains(line, strconv.Itoa(len(long))+" bytes") {
				t.Errorf("%s: the line does not show the path's start and length: %s", tc.key, line)
			}
		}
		if !found {
			t.Errorf("no problem at %s: %v", tc.key, err)
		}
	}
	// A path that is only bad, not long, is quoted whole as before.
	wantProblemAt(t, base+"[health]\npath = \"/a b\"\n", "health.path", 18, `"/a b" must not contain spaces or control characters`)
}
