//go:build dpdk

package dpdk

/*
#cgo pkg-config: libdpdk
#cgo LDFLAGS: -lrte_net_ring -lrte_bus_vdev
#include "fulcrum_dpdk.h"
*/
import "C"

import (
	"syscall"
)

// Errno is a DPDK error code (an errno value or one of DPDK's own
// RTE_* codes). Its message is DPDK's own, from rte_strerror, and it
// matches the syscall.Errno of the same value under errors.Is, so
// callers can test errors.Is(err, syscall.ENODEV).
type Errno int

// Error returns rte_strerror's text for e.
func (e Errno) Error() string {
	return C.GoString(C.rte_strerror(C.int(e)))
}

// Is reports whether target is the syscall.Errno with the same value.
func (e Errno) Is(target error) bool {
	t, ok := target.(syscall.Errno)
	return ok && int(t) == int(e)
}

// errno turns a DPDK return value (0 or a negative errno) into an error.
func errno(ret C.int) error {
	if ret == 0 {
		return nil
	}
	if ret < 0 {
		ret = -ret
	}
	return Errno(ret)
}
