package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestCPUProfile: the profile is a gzip-compressed pprof protobuf, written
// when the profiler stops; an existing file is refused, not overwritten.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startCPUProfile(path); err == nil {
		t.Fatal("a second profile into the same file was accepted")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	raw, err := io.ReadAll(z)
	if err != nil || len(raw) == 0 {
		t.Fatalf("profile body: %d bytes, %v", len(raw), err)
	}
	// The file kept its content: the refused second start did not truncate it.
	if _, err := startCPUProfile(path); err == nil {
		t.Fatal("an existing profile was accepted as a new file")
	}
	if b2, _ := os.ReadFile(path); !bytes.Equal(b, b2) {
		t.Fatal("a refused start changed the existing profile")
	}
}
