package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/gen"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestWritesTheGeneratorsFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.pcap")
	args := []string{"-o", out, "-n", "3000", "-flows", "200", "-vips", "203.0.113.7:80,[2001:db8::7]:443",
		"-mode", "mix", "-size", "128", "-malformed", "0.02", "-nonvip", "0.03", "-arp", "0.01", "-seed", "5", "-sequential"}
	code, stdout, stderr := runCmd(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The same file as the package writes for the same settings; -ipv6
	// defaults to the share of IPv6 VIPs, one of two.
	g, err := gen.New(gen.Config{
		VIPs: []netip.AddrPort{netip.MustParseAddrPort("203.0.113.7:80"), netip.MustParseAddrPort("[2001:db8::7]:443")},
		Mode: gen.ModeMix, Size: 128, IPv6: 0.5, Flows: 200, Malformed: 0.02, NonVIP: 0.03, ARP: 0.01, Seed: 5, Sequential: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := g.WritePcap(&want, 3000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("file differs from gen's WritePcap (%d vs %d bytes)", len(got), want.Len())
	}
	if lines := strings.Count(stdout, "\n"); lines != 1 || !strings.Contains(stdout, "wrote 3000 frames") ||
		!strings.Contains(stdout, g.Counts().String()) {
		t.Fatalf("summary %q, want one line with %q", stdout, g.Counts())
	}
	if code, _, _ := runCmd(args...); code != 0 {
		t.Fatal("second run failed")
	}
	again, _ := os.ReadFile(out)
	if !bytes.Equal(again, got) {
		t.Fatal("same flags wrote a different file")
	}
}

func TestStdout(t *testing.T) {
	code, stdout, stderr := runCmd("-o", "-", "-n", "10")
	if code != 0 || !strings.HasPrefix(stdout, "\xd4\xc3\xb2\xa1") || len(stdout) != 24+10*(16+60) || !strings.Contains(stderr, "wrote 10 frames") {
		t.Fatalf("exit %d, %d bytes on stdout, stderr %q", code, len(stdout), stderr)
	}
}

func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.pcap")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-o FILE is required"},
		{[]string{"-o", out, "-size", "63"}, "size 63"},
		{[]string{"-o", out, "-size", "1519"}, "size 1519"},
		{[]string{"-o", out, "-size", "x"}, "invalid value"},
		{[]string{"-o", out, "-mode", "ack"}, `mode "ack"`},
		{[]string{"-o", out, "-vips", "203.0.113.7"}, "-vips"},
		{[]string{"-o", out, "-vips", ""}, "-vips"},
		{[]string{"-o", out, "-ipv6", "1.5"}, "-ipv6"},
		{[]string{"-o", out, "-ipv6", "1"}, "no IPv6 VIP"},
		{[]string{"-o", out, "-malformed", "-0.1"}, "malformed rate"},
		{[]string{"-o", out, "-malformed", "0.5", "-nonvip", "0.6"}, "more than 1"},
		{[]string{"-o", out, "-flows", "0"}, "flows 0"},
		{[]string{"-o", out, "-flows", "70000", "-src", "10.0.0.1/32"}, "do not fit"},
		{[]string{"-o", out, "-n", "-1"}, "-n -1"},
		{[]string{"-o", out, "-src", "2001:db8::/64"}, "-src"},
		{[]string{"-o", out, "-src6", "10.0.0.0/8"}, "-src6"},
		{[]string{"-o", out, "-client-mac", "01:02"}, "-client-mac"},
		{[]string{"-o", out, "-syn-share", "0"}, "-syn-share"},
		{[]string{"-o", out, "-nope"}, "not defined"},
		{[]string{"-o", out, "extra"}, "unexpected argument"},
	} {
		code, _, stderr := runCmd(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a bad run left %s behind", out)
	}
}

func TestHelp(t *testing.T) {
	code, _, stderr := runCmd("-h")
	if code != 0 || !strings.Contains(stderr, "usage: fulcrum-gen") || !strings.Contains(stderr, "-sequential") {
		t.Fatalf("exit %d, usage %q", code, stderr)
	}
}

func TestUnwritable(t *testing.T) {
	code, _, stderr := runCmd("-o", filepath.Join(t.TempDir(), "no", "such", "dir.pcap"), "-n", "1")
	if code != 1 || !strings.Contains(stderr, "dir.pcap") {
		t.Fatalf("exit %d, stderr %q; want 1", code, stderr)
	}
}
