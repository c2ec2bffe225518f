package main

import (
	"bytes"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/decap"
)

func TestParseFlags(t *testing.T) {
	all := []decap.Kind{decap.GRE, decap.IPIP, decap.GUE}
	for _, c := range []struct {
		args  []string
		kinds []decap.Kind
		port  uint16
		addrs []netip.Addr
	}{
		{nil, all, 6080, nil},
		{[]string{"-gre"}, []decap.Kind{decap.GRE}, 6080, nil},
		{[]string{"-ipip", "-gue", "7777"}, []decap.Kind{decap.IPIP, decap.GUE}, 7777, nil},
		{[]string{"-gre", "-gue", "0"}, []decap.Kind{decap.GRE}, 6080, nil},
		{[]string{"-gue", "6080"}, []decap.Kind{decap.GUE}, 6080, nil},
		{[]string{"-addr", "192.0.2.21,2001:db8::21", "-addr", "::ffff:10.0.0.1"}, all, 6080,
			[]netip.Addr{netip.MustParseAddr("192.0.2.21"), netip.MustParseAddr("2001:db8::21"), netip.MustParseAddr("10.0.0.1")}},
	} {
		o, err := parseFlags(c.args, &bytes.Buffer{})
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !reflect.DeepEqual(o.kinds, c.kinds) || o.guePort != c.port || !reflect.DeepEqual([]netip.Addr(o.addrs), c.addrs) || o.tun != "fdecap0" {
			t.Errorf("%q: kinds %v port %d addrs %v tun %q; want %v %d %v fdecap0", c.args, o.kinds, o.guePort, o.addrs, o.tun, c.kinds, c.port, c.addrs)
		}
	}
}

// TestBadFlags: every bad command line exits 2 and names the problem,
// before anything is opened (so this needs no root).
func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-tun", ""}, "-tun \"\""},
		{[]string{"-tun", "a-name-that-is-too-long"}, "1 to 15 characters"},
		{[]string{"-tun", "a/b"}, "without '/'"},
		{[]string{"-gue", "70000"}, "-gue 70000"},
		{[]string{"-gue", "-1"}, "-gue -1"},
		{[]string{"-gue", "x"}, "invalid value \"x\" for flag -gue"},
		{[]string{"-gre=false", "-ipip=false", "-gue", "0"}, "nothing to receive"},
		{[]string{"-addr", "nope"}, "\"nope\" is not an IPv4 or IPv6 address"},
		{[]string{"-addr", "0.0.0.0"}, "not a unicast address"},
		{[]string{"-addr", "fe80::1%eth0"}, "not an IPv4 or IPv6 address"},
		{[]string{"-log-format", "xml"}, "-log-format \"xml\""},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, "unexpected argument \"extra\""},
	} {
		var stderr bytes.Buffer
		if code := run(c.args, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", c.args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("%q: stderr %q does not say %q", c.args, stderr.String(), c.msg)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"-h"}, &stderr); code != 0 || !strings.Contains(stderr.String(), "usage: fulcrum-decap") {
		t.Errorf("-h: exit %d, %q", code, stderr.String())
	}
}

// TestPeersFlag: -peers takes prefixes and bare addresses (one host),
// repeatable and comma-separated, masked; anything else is a usage error.
func TestPeersFlag(t *testing.T) {
	o, err := parseFlags([]string{"-peers", "10.77.2.16/28, 2001:db8::7", "-peers", "10.0.0.9/24"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.77.2.16/28"), netip.MustParsePrefix("2001:db8::7/128"), netip.MustParsePrefix("10.0.0.0/24")}
	if !reflect.DeepEqual(o.peers, want) {
		t.Fatalf("peers %v, want %v", o.peers, want)
	}
	if o, _ := parseFlags(nil, &bytes.Buffer{}); len(o.peers) != 0 {
		t.Fatalf("default peers %v, want none", o.peers)
	}
	if _, err := parseFlags([]string{"-peers", "nonsense"}, &bytes.Buffer{}); err == nil {
		t.Fatal("-peers nonsense accepted")
	}
	// A prefix of every address would let a forged second chance send
	// packets anywhere: refused, in either family and among others.
	for _, every := range []string{"0.0.0.0/0", "::/0", "10.0.2.0/24,0.0.0.0/0", "::ffff:0.0.0.0/96"} {
		if o, err := parseFlags([]string{"-peers", every}, &bytes.Buffer{}); err == nil {
			t.Errorf("-peers %s accepted: peers %v", every, o.peers)
		}
	}
	if _, err := parseFlags([]string{"-peers", "10.0.0.0/8", "-lbs", "0.0.0.0/0"}, &bytes.Buffer{}); err != nil {
		t.Errorf("-peers 10.0.0.0/8: %v", err)
	}
}

// TestLBsFlag: -lbs takes prefixes and addresses like -peers, defaults to
// none (tunnels from any source), and is in the usage text.
func TestLBsFlag(t *testing.T) {
	o, err := parseFlags([]string{"-lbs", "10.0.1.10, 10.0.1.0/28", "-lbs", "2001:db8::1"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.1.10/32"), netip.MustParsePrefix("10.0.1.0/28"), netip.MustParsePrefix("2001:db8::1/128")}
	if !reflect.DeepEqual(o.lbs, want) {
		t.Fatalf("lbs %v, want %v", o.lbs, want)
	}
	if o, _ := parseFlags(nil, &bytes.Buffer{}); len(o.lbs) != 0 {
		t.Fatalf("default lbs %v, want none", o.lbs)
	}
	if _, err := parseFlags([]string{"-lbs", "nonsense"}, &bytes.Buffer{}); err == nil {
		t.Fatal("-lbs nonsense accepted")
	}
	var stderr bytes.Buffer
	run([]string{"-h"}, &stderr)
	if !strings.Contains(stderr.String(), "[-lbs PREFIX]") || !strings.Contains(stderr.String(), "-lbs value") {
		t.Errorf("usage does not document -lbs:\n%s", stderr.String())
	}
}
