package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -size 0 is outside the 64..1518 the help states; it was taken as the
// default (64), and the summary said "size 0" of a file of 64-byte frames.
func TestSizeZeroRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.pcap")
	var o, e bytes.Buffer
	code := run([]string{"-o", out, "-n", "1", "-size", "0"}, &o, &e)
	if code != 2 || !strings.Contains(e.String(), "size 0") {
		t.Errorf("-size 0: exit %d, stdout %q, stderr %q; want exit 2 naming size 0", code, o.String(), e.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("-size 0 wrote %s", out)
	}
}
