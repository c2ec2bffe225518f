package prefetch

import (
	"runtime"
	"testing"
	"unsafe"
)

// Prefetching never faults and changes nothing: any address, valid or
// not, an empty list, a long one.
func TestPrefetchAnyAddress(t *testing.T) {
	b := make([]byte, 4096)
	Line(0)
	Line(^uintptr(0))
	Lines(nil)
	addrs := []uintptr{0, 1, ^uintptr(0), uintptr(len(b))}
	for i := range b {
		b[i] = byte(i)
	}
	Lines(addrs)
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
}

// 32 cache lines of a buffer, one call each and in one call.
func BenchmarkLine(b *testing.B) {
	addrs := lines(b)
	for b.Loop() {
		for _, p := range addrs {
			Line(p)
		}
	}
}

func BenchmarkLines(b *testing.B) {
	addrs := lines(b)
	for b.Loop() {
		Lines(addrs)
	}
}

func lines(b *testing.B) []uintptr {
	buf := make([]byte, 64*33)
	base := (uintptr(unsafe.Pointer(&buf[0])) + 63) &^ 63
	addrs := make([]uintptr, 32)
	for i := range addrs {
		addrs[i] = base + uintptr(i*64)
	}
	b.Cleanup(func() { runtime.KeepAlive(buf) })
	return addrs
}

// Eights hands over a pass's addresses once eight wait, and only then.
func TestEights(t *testing.T) {
	var lines [20]uintptr
	sent := 0
	var flushedAt []int
	for n := 1; n <= len(lines); n++ {
		if s := Eights(lines[:], sent, n); s != sent {
			if s != n {
				t.Fatalf("at %d: sent moved to %d, want %d", n, s, n)
			}
			flushedAt = append(flushedAt, n)
			sent = s
		}
	}
	if len(flushedAt) != 2 || flushedAt[0] != 8 || flushedAt[1] != 16 || sent != 16 {
		t.Fatalf("flushed at %v, sent %d; want at 8 and 16, sent 16", flushedAt, sent)
	}
}
