package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
)

// fulcrum-sim table must print the daemon's table "or refuse the input;
// never print another table" (TestTableMatchesDaemon). A weight above
// config.MaxWeight (65535) is one the daemon never builds a table with:
// `fulcrum check` rejects it and so does every reload. The simulator
// printed a table for it (exit 0), up to 4294967295, so an operator who
// explores weights of 100000:1 gets a distribution no deployment can have.
func TestTableRefusesWeightsTheDaemonRefuses(t *testing.T) {
	w := config.MaxWeight + 1
	var out, errOut bytes.Buffer
	code := run([]string{"table", "--backends", fmt.Sprintf("a:%d,b", w), "--size", "251", "--summary"}, strings.NewReader(""), &out, &errOut)
	if code != 2 || out.Len() != 0 {
		t.Errorf("weight %d (config allows 0..%d): exit %d, stdout %q; want exit 2 and nothing on stdout", w, config.MaxWeight, code, firstLine(out.String()))
	}
	// The largest weight the daemon accepts still gives a table.
	out.Reset()
	if code := run([]string{"table", "--backends", fmt.Sprintf("a:%d,b", config.MaxWeight), "--size", "251", "--summary"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Errorf("weight %d: exit %d: %s", config.MaxWeight, code, errOut.String())
	}
}
