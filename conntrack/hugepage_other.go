//go:build !linux

package conntrack

import "unsafe"

// adviseHugePages is a no-op where transparent huge pages are not known.
func adviseHugePages(p unsafe.Pointer, n uintptr) {}
