//go:build dpdk

/*
 * DPDK's log into Go: a stdio stream made with fopencookie whose write
 * callback hands each line, with the level of the message being written,
 * to fulcrumDPDKLog (log.go). rte_vlog writes one message and flushes, and
 * the stream is line buffered, so a call carries whole lines.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "_cgo_export.h"

/* The cookie is a fixed level for the streams that stand in for stdio
 * during rte_eal_init, or 0: the level of the message rte_log writes. */
static ssize_t fl_log_write(void *cookie, const char *buf, size_t n)
{
	int level = (int)(intptr_t)cookie;

	if (level == 0)
		level = rte_log_cur_msg_loglevel();
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
