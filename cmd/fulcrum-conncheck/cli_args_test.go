package main

import (
	"bytes"
	"strings"
	"testing"
)

// A flag after a positional argument is not parsed by package flag: it
// was dropped with the argument, and the run went on with the defaults
// (here -n 200 instead of 1), exit 0. A stray argument is bad usage.
func TestArgumentsAfterFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-target", "127.0.0.1:1", "-duration", "50ms", "extra", "-n", "1"},
		{"-target", "127.0.0.1:1", "-duration", "50ms", "-n", "1", "127.0.0.1:2"},
	} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		bad := args[4]
		if args[4] == "-n" {
			bad = args[6]
		}
		if code != 2 || !strings.Contains(errb.String(), bad) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %q (stdout %d bytes)", args, code, errb.String(), bad, out.Len())
		}
	}
}

// -target with a port no TCP connection can have was taken, and every
// connection was reported as a dial error of the VIP, exit 0.
func TestTargetPortOutOfRangeRefused(t *testing.T) {
	for _, target := range []string{"127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:", "127.0.0.1:-1", "[::1]:99999"} {
		var out, errb bytes.Buffer
		code := run([]string{"-target", target, "-n", "1", "-duration", "50ms"}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "-target") {
			t.Errorf("-target %s: exit %d, stderr %q; want exit 2 naming -target (stdout %.80q)", target, code, errb.String(), out.String())
		}
	}
}

// -h and -help print the flags and exit 0, as every other Fulcrum tool
// does; they exited 2.
func TestHelpExitsZero(t *testing.T) {
	for _, h := range []string{"-h", "-help", "--help"} {
		var out, errb bytes.Buffer
		code := run([]string{h}, &out, &errb)
		help := out.String() + errb.String()
		if code != 0 {
			t.Errorf("%s: exit %d, want 0", h, code)
		}
		for _, f := range []string{"-target", "-n", "-interval", "-duration", "-timeout", "-report"} {
			if !strings.Contains(help, f) {
				t.Errorf("%s: help does not list %s", h, f)
			}
		}
	}
}

// -report into a directory that does not exist (or a path that is a
// directory) was taken, every rewrite failed silently, and a test
// polling the file for progress waited for its own time limit.
func TestReportUnwritableRefused(t *testing.T) {
	dir := t.TempDir()
	for _, rep := range []string{dir + "/no/such/dir/r.json", dir} {
		var out, errb bytes.Buffer
		code := run([]string{"-target", "127.0.0.1:1", "-n", "1", "-duration", "50ms", "-report", rep}, &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), "-report") {
			t.Errorf("-report %s: exit %d, stderr %q; want an error naming -report", rep, code, errb.String())
		}
	}
}
