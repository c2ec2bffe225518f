package sim

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestPoolRun(t *testing.T) {
	tests := []struct {
		name     string
		backends []string
		in       string
		out      string
		errs     []string // each must appear in stderr, one line per rejected command
	}{
		{
			name:     "worked example",
			backends: []string{"a"},
			in:       "PICK\nDONE a 100\nSTATUS\nPICK\nDONE a 200\nSTATUS\nPICK\nDONE a 1000\nSTATUS\n",
			out:      "a\na ewma=100.000 inflight=0\na\na ewma=130.000 inflight=0\na\na ewma=391.000 inflight=0\n",
		},
		{
			// The cold-start trap, kept on purpose: unscored backends
			// cost 0 and the first by name takes every pick until its
			// first DONE.
			name:     "cold start",
			backends: []string{"c", "a", "b"},
			in:       "PICK\nPICK\nPICK\nSTATUS\nDONE a 10\nPICK\nPICK\nSTATUS\n",
			out: "a\na\na\n" +
				"a ewma=0.000 inflight=3\nb ewma=0.000 inflight=0\nc ewma=0.000 inflight=0\n" +
				"b\nb\n" +
				"a ewma=10.000 inflight=2\nb ewma=0.000 inflight=2\nc ewma=0.000 inflight=0\n",
		},
		{
			// "A backend that answers in 10 ms but already holds 9
			// requests costs 10 * 10 = 100, the same as an idle backend
			// averaging 100 ms": the tie goes to the smaller name, the
			// next pick to the idle one.
			name:     "latency times load",
			backends: []string{"slow", "fast"},
			in:       "DONE slow 100\nDONE fast 10\n" + strings.Repeat("PICK\n", 11) + "STATUS\n",
			out: strings.Repeat("fast\n", 10) + "slow\n" +
				"fast ewma=10.000 inflight=10\nslow ewma=100.000 inflight=1\n",
		},
		{
			name:     "inflight never below 0, first sample not blended with 0",
			backends: []string{"x"},
			in:       "DONE x 7\nDONE x 7\nSTATUS\n",
			out:      "x ewma=7.000 inflight=0\n",
		},
		{
			name:     "truncating division and decimals",
			backends: []string{"x"},
			in:       "DONE x 0.001\nDONE x 0.002\nSTATUS\nDONE x 12.5\nSTATUS\n",
			out:      "x ewma=0.001 inflight=0\nx ewma=3.750 inflight=0\n",
		},
		{
			name:     "bad lines are reported and skipped",
			backends: []string{"a", "b"},
			in:       "FOO\npick\nPICK now\nDONE zz 5\nDONE a\nDONE a x\nDONE a -3\nDONE a 1.2345\n\n  PICK  \nSTATUS\n",
			out:      "a\na ewma=0.000 inflight=1\nb ewma=0.000 inflight=0\n",
			errs: []string{
				`line 1: unknown command "FOO" (want PICK, DONE <name> <ms> or STATUS)`,
				`line 2: unknown command "pick"`,
				"line 3: PICK takes no arguments",
				`line 4: DONE: unknown backend "zz" (backends: a, b)`,
				"line 5: DONE takes a backend and a latency: DONE <name> <ms>",
				`line 6: DONE a: latency "x": not a number of milliseconds`,
				`line 7: DONE a: latency "-3": negative`,
				`line 8: DONE a: latency "1.2345": more than three decimals`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPool(tc.backends)
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			rejected, err := p.Run(strings.NewReader(tc.in), &out, &errOut)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.out {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), tc.out)
			}
			if rejected != len(tc.errs) || strings.Count(errOut.String(), "\n") != len(tc.errs) {
				t.Errorf("%d rejected, stderr:\n%s\nwant %d lines", rejected, errOut.String(), len(tc.errs))
			}
			for _, e := range tc.errs {
				if !strings.Contains(errOut.String(), "fulcrum-sim ewma: "+e) {
					t.Errorf("stderr lacks %q:\n%s", e, errOut.String())
				}
			}
		})
	}
}

func TestNewPoolErrors(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, "no backends"},
		{[]string{"a", "b", "a"}, `backend "a": named twice`},
		{[]string{""}, "empty"},
		{[]string{"a b"}, "white space"},
	} {
		if _, err := NewPool(tc.names); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPool(%q) = %v, want %q", tc.names, err, tc.want)
		}
	}
}

func TestParseMillis(t *testing.T) {
	for _, tc := range []struct {
		in  string
		us  int64
		bad string
	}{
		{"0", 0, ""}, {"100", 100_000, ""}, {"12.5", 12_500, ""}, {"0.125", 125, ""}, {"1.05", 1_050, ""},
		{"4294967.295", 4294967295, ""},
		{"4294967.296", 0, "above the largest latency kept, 4294967.295 ms"},
		{"99999999999999999999", 0, "above the largest"},
		{"-1", 0, "negative"}, {"1.", 0, "not a number"}, {".5", 0, "not a number"}, {"1e3", 0, "not a number"},
		{"+1", 0, "not a number"}, {"", 0, "not a number"}, {"1.0001", 0, "three decimals"},
	} {
		us, err := ParseMillis(tc.in)
		switch {
		case tc.bad == "" && (err != nil || us != tc.us):
			t.Errorf("ParseMillis(%q) = %d, %v; want %d", tc.in, us, err, tc.us)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("ParseMillis(%q) = %d, %v; want an error with %q", tc.in, us, err, tc.bad)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestPoolRunOutputError(t *testing.T) {
	p, _ := NewPool([]string{"a"})
	_, err := p.Run(strings.NewReader("PICK\n"), failWriter{}, &bytes.Buffer{})
	if !IsOutputError(err) {
		t.Errorf("Run on a failing writer: %v", err)
	}
}
