//go:build dpdk

/*
 * DPDK's log into Go: a stdio stream made with fopencookie whose write
 * callback hands each line, with the level of the message being written,
 * to fulcrumDPDKLog (log.go). rte_vlog writes one message and flushes, and
 * the stream is line buffered, so a call carries whole lines.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "_cgo_export.h"

/*
 * A worker lcore's thread must not enter Go before Fulcrum's listener has
 * locked it (lcore.c): a thread the Go runtime started from it then would
 * keep the lcore's CPU pin and name. The EAL logs from that thread before
 * the launch ("lcore N is ready", at debug level), so what a worker lcore
 * writes until then is held here and handed to Go by InitEAL once every
 * listener runs (fl_log_release_held). Bounded: what does not fit is
 * counted and dropped.
 */
#define FL_HELD_MAX 65536

static pthread_mutex_t fl_held_mu = PTHREAD_MUTEX_INITIALIZER;
static char fl_held[FL_HELD_MAX];
static size_t fl_held_len, fl_held_lost;

struct fl_held_rec {
	int level;
	size_t n;
};

int fl_lcore_unlocked(void); /* lcore.c */

static void fl_hold(const char *buf, size_t n, int level)
{
	struct fl_held_rec r = { .level = level, .n = n };

	pthread_mutex_lock(&fl_held_mu);
	if (sizeof(r) + n <= FL_HELD_MAX - fl_held_len) {
		memcpy(fl_held + fl_held_len, &r, sizeof(r));
		memcpy(fl_held + fl_held_len + sizeof(r), buf, n);
		fl_held_len += sizeof(r) + n;
	} else {
		fl_held_lost += n;
	}
	pthread_mutex_unlock(&fl_held_mu);
}

/* fl_log_release_held hands the held lines to Go, oldest first, on the
 * calling (Go) thread, and returns how many bytes did not fit. */
size_t fl_log_release_held(void)
{
	size_t off = 0, lost;
	struct fl_held_rec r;

	pthread_mutex_lock(&fl_held_mu);
	while (off < fl_held_len) {
		memcpy(&r, fl_held + off, sizeof(r));
		fulcrumDPDKLog(fl_held + off + sizeof(r), r.n, r.level);
		off += sizeof(r) + r.n;
	}
	fl_held_len = 0;
	lost = fl_held_lost;
	fl_held_lost = 0;
	pthread_mutex_unlock(&fl_held_mu);
	return lost;
}

/* The cookie is a fixed level for the streams that stand in for stdio
 * during rte_eal_init, or 0: the level of the message rte_log writes. */
static ssize_t fl_log_write(void *cookie, const char *buf, size_t n)
{
	int level = (int)(intptr_t)cookie;

	if (level == 0)
		level = rte_log_cur_msg_loglevel();
	if (fl_lcore_unlocked())
		fl_hold(buf, n, level);
	else
		fulcrumDPDKLog((char *)buf, n, level);
	return (ssize_t)n;
}

static FILE *fl_stream(int level)
{
	cookie_io_functions_t io = { .write = fl_log_write };
	FILE *f = fopencookie((void *)(intptr_t)level, "w", io);

	if (f != NULL)
		setvbuf(f, NULL, _IOLBF, 0);
	return f;
}

int fl_log_open(void)
{
	FILE *f = fl_stream(0);

	if (f == NULL)
		return -1;
	return rte_openlog_stream(f);
}

/*
 * rte_eal_init, with its error in *err (rte_errno is thread-local). Some
 * of what it says bypasses rte_log: the fatal alert goes to stderr and
 * the usage after a bad option to stdout. For the length of the call the
 * C library's stderr and stdout are streams into the logger too, at error
 * and debug level, so with JSON logs nothing but JSON reaches fd 1 and 2.
 * Go's own writes use the descriptors, not these pointers.
 */
int fl_eal_init(int argc, char **argv, int *err)
{
	FILE *oerr = stderr, *oout = stdout;
	FILE *ferr = fl_stream(RTE_LOG_ERR), *fout = fl_stream(RTE_LOG_DEBUG);
	int n;

	if (ferr != NULL)
		stderr = ferr;
	if (fout != NULL)
		stdout = fout;
	n = rte_eal_init(argc, argv);
	*err = n < 0 ? rte_errno : 0;
	stderr = oerr;
	stdout = oout;
	if (ferr != NULL)
		fclose(ferr);
	if (fout != NULL)
		fclose(fout);
	return n;
}
