//go:build dpdk

package dpdk

/*
#include <stdlib.h>
int fl_probe_ctrl_log(const char *msg, int count, int panic, int *tid);
void fl_probe_log(const char *msg, int panic);
int fl_probe_ctrl_head(const char *head, size_t n);
void fl_probe_ctrl_finish(void);
*/
import "C"

import "unsafe"

// For the package's tests (log_test.go): DPDK log lines written from one
// of the EAL's control threads and from the calling thread.

// probeCtrlLog logs msg count times at error level from a control
// thread the EAL starts, and returns once that thread has ended, with its
// thread id. With panic, the thread then calls rte_panic with msg, which
// ends the process.
func probeCtrlLog(msg string, count int, panic bool) (tid int, err error) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	var t C.int
	if rc := C.fl_probe_ctrl_log(cs, C.int(count), cbool(panic), &t); rc < 0 {
		return 0, Errno(-rc)
	}
	return int(t), nil
}

// probeLog logs msg at error level from the calling goroutine's thread;
// with panic, it then calls rte_panic with msg, which ends the process.
func probeLog(msg string, panic bool) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.fl_probe_log(cs, cbool(panic))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// probeCtrlHead has a control thread write head, with no newline, to
// DPDK's log stream, and returns once it has; the returned func has the
// thread end the line, and waits for it.
func probeCtrlHead(head string) (finish func(), err error) {
	cs := C.CString(head)
	if rc := C.fl_probe_ctrl_head(cs, C.size_t(len(head))); rc < 0 {
		C.free(unsafe.Pointer(cs))
		return nil, Errno(-rc)
	}
	return func() {
		C.fl_probe_ctrl_finish()
		C.free(unsafe.Pointer(cs))
	}, nil
}
