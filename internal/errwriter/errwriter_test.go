package errwriter

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

type failAfter struct {
	n   int
	buf bytes.Buffer
}

var errFull = errors.New("no space left on device")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errFull
	}
	f.n--
	return f.buf.Write(p)
}

// The first error is kept and every later write fails with it, so
// nothing is written after a lost line (a table with a hole in it).
func TestKeepsFirstError(t *testing.T) {
	f := &failAfter{n: 2}
	w := &Writer{W: f}
	for i := range 4 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if !errors.Is(w.Err, errFull) || f.buf.String() != "line 0\nline 1\n" {
		t.Fatalf("err %v, written %q", w.Err, f.buf.String())
	}
}
