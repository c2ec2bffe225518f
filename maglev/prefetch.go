package maglev

import (
	"unsafe"

	"github.com/fulcrumlb/fulcrum/internal/prefetch"
)

// Prefetch starts loading the slot Lookup(hash) will read, without
// waiting for it: the dataplane calls it for a burst's conntrack misses
// before it looks any of them up (a table of 65,537 slots is 128 KiB,
// which a flood of new flows keeps pushing out of the core's caches).
func (t *Table) Prefetch(hash uint64) {
	i := uintptr(t.index(hash))
	if t.slots16 != nil {
		prefetch.Line(uintptr(unsafe.Pointer(unsafe.SliceData(t.slots16))) + 2*i)
		return
	}
	prefetch.Line(uintptr(unsafe.Pointer(unsafe.SliceData(t.slots32))) + 4*i)
}
