//go:build linux

package main

import (
	"log/slog"
	"syscall"
	"testing"
)

func TestRaiseNoFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	if orig.Max < 128 {
		t.Skipf("hard limit %d too low to lower the soft one below it", orig.Max)
	}
	low := syscall.Rlimit{Cur: 64, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	cur, max := raiseNoFileLimit(slog.New(slog.DiscardHandler))
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != orig.Max || now.Max != orig.Max || cur != orig.Max || max != orig.Max {
		t.Errorf("after raising: soft %d hard %d (returned %d %d), want both %d", now.Cur, now.Max, cur, max, orig.Max)
	}
}
