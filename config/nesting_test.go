package config

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// A configuration nested deep (arrays or inline tables inside each
// other, a dotted key or table header of thousands of parts) costs the
// decoder and the line locator time and memory quadratic in the depth: a
// file of a few KB, far under MaxFileSize, takes gigabytes and minutes to
// refuse (measured: 20000 nested inline tables, 80 KB, 25 GB and 100 s in
// toml.Decode alone). A reload reads it on the daemon's main loop, so a
// careless generator or a mangled file OOM-kills or stalls the daemon
// (and `fulcrum check`). Measured here before the fix: 3000 nested
// inline tables in a 12 KB file, 119 GB allocated and 165 s; a dotted key
// of 3000 parts (6 KB), 1.2 GB. Parse must refuse such a file cheaply, at the
// line of the construct, as an Errors.
func TestDeepNestingIsBounded(t *testing.T) {
	const n = 3000
	const maxAlloc = 64 << 20 // far more than any refusal of a 12 KB file needs
	for _, tc := range []struct {
		name string
		deep string
	}{
		{"nested arrays", "x = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n"},
		{"nested inline tables", "x = " + strings.Repeat("{a=", n/4) + "1" + strings.Repeat("}", n/4) + "\n"},
		{"dotted key", strings.Repeat("a.", n) + "a = 1\n"},
		{"table header", "[" + strings.Repeat("a.", n) + "a]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(base + tc.deep)
			wantLine := strings.Count(base, "\n") + 1
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Parse(data, "deep.toml")
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse of %d bytes: %v, want Errors", len(data), err)
			}
			if es[0].File != "deep.toml" || es[0].Line != wantLine {
				t.Errorf("problem at %s:%d, want deep.toml:%d", es[0].File, es[0].Line, wantLine)
			}
			if alloc > maxAlloc {
				t.Errorf("Parse of a %d-byte file allocated %d MiB (> %d MiB)", len(data), alloc>>20, maxAlloc>>20)
			}
		})
	}
}
