//go:build dpdk

/*
 * rte_pdump in DPDK 22.11 removes its rx/tx callbacks (when dpdk-dumpcap
 * stops a capture) without waiting for a burst that is running one to
 * return; dpdk-dumpcap then frees the ring and mempool the callback copies
 * into, and the lcore still inside it faults (seen here: SIGSEGV in
 * rte_eth_rx_burst a capture of -c 50 ended, about one run in eight).
 * Later DPDK waits in pdump itself (pdump_cb_wait).
 *
 * Fulcrum defines rte_eth_remove_rx_callback and rte_eth_remove_tx_callback
 * in its executable: the dynamic linker binds librte_pdump's calls to
 * these, which call ethdev's own and then wait until every burst begun
 * before the removal has ended (fl_burst_slots, counted by fl_rx_burst and
 * fl_tx_burst). That runs on the multi-process thread, never on an lcore.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "fulcrum_dpdk.h"

struct fl_burst_slot fl_burst_slots[RTE_MAX_LCORE + 1];

/* Set while fl_burst_quiesce waits on a burst (for the dpdk tests). */
int fl_burst_waiting;

/* fl_burst_quiesce waits (at most a second) until every burst begun
 * before the call has returned. */
void
fl_burst_quiesce(void)
{
	static uint64_t begun[RTE_MAX_LCORE + 1];
	uint64_t deadline = rte_get_timer_cycles() + rte_get_timer_hz();
	unsigned int i;

	for (i = 0; i <= RTE_MAX_LCORE; i++)
		begun[i] = __atomic_load_n(&fl_burst_slots[i].enter, __ATOMIC_SEQ_CST);
	for (i = 0; i <= RTE_MAX_LCORE; i++) {
		while (__atomic_load_n(&fl_burst_slots[i].exit, __ATOMIC_ACQUIRE) < begun[i]) {
			if (rte_get_timer_cycles() > deadline)
				break;
			__atomic_store_n(&fl_burst_waiting, 1, __ATOMIC_RELEASE);
			usleep(10);
		}
	}
	__atomic_store_n(&fl_burst_waiting, 0, __ATOMIC_RELEASE);
}

typedef int (*fl_remove_cb_fn)(uint16_t, uint16_t, const struct rte_eth_rxtx_callback *);

static int
fl_remove_callback(const char *name, fl_remove_cb_fn *real, uint16_t port_id,
		   uint16_t queue_id, const struct rte_eth_rxtx_callback *user_cb)
{
	fl_remove_cb_fn fn = __atomic_load_n(real, __ATOMIC_ACQUIRE);
	int ret;

	if (fn == NULL) {
		fn = (fl_remove_cb_fn)dlsym(RTLD_NEXT, name);
		if (fn == NULL)
			return -ENOSYS;
		__atomic_store_n(real, fn, __ATOMIC_RELEASE);
	}
	ret = fn(port_id, queue_id, user_cb);
	if (ret == 0)
		fl_burst_quiesce();
	return ret;
}

int
rte_eth_remove_rx_callback(uint16_t port_id, uint16_t queue_id,
			   const struct rte_eth_rxtx_callback *user_cb)
{
	static fl_remove_cb_fn real;
	return fl_remove_callback("rte_eth_remove_rx_callback", &real, port_id, queue_id, user_cb);
}

int
rte_eth_remove_tx_callback(uint16_t port_id, uint16_t queue_id,
			   const struct rte_eth_rxtx_callback *user_cb)
{
	static fl_remove_cb_fn real;
	return fl_remove_callback("rte_eth_remove_tx_callback", &real, port_id, queue_id, user_cb);
}
