//go:build dpdk

package dpdk

/*
#cgo pkg-config: libdpdk
#cgo LDFLAGS: -lrte_pdump
#include <rte_errno.h>
#include <rte_pdump.h>

// rte_errno is thread-local: read it on the thread that failed.
static int fl_pdump_init(void) { return rte_pdump_init() == 0 ? 0 : -rte_errno; }
static int fl_pdump_uninit(void) { return rte_pdump_uninit() == 0 ? 0 : -rte_errno; }
*/
import "C"

// PdumpInit lets dpdk-dumpcap and dpdk-pdump capture this process's ports:
// rte_pdump_init registers the multi-process handler those tools (DPDK
// secondary processes) ask to mirror a port's rx and tx into their ring.
// The tools attach through the EAL's shared memory, so it is for an EAL
// running on hugepages with the process's --file-prefix; without any
// capture attached it costs the lcores nothing.
func PdumpInit() error {
	if !ealRunning.Load() {
		return ErrNoEAL
	}
	return errno(C.fl_pdump_init())
}

// PdumpUninit removes the handler PdumpInit registered.
func PdumpUninit() error {
	if !ealRunning.Load() {
		return ErrNoEAL
	}
	return errno(C.fl_pdump_uninit())
}
