//go:build linux

package main

import (
	"log/slog"
	"syscall"

	"github.com/fulcrumlb/fulcrum/config"
)

// minNoFile is the descriptor limit below which the daemon warns: the
// admin API may hold config.MaxAdminConns (4096) connections at most, and
// health checks, BGP, the exception tap and DPDK need room beside them.
const minNoFile = 2 * config.MaxAdminConns

// raiseNoFileLimit lifts RLIMIT_NOFILE's soft limit to the hard limit and
// logs both. The Go runtime does the same when package os starts (Go
// 1.19+), but a wrapper, a systemd LimitNOFILE or a later setrlimit can
// leave the daemon low, and the operator should see the number in the log.
//
// Why this keeps health checks alive: they open one socket per check in
// flight, and the one unbounded consumer of descriptors was the admin API,
// which a peer once drove to 19,999 of 20,000 in 4 s. The API now holds at
// most [admin] max_conns (<= config.MaxAdminConns = 4096) connections, far
// below the raised limit (systemd's default hard limit is 524288), so the
// descriptors the checks need are always left. A limit below minNoFile is
// logged as a warning: raise LimitNOFILE in the unit.
func raiseNoFileLimit(log *slog.Logger) (cur, max uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("reading the open files limit (RLIMIT_NOFILE)", "err", err)
		return 0, 0
	}
	was := lim.Cur
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("raising the open files limit (RLIMIT_NOFILE)", "soft", was, "hard", lim.Max, "err", err)
			return was, lim.Max
		}
	}
	if lim.Cur < minNoFile {
		log.Warn("open files limit is low: health checks may run out of descriptors; raise LimitNOFILE", "soft", lim.Cur, "hard", lim.Max, "want_at_least", minNoFile)
	} else {
		log.Info("open files limit", "soft", lim.Cur, "hard", lim.Max, "was", was)
	}
	return lim.Cur, lim.Max
}
