package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every flag that a command's --help lists is in the man page
// (packaging/fulcrum.8), in its SYNOPSIS and described under OPTIONS.
// -stats-json once was missing from both.
func TestManPageHasEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../packaging/fulcrum.8")
	if err != nil {
		t.Fatal(err)
	}
	man := string(b)
	synopsis, rest, ok := strings.Cut(man, ".SH DESCRIPTION")
	_, options, ok2 := strings.Cut(rest, ".SH OPTIONS")
	options, _, _ = strings.Cut(options, "\n.SH ")
	if !ok || !ok2 {
		t.Fatal("the man page has no DESCRIPTION or OPTIONS section")
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for _, cmd := range []string{"run", "check", "prereq"} {
		code, out, errs := runCmd(cmd, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", cmd, code, errs)
		}
		flags := flagLine.FindAllStringSubmatch(out, -1)
		if len(flags) == 0 {
			t.Fatalf("%s --help lists no flags:\n%s", cmd, out)
		}
		for _, f := range flags {
			// The man page writes -c as \-c and --stats-json as
			// \-\-stats\-json; a flag must not match a longer one's
			// prefix (\-c in \-\-cpu\-profile).
			re := regexp.MustCompile(`(^|[^a-z\\-])(\\-)+` + strings.ReplaceAll(f[1], "-", `\\-`) + `([^a-z\\]|\\f|$)`)
			sec := synopsis[strings.Index(synopsis, ".B fulcrum "+cmd):]
			if i := strings.Index(sec[1:], ".B fulcrum "); i >= 0 {
				sec = sec[:i+1]
			}
			if !re.MatchString(sec) {
				t.Errorf("fulcrum.8 SYNOPSIS of %s does not show -%s", cmd, f[1])
			}
			if !re.MatchString(options) {
				t.Errorf("fulcrum.8 OPTIONS does not describe -%s (%s)", f[1], cmd)
			}
		}
	}
}
