//go:build dpdk

package dpdk

/*
#include <stdlib.h>
#include <rte_malloc.h>
#include <rte_eal.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// HasHugepages reports whether the EAL runs on hugepages (false under
// --no-huge).
func HasHugepages() bool { return C.rte_eal_has_hugepages() != 0 }

// Zmalloc returns size bytes of zeroed memory from the EAL's heap (its
// hugepages unless --no-huge) on NUMA socket socket (SocketAny: any),
// aligned to align bytes (a power of two; 0: a cache line). The Go
// garbage collector does not see it: it may hold no Go pointers, and it
// stays valid until Free. The name shows in DPDK's memory dumps.
func Zmalloc(name string, size uintptr, align uint, socket int) (unsafe.Pointer, error) {
	if size == 0 {
		return nil, fmt.Errorf("dpdk: zmalloc %s: zero size", name)
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	p := C.rte_zmalloc_socket(cn, C.size_t(size), C.unsigned(align), C.int(socket))
	if p == nil {
		return nil, fmt.Errorf("dpdk: zmalloc %s: %d bytes on socket %d: no memory left in the EAL's heap (raise [eal] memory_mb, or reserve more hugepages)", name, size, socket)
	}
	return p, nil
}

// Free returns memory from Zmalloc to the EAL's heap.
func Free(p unsafe.Pointer) { C.rte_free(p) }
