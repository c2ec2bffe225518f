//go:build dpdk

/*
 * Fulcrum's lcore listener (lcore.go) on every lcore: rte_eal_mp_remote_
 * launch starts fl_lcore_entry on each worker lcore's thread and then runs
 * it on the calling thread, the main lcore's, until it returns.
 *
 * The EAL pins each worker lcore's thread to its CPUs and names it
 * (rte-worker-N), and a thread the Go runtime starts from it inherits
 * both. The listener locks its goroutine to the thread first thing, after
 * which the runtime starts threads for it from its template thread; but
 * entering Go from C runs the runtime's code first, where the goroutine
 * can be preempted and its thread start another. So until the listener
 * has locked it, the thread has the CPUs and name the process started
 * with, and fl_lcore_settle then gives it back the lcore's. What the
 * thread logs before it is locked is held (log.c): a log line enters Go.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>

#include <rte_launch.h>
#include <rte_lcore.h>

#include "_cgo_export.h"

#define FL_NAME_LEN 16 /* the kernel's, with the NUL */

static cpu_set_t fl_start_cpus;
static char fl_start_name[FL_NAME_LEN];
static int fl_start_saved;
static cpu_set_t fl_lcore_cpus[RTE_MAX_LCORE];
static char fl_lcore_names[RTE_MAX_LCORE][FL_NAME_LEN];
static int fl_lcore_locked[RTE_MAX_LCORE]; /* its listener has locked it */

/* fl_save_start_thread records the calling thread's CPUs and name; called
 * before rte_eal_init pins it. Returns 0 or an errno. */
int fl_save_start_thread(void)
{
	int rc = pthread_getaffinity_np(pthread_self(), sizeof(fl_start_cpus), &fl_start_cpus);

	if (rc != 0)
		return rc;
	rc = pthread_getname_np(pthread_self(), fl_start_name, sizeof(fl_start_name));
	if (rc == 0)
		__atomic_store_n(&fl_start_saved, 1, __ATOMIC_RELEASE);
	return rc;
}

static int fl_is_worker(unsigned id)
{
	return id < RTE_MAX_LCORE && id != rte_get_main_lcore();
}

/* fl_lcore_unlocked says the calling thread is a worker lcore's whose
 * listener has not locked it yet: it must not enter Go (log.c). */
int fl_lcore_unlocked(void)
{
	unsigned id = rte_lcore_id();

	return fl_is_worker(id) && !__atomic_load_n(&fl_lcore_locked[id], __ATOMIC_ACQUIRE);
}

/*
 * fl_thread_may_enter_go says whether the calling thread may call into Go
 * (log.c): a thread the Go runtime started from it then would be like any
 * other of the process's. So it is an lcore's whose listener has locked
 * it (the runtime starts a locked goroutine's threads from its template
 * thread), or a thread with the CPUs and name the process started with:
 * the Go runtime's own, but not the EAL's control threads (interrupts,
 * multi-process requests, telemetry), which it pins to the CPUs no lcore
 * uses, or to the main lcore's, and names. Before InitEAL recorded the
 * start, no thread of DPDK's runs: every thread is the runtime's.
 */
int fl_thread_may_enter_go(void)
{
	cpu_set_t cpus;
	char name[FL_NAME_LEN] = "";

	if (rte_lcore_id() != LCORE_ID_ANY)
		return !fl_lcore_unlocked();
	if (!__atomic_load_n(&fl_start_saved, __ATOMIC_ACQUIRE))
		return 1;
	if (pthread_getaffinity_np(pthread_self(), sizeof(cpus), &cpus) != 0 ||
	    !CPU_EQUAL(&cpus, &fl_start_cpus))
		return 0;
	if (prctl(PR_GET_NAME, name) != 0)
		return 0;
	return strncmp(name, fl_start_name, FL_NAME_LEN) == 0;
}

static int fl_lcore_entry(void *arg)
{
	unsigned id = rte_lcore_id();
	pthread_t self = pthread_self();
	int rc = 0;

	if (fl_is_worker(id)) {
		rc = pthread_getaffinity_np(self, sizeof(cpu_set_t), &fl_lcore_cpus[id]);
		if (rc == 0)
			rc = pthread_getname_np(self, fl_lcore_names[id], FL_NAME_LEN);
		if (rc == 0)
			rc = pthread_setaffinity_np(self, sizeof(cpu_set_t), &fl_start_cpus);
		if (rc == 0)
			rc = pthread_setname_np(self, fl_start_name);
	}
	return fulcrumLcoreListener(rc);
}

/* fl_lcore_settle gives a worker lcore's thread back its CPUs and name;
 * the listener calls it once its goroutine is locked to the thread.
 * Returns 0 or an errno. */
int fl_lcore_settle(void)
{
	unsigned id = rte_lcore_id();
	pthread_t self = pthread_self();
	int rc;

	if (!fl_is_worker(id))
		return 0;
	__atomic_store_n(&fl_lcore_locked[id], 1, __ATOMIC_RELEASE);
	rc = pthread_setaffinity_np(self, sizeof(cpu_set_t), &fl_lcore_cpus[id]);
	if (rc == 0)
		rc = pthread_setname_np(self, fl_lcore_names[id]);
	return rc;
}

int fl_launch_listeners(void)
{
	return rte_eal_mp_remote_launch(fl_lcore_entry, NULL, CALL_MAIN);
}
