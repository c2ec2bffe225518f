package main

import (
	"bytes"
	"regexp"
	"testing"
)

// A load so low that the arrival times outgrow float64's precision (or
// overflow to +Inf) printed a table of "NaN ms", or latencies of 0.00 ms for
// servers that take 1 ms a request, with exit status 0. Such a load is now
// refused like any other out-of-range value: exit status 2, nothing on
// stdout. The lowest accepted load still gives the right answer (at low
// load a request waits for nobody: mean time in the system 1 ms).
func TestPoliciesTinyLoadRefused(t *testing.T) {
	for _, load := range []string{"1e-320", "1e-300", "1e-12"} {
		var out, errb bytes.Buffer
		code := run([]string{"policies", "--load", load, "--requests", "1000", "--servers", "1"}, nil, &out, &errb)
		if code != 2 || out.Len() != 0 {
			t.Errorf("--load %s: exit %d, %d bytes on stdout (%q); want exit 2 and none", load, code, out.Len(), firstLine(out.String()))
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"policies", "--load", "0.0001", "--requests", "20000", "--servers", "1"}, nil, &out, &errb); code != 0 {
		t.Fatalf("--load 0.0001: exit %d: %s", code, errb.String())
	}
	if !regexp.MustCompile(`(?m)^random +(0\.9[5-9]|1\.0[0-5]) ms`).Match(out.Bytes()) {
		t.Errorf("--load 0.0001: want random's mean within 5%% of 1 ms, got\n%s", out.String())
	}
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
