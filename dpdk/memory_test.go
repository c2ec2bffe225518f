//go:build dpdk

package dpdk

import (
	"testing"
	"unsafe"
)

// TestZmalloc takes memory from the EAL's heap: zeroed, aligned as asked,
// writable to its last byte, and given back; a zero size is an error, and
// a size past the EAL's -m a clear one.
func TestZmalloc(t *testing.T) {
	const n = 1 << 20
	p, err := Zmalloc("fulcrum_test", n, 64, SocketAny)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(p)
	if uintptr(p)%64 != 0 {
		t.Errorf("%p is not 64-byte aligned", p)
	}
	b := unsafe.Slice((*byte)(p), n)
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d is %#x, want zeroed memory", i, v)
		}
	}
	b[0], b[n-1] = 1, 2
	if _, err := Zmalloc("fulcrum_test", 0, 0, SocketAny); err == nil {
		t.Error("Zmalloc of 0 bytes succeeded")
	}
	// main_test.go starts the EAL with -m 256: 1 GiB cannot be had.
	if q, err := Zmalloc("fulcrum_test_huge", 1<<30, 64, SocketAny); err == nil {
		Free(q)
		t.Error("Zmalloc of 1 GiB succeeded under -m 256")
	}
	if HasHugepages() {
		t.Error("HasHugepages() = true under --no-huge")
	}
}
