//go:build dpdk

/*
 * For the package's tests (logprobe.go): a log line from one of the EAL's
 * control threads, and one from the calling thread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
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

/* A line written in two parts by a control thread: fl_probe_ctrl_head
 * has it write head (no newline) to DPDK's log stream and returns once it
 * has; fl_probe_ctrl_finish has it end the line, and waits for it. */
static sem_t fl_probe_headed, fl_probe_go;
static pthread_t fl_probe_t;
static const char *fl_probe_head;
static size_t fl_probe_n;

static void *fl_probe_head_thread(void *arg)
{
	FILE *f = rte_log_get_stream();

	(void)arg;
	fwrite(fl_probe_head, 1, fl_probe_n, f);
	sem_post(&fl_probe_headed);
	sem_wait(&fl_probe_go);
	fputs("\n", f);
	fflush(f);
	return NULL;
}

int fl_probe_ctrl_head(const char *head, size_t n)
{
	int rc;

	fl_probe_head = head;
	fl_probe_n = n;
	sem_init(&fl_probe_headed, 0, 0);
	sem_init(&fl_probe_go, 0, 0);
	rc = rte_ctrl_thread_create(&fl_probe_t, "fl-log-probe", NULL, fl_probe_head_thread, NULL);
	if (rc != 0)
		return -rc;
	sem_wait(&fl_probe_headed);
	return 0;
}

void fl_probe_ctrl_finish(void)
{
	sem_post(&fl_probe_go);
	pthread_join(fl_probe_t, NULL);
}
