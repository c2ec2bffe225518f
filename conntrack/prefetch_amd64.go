package conntrack

// prefetch asks the CPU to bring the cache line at p into every cache level
// (PREFETCHT0) without waiting for it. It never faults, so p need not be a
// valid address. An assembly function cannot be inlined: the call costs
// about a nanosecond, far less than the 40-100 ns miss it starts early.
//
//go:noescape
func prefetch(p uintptr)
