package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildBench builds this command (it parses the process's own command
// line) into a temporary directory.
func buildBench(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fulcrum-bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// A bad command line is refused (exit 2, the message naming the
// argument) before anything runs or is printed. Before: a positional
// argument ("fulcrum-bench syn-1m", meant as -only) and every flag after
// it were dropped and the whole suite ran; -retries -1 measured no pair
// at all and printed a summary of zeros with exit 0; -window 0 measured
// one stats interval as "the window", a negative -warmup or -max-other
// was taken. Here -bin names an empty directory, so a run that is not
// refused fails later (exit 1, no fulcrum-gen) after printing its header.
func TestBenchBadCommandLineRefused(t *testing.T) {
	bench := buildBench(t)
	cases := []struct {
		args []string
		name string // what stderr must name
	}{
		{[]string{"syn-1m"}, "syn-1m"},
		{[]string{"-quick", "est-10k", "-pairs", "5"}, "est-10k"},
		{[]string{"-retries", "-1"}, "-retries"},
		{[]string{"-window", "0s"}, "-window"},
		{[]string{"-window", "-5s"}, "-window"},
		{[]string{"-warmup", "-1s"}, "-warmup"},
		{[]string{"-max-other", "-0.5"}, "-max-other"},
		{[]string{"-max-other", "NaN"}, "-max-other"},
	}
	for _, tc := range cases {
		base := []string{"-bin", t.TempDir(), "-work", t.TempDir(), "-cache", t.TempDir(), "-prefix", "fulcrum-argtest-bench"}
		cmd := exec.Command(bench, append(base, tc.args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != 2 || !strings.Contains(errb.String(), tc.name) || out.Len() != 0 {
			t.Errorf("fulcrum-bench %q: exit %d, stderr %q, %d bytes on stdout; want exit 2 naming %q before anything is printed",
				tc.args, code, errb.String(), out.Len(), tc.name)
		}
	}
}
