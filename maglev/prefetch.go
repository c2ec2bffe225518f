package maglev

import "unsafe"

// SlotLine is the address of the slot Lookup(hash) will read. The
// dataplane prefetches the slots of a burst's conntrack misses, in one
// call (prefetch.Lines), before it looks any of them up: a table of
// 65,537 slots is 128 KiB, which a flood of new flows keeps pushing out of
// the core's caches.
func (t *Table) SlotLine(hash uint64) uintptr {
	i := uintptr(t.index(hash))
	if t.slots16 != nil {
		return uintptr(unsafe.Pointer(unsafe.SliceData(t.slots16))) + 2*i
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(t.slots32))) + 4*i
}
