// Package prefetch asks the CPU to start loading a cache line without
// waiting for it: the dataplane's tables (conntrack's signature words and
// entry lines, a Maglev table's slots) are read in passes over a burst,
// and a line prefetched in one pass has arrived by the next.
//
// Line is one PREFETCHT0 on amd64 and a no-op elsewhere. Go has no
// prefetch intrinsic for programs, and an assembly function cannot be
// inlined: a call costs about a nanosecond, far less than the 40-100 ns
// miss it starts early.
package prefetch
