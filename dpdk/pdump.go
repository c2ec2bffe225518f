//go:build dpdk

package dpdk

/*
#cgo pkg-config: libdpdk
#cgo LDFLAGS: -lrte_pdump
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_pause.h>
#include <rte_pdump.h>

// rte_errno is thread-local: read it on the thread that failed.
static int fl_pdump_init(void) { return rte_pdump_init() == 0 ? 0 : -rte_errno; }
static int fl_pdump_uninit(void) { return rte_pdump_uninit() == 0 ? 0 : -rte_errno; }

// For TestRemoveCallbackWaits: an rx callback that stays in until released.
extern int fl_burst_waiting;
static int fl_cb_entered, fl_cb_release, fl_cb_done;
static uint16_t
fl_blocking_cb(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n,
	       uint16_t max, void *arg)
{
	(void)port; (void)queue; (void)pkts; (void)max; (void)arg;
	__atomic_store_n(&fl_cb_entered, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&fl_cb_release, __ATOMIC_ACQUIRE))
		rte_pause();
	__atomic_store_n(&fl_cb_done, 1, __ATOMIC_RELEASE);
	return n;
}
static const struct rte_eth_rxtx_callback *fl_test_cb;
static int fl_test_add_cb(uint16_t port) {
	fl_cb_entered = fl_cb_release = fl_cb_done = 0;
	fl_test_cb = rte_eth_add_rx_callback(port, 0, fl_blocking_cb, NULL);
	return fl_test_cb == NULL ? -rte_errno : 0;
}
// Removes the callback as pdump does; *done: whether the callback had
// returned when the removal did.
static int fl_test_remove_cb(uint16_t port, int *done) {
	int ret = rte_eth_remove_rx_callback(port, 0, fl_test_cb);
	*done = __atomic_load_n(&fl_cb_done, __ATOMIC_ACQUIRE);
	return ret;
}
static int fl_test_entered(void) { return __atomic_load_n(&fl_cb_entered, __ATOMIC_ACQUIRE); }
static int fl_test_waiting(void) { return __atomic_load_n(&fl_burst_waiting, __ATOMIC_ACQUIRE); }
static void fl_test_release(void) { __atomic_store_n(&fl_cb_release, 1, __ATOMIC_RELEASE); }
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

// The hooks of TestRemoveCallbackWaits (cgo is not for _test files).

func testAddBlockingRxCallback(port uint16) error { return errno(C.fl_test_add_cb(C.uint16_t(port))) }

func testRemoveRxCallback(port uint16) (done bool, err error) {
	var d C.int
	err = errno(C.fl_test_remove_cb(C.uint16_t(port), &d))
	return d != 0, err
}

func testCallbackEntered() bool { return C.fl_test_entered() != 0 }
func testQuiesceWaiting() bool  { return C.fl_test_waiting() != 0 }
func testReleaseCallback()      { C.fl_test_release() }
