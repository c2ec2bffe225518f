package main

import (
	"strings"
	"testing"
)

// A bad flag is an error: its message and the usage go to stderr, and
// stdout, where check writes the effective configuration a script may
// save (fulcrum check -c F > effective.toml), stays empty. Only --help,
// asked for, prints the usage on stdout.
func TestBadFlagWritesNothingOnStdout(t *testing.T) {
	for _, args := range [][]string{
		{"check", "--bogus"},
		{"check", "-c"},
		{"prereq", "--bogus"},
		{"run", "--stats-interval", "soon"},
	} {
		code, out, errs := runCmd(args...)
		if code != 2 {
			t.Errorf("fulcrum %q: exit %d, want 2", args, code)
		}
		if out != "" {
			t.Errorf("fulcrum %q: a usage error wrote %d bytes to stdout (%.60q...)", args, len(out), out)
		}
		if !strings.Contains(errs, "usage: fulcrum") {
			t.Errorf("fulcrum %q: no usage on stderr: %q", args, errs)
		}
	}
}
