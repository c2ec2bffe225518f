package prefetch

// Line asks the CPU to bring the cache line at p into every cache level
// (PREFETCHT0) without waiting for it. It never faults, so p need not be a
// valid address.
//
//go:noescape
func Line(p uintptr)

// Lines is Line for every address of addrs, in one call: the call, not the
// instruction, is most of a prefetch's cost from Go.
//
//go:noescape
func Lines(addrs []uintptr)
