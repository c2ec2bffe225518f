package main

import (
	"bytes"
	"strings"
	"testing"
)

// fulcrum-sim table must print the daemon's table or refuse the input
// (TestTableMatchesDaemon). A backend name the configuration refuses is
// one no daemon builds a table with; the decomposed "cafe\u0301" is worse:
// config tells the operator to write it as "caf\u00e9" (NFC), whose table
// differs, so the simulator's prediction for "the same name" is another
// table than the fleet runs.
func TestTableRefusesNamesTheDaemonRefuses(t *testing.T) {
	for _, name := range []string{
		"cafe\u0301",            // not NFC: config says write "caf\u00e9"
		"web/1",                 // '/' (admin API path segment)
		"..",                    // a path step
		"be\u200b1",             // zero-width space: looks like "be1"
		strings.Repeat("x", 65), // over MaxNameLen
	} {
		var out, errOut bytes.Buffer
		code := run([]string{"table", "--backends", name + ":1,b", "--size", "251", "--summary"}, strings.NewReader(""), &out, &errOut)
		if code != 2 || out.Len() != 0 {
			t.Errorf("backend name %q (refused by config): exit %d, stdout %q; want exit 2 and nothing on stdout", name, code, firstLine(out.String()))
		}
	}
	// NFC "café" is a name the daemon accepts: still a table.
	var out, errOut bytes.Buffer
	if code := run([]string{"table", "--backends", "caf\u00e9,b", "--size", "251", "--summary"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Errorf("caf\u00e9: exit %d: %s", code, errOut.String())
	}
}
