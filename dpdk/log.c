//go:build dpdk

/*
 * DPDK's log into Go: a stdio stream made with fopencookie whose write
 * callback hands each line, with the level of the message being written,
 * to fulcrumDPDKLog (log.go). rte_vlog writes one message and flushes, and
 * the stream is line buffered, so a call carries whole lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "_cgo_export.h"

/*
 * A thread the EAL created must not call into Go while a thread the Go
 * runtime started from it would keep its CPUs and name (lcore.c's
 * fl_thread_may_enter_go): a worker lcore's before its listener locks it
 * ("lcore N is ready", at debug level, before the launch), and the EAL's
 * control threads for the life of the process (interrupts and link
 * events, multi-process requests such as dpdk-pdump's, telemetry). What
 * they write is queued here, and a goroutine of log.go's, woken through
 * an eventfd, hands it to the logger; InitEAL drains it too before it
 * returns. Bounded: what does not fit is counted and dropped.
 */
static pthread_mutex_t fl_q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fl_q_cond = PTHREAD_COND_INITIALIZER;
static char fl_q[FL_QUEUE_MAX];
static size_t fl_q_len;
static uint64_t fl_q_lost_lines, fl_q_lost_bytes;
static uint64_t fl_q_seq;  /* records queued since the start */
/* A message longer than the stream's buffer (8 KiB) comes in pieces. */
static size_t fl_q_line_start; /* where the last line's first piece is */
static size_t fl_q_line_bytes; /* and its bytes so far */
static int fl_q_line_open;     /* the last piece queued ends no line */
static uint64_t fl_q_line_nl;  /* and the newlines in them (whole lines before it) */
static int fl_q_dropping;      /* a piece did not fit: drop until taken */
static int fl_q_skip;          /* a dropped piece ended no line: drop the rest of it */
static uint64_t fl_q_done; /* of them, handed to the logger (fl_log_done) */
static int fl_q_efd = -1;

/*
 * DPDK's last words (fl_last_words) come right before abort() or exit(),
 * which end the process with whatever the program's own log queue still
 * holds. From the first of them on, each line is written and flushed
 * before the write returns (log.go's fatal hook); a queued one, written
 * by a thread that may not call into Go, waits for the reader to have
 * handed it on, for at most FL_DYING_WAIT_S.
 */
#define FL_DYING_WAIT_S 3
static int fl_dying;

/* FL_QUEUE_MAX and struct fl_q_rec: log.go's, through _cgo_export.h */

int fl_thread_may_enter_go(void); /* lcore.c */

static uint64_t fl_lines_in(const char *buf, size_t n)
{
	const char *p = buf, *end = buf + n;
	uint64_t k = 0;

	while (p < end && (p = memchr(p, '\n', end - p)) != NULL) {
		k++;
		p++;
	}
	return k;
}

/*
 * fl_enqueue queues one piece and wakes the reader; it returns the
 * piece's sequence number, or 0 when it was dropped. Once a piece does
 * not fit, the pieces of the line it ends are taken back and every later
 * piece is dropped until the reader takes the queue: what is handed on
 * is whole lines, and a dropped line is counted once, by its newline.
 * (The pieces of one message are written under the stream's lock, one
 * after the other; only a take between two of them hands a line on in
 * two parts, which log.go joins again.)
 */
static uint64_t fl_enqueue(const char *buf, size_t n, int level, int last)
{
	struct fl_q_rec r = { .level = level, .n = n };
	uint64_t one = 1, seq = 0;

	pthread_mutex_lock(&fl_q_mu);
	if (last) /* DPDK's last words go before whole-line accounting */
		fl_q_dropping = fl_q_skip = 0;
	if (!fl_q_dropping && !fl_q_skip && sizeof(r) + n <= FL_QUEUE_MAX - fl_q_len) {
		if (!fl_q_line_open) {
			fl_q_line_start = fl_q_len;
			fl_q_line_bytes = 0;
			fl_q_line_nl = 0;
		}
		memcpy(fl_q + fl_q_len, &r, sizeof(r));
		memcpy(fl_q + fl_q_len + sizeof(r), buf, n);
		fl_q_len += sizeof(r) + n;
		fl_q_line_bytes += n;
		fl_q_line_nl += fl_lines_in(buf, n);
		if (n > 0)
			fl_q_line_open = buf[n - 1] != '\n';
		seq = ++fl_q_seq;
	} else {
		if (fl_q_line_open) {
			/* its pieces go, and the whole lines in them */
			fl_q_len = fl_q_line_start;
			fl_q_lost_bytes += fl_q_line_bytes;
			fl_q_lost_lines += fl_q_line_nl;
			fl_q_line_open = 0;
		}
		if (!fl_q_skip)
			fl_q_dropping = 1;
		/* A take before the line's last piece must not let that
		 * piece through alone. */
		if (n > 0)
			fl_q_skip = buf[n - 1] != '\n';
		fl_q_lost_lines += fl_lines_in(buf, n);
		fl_q_lost_bytes += n;
	}
	pthread_mutex_unlock(&fl_q_mu);
	if (fl_q_efd >= 0 && write(fl_q_efd, &one, sizeof(one)) < 0) {
		/* EAGAIN only, at a count of 2^64-2 wakes not yet read */
	}
	return seq;
}

/* fl_wait_done waits until the reader has handed record seq to the
 * logger, or for FL_DYING_WAIT_S. Not a cancellation point: the EAL
 * cancels its multi-process thread at rte_eal_cleanup, and a thread
 * cancelled in the wait would end holding the queue's lock. */
static void fl_wait_done(uint64_t seq)
{
	struct timespec until;
	int old;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += FL_DYING_WAIT_S;
	pthread_mutex_lock(&fl_q_mu);
	while (fl_q_done < seq)
		if (pthread_cond_clockwait(&fl_q_cond, &fl_q_mu, CLOCK_MONOTONIC, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&fl_q_mu);
	pthread_setcancelstate(old, NULL);
}

/* fl_log_done says the reader handed every record up to seq (fl_log_take's)
 * to the logger. */
void fl_log_done(uint64_t seq)
{
	pthread_mutex_lock(&fl_q_mu);
	if (seq > fl_q_done)
		fl_q_done = seq;
	pthread_cond_broadcast(&fl_q_cond);
	pthread_mutex_unlock(&fl_q_mu);
}

/* fl_log_take moves the queued records into dst (FL_QUEUE_MAX bytes),
 * adds what was dropped since the last call to *lost_lines and
 * *lost_bytes, sets *seq to the last record's sequence number, and
 * returns the bytes moved: records of a struct fl_q_rec and its line. */
size_t fl_log_take(char *dst, uint64_t *lost_lines, uint64_t *lost_bytes, uint64_t *seq)
{
	size_t n;

	pthread_mutex_lock(&fl_q_mu);
	*seq = fl_q_seq;
	n = fl_q_len;
	memcpy(dst, fl_q, n);
	fl_q_len = 0;
	fl_q_line_open = 0;
	fl_q_dropping = 0;
	*lost_lines += fl_q_lost_lines;
	*lost_bytes += fl_q_lost_bytes;
	fl_q_lost_lines = fl_q_lost_bytes = 0;
	pthread_mutex_unlock(&fl_q_mu);
	return n;
}

/*
 * fl_last_words says whether a write at level starts DPDK's last words:
 * rte_panic's "PANIC in f():" and rte_exit's "EAL: Error - exiting", at
 * critical level, or a line at alert or emergency level. Other critical
 * lines (the EAL's -v "RTE Version", drivers' recoverable errors) are
 * not: the process lives on. rte_log writes each message on its own, so
 * the write starts with the message.
 */
static int fl_last_words(const char *buf, size_t n, int level)
{
	static const char panic[] = "PANIC in ", exiting[] = "EAL: Error - exiting";

	if (level >= RTE_LOG_EMERG && level < RTE_LOG_CRIT)
		return 1;
	if (level != RTE_LOG_CRIT)
		return 0;
	return (n >= sizeof(panic) - 1 && memcmp(buf, panic, sizeof(panic) - 1) == 0) ||
	       (n >= sizeof(exiting) - 1 && memcmp(buf, exiting, sizeof(exiting) - 1) == 0);
}

/* fl_log_dying says DPDK's last words have begun (log.go's fatal hook). */
int fl_log_dying(void)
{
	return __atomic_load_n(&fl_dying, __ATOMIC_ACQUIRE);
}

/* The cookie is a fixed level for the streams that stand in for stdio
 * during rte_eal_init, or 0: the level of the message rte_log writes. */
static ssize_t fl_log_write(void *cookie, const char *buf, size_t n)
{
	int level = (int)(intptr_t)cookie;
	uint64_t seq;

	if (level == 0)
		level = rte_log_cur_msg_loglevel();
	if (fl_last_words(buf, n, level))
		__atomic_store_n(&fl_dying, 1, __ATOMIC_RELEASE);
	if (fl_thread_may_enter_go()) {
		fulcrumDPDKLog((char *)buf, n, level);
		return (ssize_t)n;
	}
	if (!__atomic_load_n(&fl_dying, __ATOMIC_ACQUIRE)) {
		fl_enqueue(buf, n, level, 0);
		return (ssize_t)n;
	}
	/* Last words: when the queue is full, wait for the reader to take
	 * it, once, rather than drop them. */
	seq = fl_enqueue(buf, n, level, 1);
	if (seq == 0) {
		pthread_mutex_lock(&fl_q_mu);
		seq = fl_q_seq;
		pthread_mutex_unlock(&fl_q_mu);
		fl_wait_done(seq);
		seq = fl_enqueue(buf, n, level, 1);
	}
	if (seq != 0)
		fl_wait_done(seq);
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

/* fl_log_open points DPDK's log at the stream and returns the eventfd
 * that wakes the queue's reader, or -1. */
int fl_log_open(void)
{
	FILE *f;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	if (efd < 0)
		return -1;
	f = fl_stream(0);
	if (f == NULL) {
		close(efd);
		return -1;
	}
	fl_q_efd = efd;
	rte_openlog_stream(f);
	return efd;
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
