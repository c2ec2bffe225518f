//go:build dpdk

/*
 * For the package's tests (logprobe.go): a log line from one of the EAL's
 * control threads, and one from the calling thread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <rte_debug.h>
#include <rte_lcore.h>
#include <rte_log.h>

struct fl_probe {
	const char *msg;
	int count;
	int panic;
	int tid;
};

static void *fl_probe_ctrl(void *arg)
{
	struct fl_probe *p = arg;

	/* The EAL names its control threads after it started them; name
	 * this one first, so the test does not depend on that race. */
	prctl(PR_SET_NAME, "fl-log-probe");
	p->tid = gettid();
	for (int i = 0; i < p->count; i++)
		RTE_LOG(ERR, USER1, "%s\n", p->msg);
	if (p->panic)
		rte_panic("%s\n", p->msg);
	return NULL;
}

/* fl_probe_ctrl_log logs msg count times from a control thread the EAL
 * starts (rte_ctrl_thread_create), then, if panic, calls rte_panic with
 * it there; it waits for the thread to end, and returns 0 with the
 * thread's id in *tid, or -errno. */
int fl_probe_ctrl_log(const char *msg, int count, int panic, int *tid)
{
	struct fl_probe p = { .msg = msg, .count = count, .panic = panic };
	pthread_t t;
	int rc = rte_ctrl_thread_create(&t, "fl-log-probe", NULL, fl_probe_ctrl, &p);

	if (rc != 0)
		return -rc;
	rc = pthread_join(t, NULL);
	if (rc != 0)
		return -rc;
	*tid = p.tid;
	return 0;
}

/* fl_probe_log logs msg from the calling thread, then, if panic, calls
 * rte_panic with it. */
void fl_probe_log(const char *msg, int panic)
{
	RTE_LOG(ERR, USER1, "%s\n", msg);
	if (panic)
		rte_panic("%s\n", msg);
}
