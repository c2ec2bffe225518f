package sim

import (
	"bytes"
	"strings"
	"testing"
)

// A line longer than the reader's limit (1 MiB) is a bad line like any
// other: reported with its number and skipped, and the commands after it
// run ("a bad line is reported on stderr and skipped"). It used to end the
// whole run with "token too long", dropping every later command.
func TestPoolRunOverlongLineSkipped(t *testing.T) {
	p, err := NewPool([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	long := "DONE a " + strings.Repeat("1", 2<<20)
	in := "PICK\n" + long + "\nPICK\nDONE a 100\n" + strings.Repeat("x", 3<<20) + "\nSTATUS"
	var out, errOut bytes.Buffer
	rejected, err := p.Run(strings.NewReader(in), &out, &errOut)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rejected != 2 {
		t.Errorf("%d lines rejected, want 2 (the two overlong ones)", rejected)
	}
	// PICK -> a; the overlong DONE is skipped, so a holds 1 and is still
	// cold: PICK -> a again (0 × 2 ties b's 0 × 1; the exercise's cold-start
	// trap, ties to the smaller name); DONE a 100 -> a at 100.000, 1 in
	// flight.
	want := "a\na\na ewma=100.000 inflight=1\nb ewma=0.000 inflight=0\n"
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if !strings.Contains(errOut.String(), "line 2:") || !strings.Contains(errOut.String(), "line 5:") {
		t.Errorf("errors %q: want lines 2 and 5 reported", errOut.String())
	}
}

// A line just under 1 MiB is still read and obeyed (the control).
func TestPoolRunLineAtLimit(t *testing.T) {
	p, _ := NewPool([]string{"a"})
	line := "DONE a 7" + strings.Repeat(" ", 1<<20-1-len("DONE a 7"))
	var out, errOut bytes.Buffer
	rejected, err := p.Run(strings.NewReader(line+"\nSTATUS\n"), &out, &errOut)
	if err != nil || rejected != 0 || out.String() != "a ewma=7.000 inflight=0\n" {
		t.Fatalf("rejected %d, err %v, output %q, errors %q", rejected, err, out.String(), errOut.String())
	}
}
