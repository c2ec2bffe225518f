package prefetch

// Line asks the CPU to bring the cache line at p into every cache level
// (PREFETCHT0) without waiting for it. It never faults, so p need not be a
// valid address.
//
//go:noescape
func Line(p uintptr)
