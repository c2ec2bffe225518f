package conntrack

import (
	"errors"
	"testing"
	"unsafe"
)

// TestExternalMemory runs a table in memory from Config.Memory (the
// dataplane's hugepage hook): the table takes exactly the two blocks it
// asks for, works as a heap table does, and a refused block fails New.
func TestExternalMemory(t *testing.T) {
	var blocks [][]uint64 // kept so the test's memory outlives the table
	var asked []uintptr
	cfg := DefaultConfig()
	cfg.Capacity = 1024
	cfg.Memory = func(n uintptr) (unsafe.Pointer, error) {
		asked = append(asked, n)
		b := make([]uint64, (n+7)/8+8)
		blocks = append(blocks, b)
		p := unsafe.Pointer(&b[0])
		// 64-byte alignment, as the contract promises.
		if off := uintptr(p) % 64; off != 0 {
			p = unsafe.Add(p, 64-off)
		}
		return p, nil
	}
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !tb.ExternalMemory() {
		t.Fatal("ExternalMemory() = false with Config.Memory set")
	}
	if len(asked) != 2 || int(asked[0]+asked[1]) != tb.Bytes() {
		t.Fatalf("asked for %v bytes, want two blocks summing to Bytes() = %d", asked, tb.Bytes())
	}
	if got, want := uintptr(unsafe.Pointer(&tb.entries[0])), uintptr(unsafe.Pointer(&blocks[0][0])); got < want || got >= want+64 {
		t.Fatalf("entries at %#x, not in the block given at %#x", got, want)
	}
	heap := newTable(t, 1024)
	if heap.ExternalMemory() {
		t.Fatal("a heap table reports external memory")
	}
	for i := 0; i < 600; i++ {
		k := tuple4(i)
		h := testHasher.Hash(&k)
		a := tb.Insert(h, &k, StateEstablished, 1, uint32(i), 1, sec)
		b := heap.Insert(h, &k, StateEstablished, 1, uint32(i), 1, sec)
		if (a == nil) != (b == nil) {
			t.Fatalf("flow %d: insert %v in external memory, %v on the heap", i, a != nil, b != nil)
		}
	}
	for i := 0; i < 600; i++ {
		k := tuple4(i)
		h := testHasher.Hash(&k)
		a, b := tb.Lookup(h, &k, 2*sec), heap.Lookup(h, &k, 2*sec)
		if (a == nil) != (b == nil) || a != nil && a.Backend() != b.Backend() {
			t.Fatalf("flow %d: lookups differ between external and heap memory", i)
		}
	}
	if tb.Len() != heap.Len() {
		t.Fatalf("Len %d in external memory, %d on the heap", tb.Len(), heap.Len())
	}

	refuse := errors.New("no hugepage memory left")
	cfg.Memory = func(uintptr) (unsafe.Pointer, error) { return nil, refuse }
	if _, err := New(cfg); !errors.Is(err, refuse) {
		t.Fatalf("New with refusing Memory: %v, want the allocator's error", err)
	}
}
