//go:build dpdk

/*
 * DPDK's log into Go: a stdio stream made with fopencookie whose write
 * callback hands each line, with the level of the message being written,
 * to fulcrumDPDKLog (log.go). rte_vlog writes one message and flushes, and
 * the stream is line buffered, so a call carries whole lines.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/types.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "_cgo_export.h"

static ssize_t fl_log_write(void *cookie, const char *buf, size_t n)
{
	(void)cookie;
	fulcrumDPDKLog((char *)buf, n, rte_log_cur_msg_loglevel());
	return (ssize_t)n;
}

int fl_log_open(void)
{
	cookie_io_functions_t io = { .write = fl_log_write };
	FILE *f = fopencookie(NULL, "w", io);

	if (f == NULL)
		return -1;
	setvbuf(f, NULL, _IOLBF, 0);
	return rte_openlog_stream(f);
}

int fl_eal_init(int argc, char **argv, int *err)
{
	int n = rte_eal_init(argc, argv);

	*err = n < 0 ? rte_errno : 0;
	return n;
}
