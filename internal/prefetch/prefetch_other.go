//go:build !amd64

package prefetch

// Line is a no-op where Fulcrum has no prefetch instruction: the tables
// are still read in independent passes, which lets the CPU overlap the
// misses it can.
func Line(p uintptr) {}

// Lines is a no-op, as Line.
func Lines(addrs []uintptr) {}
