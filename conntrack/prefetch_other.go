//go:build !amd64

package conntrack

// prefetch is a no-op where Fulcrum has no prefetch instruction: the
// lookups still run in independent passes (see lookupBurst).
func prefetch(p uintptr) {}
