package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // exact, if not empty
		has    string // stdout or stderr must contain this
	}{
		// The slots agree with testdata/reference.py in package maglev:
		// python3 reference.py 7 a b:2 c
		{"table", []string{"table", "--backends", "a,b:2,c", "--size", "7"}, 0,
			"0 c\n1 b\n2 c\n3 a\n4 a\n5 b\n6 b\n", ""},
		{"table input order", []string{"table", "--backends", "c,a:1,b:2", "--size", "7"}, 0,
			"0 c\n1 b\n2 c\n3 a\n4 a\n5 b\n6 b\n", ""},
		{"summary", []string{"table", "--backends", "a,b:2,c", "--size", "7", "--summary"}, 0,
			"table size 7, 3 backends (in key order)\n" +
				"backend  weight  slots  share\n" +
				"a        1       2      28.57%\n" +
				"b        2       3      42.86%\n" +
				"c        1       2      28.57%\n", ""},
		{"name with colons", []string{"table", "--backends", "[2001:db8::1]:80:1,10.0.0.1:80:0,x", "--size", "5", "--summary"}, 0, "", "[2001:db8::1]:80  1"},
		{"default size", []string{"table", "--backends", "a", "--summary"}, 0, "", "table size 65537"},
		{"weight not a number", []string{"table", "--backends", "a,b:x"}, 2, "", `backend #2 "b:x": weight "x" is not a whole number`},
		{"negative weight", []string{"table", "--backends", "a:-1"}, 2, "", `weight "-1" is negative`},
		{"weight too large", []string{"table", "--backends", "a:4294967296"}, 2, "", "too large"},
		{"empty name", []string{"table", "--backends", "a,,b"}, 2, "", `backend #2 "": empty name`},
		{"empty name with weight", []string{"table", "--backends", ":2"}, 2, "", "empty name"},
		{"size not prime", []string{"table", "--backends", "a", "--size", "65536"}, 2, "", "table size 65536: not prime"},
		{"size not a number", []string{"table", "--backends", "a", "--size", "big"}, 2, "", `invalid value "big" for flag -size`},
		{"too many backends", []string{"table", "--backends", "a,b,c", "--size", "3"}, 2, "", "more backends than slots"},
		{"duplicate", []string{"table", "--backends", "a,b,a"}, 2, "", `backend "a": duplicate key`},
		{"all drained", []string{"table", "--backends", "a:0"}, 2, "", "all weights are zero"},
		{"no backends flag", []string{"table"}, 2, "", "--backends is required"},
		{"unknown flag", []string{"table", "--nope"}, 2, "", "flag provided but not defined: -nope"},
		{"positional", []string{"table", "--backends", "a", "b"}, 2, "", `unexpected argument "b"`},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"no command", nil, 2, "", "usage: fulcrum-sim"},
		{"help", []string{"help"}, 0, "", "usage: fulcrum-sim"},
		{"subcommand help", []string{"hashing", "-h"}, 0, "", "-flows"},
		{"hashing bad flows", []string{"hashing", "--flows", "-5"}, 2, "", "--flows -5"},
		{"hashing bad seed", []string{"hashing", "--seed", "-1"}, 2, "", `invalid value "-1" for flag -seed`},
		{"hashing", []string{"hashing", "--flows", "500000", "--seed", "7"}, 0, "",
			"N=10  ring, 100 vnodes  load max/min 1.240/0.801  flows moved  8.97%  of which needlessly  0.00%"},

		{"policies", []string{"policies"}, 0, "", "policy                   mean       p99\nrandom              "},
		{"policies small", []string{"policies", "--servers", "4", "--load", "0.5", "--requests", "5000", "--seed", "9"}, 0, "",
			"4 servers at 50% load, 5000 requests, seed 9"},
		{"policies bad load", []string{"policies", "--load", "1"}, 2, "", "load 1: must be above 0 and below 1"},
		{"policies bad servers", []string{"policies", "--servers", "0"}, 2, "", "servers 0: must be between 1 and 10000"},
		{"policies positional", []string{"policies", "x"}, 2, "", `unexpected argument "x"`},
		{"policies help", []string{"policies", "-h"}, 0, "", "-servers"},
		{"slow", []string{"slow"}, 0, "", "section 4.2: 4 servers, s1-s3 at 2 ms, s4 at 50 ms\nrule  "},
		{"slow small", []string{"slow", "--clients", "4", "--requests", "800", "--warmup", "0", "--seed", "2"}, 0, "",
			"4 clients in a closed loop, 800 requests measured after 0, seed 2"},
		{"slow bad clients", []string{"slow", "--clients", "-1"}, 2, "", "clients -1: must be between 1"},
		{"slow help", []string{"slow", "-h"}, 0, "", "-warmup"},

		{"ewma no backends", []string{"ewma"}, 2, "", "no backends"},
		{"ewma duplicate", []string{"ewma", "a", "a"}, 2, "", `backend "a": named twice`},
		{"ewma help", []string{"ewma", "-h"}, 0, "", "PICK              print the backend"},
		{"ewma unknown flag", []string{"ewma", "-x"}, 2, "", "flag provided but not defined: -x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &out, &errOut)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			if tc.stdout != "" && out.String() != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), tc.stdout)
			}
			if tc.has != "" && !strings.Contains(out.String()+errOut.String(), tc.has) {
				t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", tc.has, out.String(), errOut.String())
			}
			if tc.code != 0 && errOut.Len() == 0 {
				t.Error("failed without a message on stderr")
			}
		})
	}
}

// TestRunEWMA feeds the ewma command on stdin.
func TestRunEWMA(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // exact, if not empty
		has    string // stderr must contain this
		stdin  string
	}{
		// The exercise's worked example, through the command.
		{"ewma", []string{"ewma", "a"}, 0,
			"a\na ewma=100.000 inflight=0\na\na ewma=130.000 inflight=0\na\na ewma=391.000 inflight=0\n", "",
			"PICK\nDONE a 100\nSTATUS\nPICK\nDONE a 200\nSTATUS\nPICK\nDONE a 1000\nSTATUS\n"},
		{"ewma sorted, ties to the smaller name", []string{"ewma", "b2", "b10", "a"}, 0,
			"a\na\na ewma=0.000 inflight=2\nb10 ewma=0.000 inflight=0\nb2 ewma=0.000 inflight=0\n", "",
			"PICK\nPICK\nSTATUS\n"},
		{"ewma bad line carries on", []string{"ewma", "a", "b"}, 0, "", `fulcrum-sim ewma: line 1: DONE: unknown backend "c" (backends: a, b)`,
			"DONE c 5\nPICK\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, strings.NewReader(tc.stdin), &out, &errOut)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, tc.code, errOut.String())
			}
			if tc.stdout != "" && out.String() != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), tc.stdout)
			}
			if tc.has != "" && !strings.Contains(errOut.String(), tc.has) {
				t.Errorf("stderr lacks %q: %s", tc.has, errOut.String())
			}
			if tc.has == "" && errOut.Len() != 0 {
				t.Errorf("unexpected stderr: %s", errOut.String())
			}
		})
	}
}

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, bytes.ErrTooLarge }

func TestRunOutputError(t *testing.T) {
	var errOut bytes.Buffer
	for _, args := range [][]string{
		{"table", "--backends", "a"},
		{"policies", "--requests", "100"},
		{"slow", "--requests", "100"},
		{"ewma", "a"},
	} {
		errOut.Reset()
		if code := run(args, strings.NewReader("PICK\n"), errWriter{}, &errOut); code != 1 {
			t.Errorf("%s: exit %d on a failing stdout, want 1 (stderr %q)", args[0], code, errOut.String())
		}
	}
}
