package maglev

import (
	"unsafe"

	"github.com/fulcrumlb/fulcrum/internal/prefetch"
)

// Prefetch starts loading the slot Lookup(hash) will read, without
// waiting for it: the dataplane calls it for a burst's conntrack misses
// before it looks any of them up (a table of 65,537 slots is 128 KiB,
// which a flood of new flows keeps pushing out of the core's caches).
func (t *Table) Prefetch(hash uint64) { prefetch.Line(t.SlotLine(hash)) }

// SlotLine is the address Prefetch prefetches, for a caller that gathers a
// burst's addresses and prefetches them in one call (prefetch.Lines).
func (t *Table) SlotLine(hash uint64) uintptr {
	i := uintptr(t.index(hash))
	if t.slots16 != nil {
		return uintptr(unsafe.Pointer(unsafe.SliceData(t.slots16))) + 2*i
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(t.slots32))) + 4*i
}
