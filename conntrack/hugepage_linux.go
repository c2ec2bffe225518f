//go:build linux

package conntrack

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of an x86-64 / arm64 transparent huge page.
const hugePage = 2 << 20

// adviseHugePages asks the kernel to back the whole 2 MiB pages inside
// [p, p+n) with transparent huge pages (MADV_HUGEPAGE). Best effort: an
// error (a kernel without THP) leaves ordinary pages.
func adviseHugePages(p unsafe.Pointer, n uintptr) {
	off := (hugePage - uintptr(p)%hugePage) % hugePage
	if n < off+hugePage {
		return
	}
	b := unsafe.Slice((*byte)(p), n)
	_ = syscall.Madvise(b[off:off+(n-off)&^(hugePage-1)], syscall.MADV_HUGEPAGE)
}
