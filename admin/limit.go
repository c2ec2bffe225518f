package admin

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// connStats counts the admin API's connections (exported as metrics).
type connStats struct {
	open    atomic.Int64  // accepted and not yet closed
	refused atomic.Uint64 // closed at accept: max_conns were open
}

// ConnStats is a snapshot of the admin listener's connections.
type ConnStats struct {
	Open    int    // accepted and not yet closed; at most [admin] max_conns
	Refused uint64 // closed as they arrived because max_conns were open
}

// Conns reports the listener's connections now.
func (s *Server) Conns() ConnStats {
	return ConnStats{Open: int(s.conns.open.Load()), Refused: s.conns.refused.Load()}
}

// limitListener holds at most max accepted connections. One beyond that is
// accepted and closed at once rather than left in the kernel's backlog
// (golang.org/x/net/netutil.LimitListener's way): closing costs one
// descriptor for an instant, tells the peer at once, and keeps the accept
// loop draining the backlog, so a flood cannot queue ahead of the
// operator's next try. A connection gets its slot back when it is closed,
// which the server's deadlines guarantee within seconds for a silent peer.
type limitListener struct {
	net.Listener
	max   int64
	stats *connStats
	log   *slog.Logger

	lastLog time.Time // of the last refusal warning; Accept runs in one goroutine
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.take() {
			return &limitConn{Conn: c, open: &l.stats.open}, nil
		}
		n := l.stats.refused.Add(1)
		c.Close()
		if now := time.Now(); now.Sub(l.lastLog) >= refusalLogEvery {
			l.lastLog = now
			l.log.Warn("admin API: connection refused, max_conns are open", "remote", c.RemoteAddr().String(),
				"max_conns", l.max, "refused_total", n)
		}
	}
}

// take takes a slot if one of max is free. It never counts past max, not
// even for an instant: an add-then-undo would let Conns (and the metric)
// read max+1 open while a refused connection is counted in and out.
// Slots come back concurrently (limitConn.Close), hence the compare-and-swap.
func (l *limitListener) take() bool {
	for {
		n := l.stats.open.Load()
		if n >= l.max {
			return false
		}
		if l.stats.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// limitConn gives its slot back once, however often it is closed.
type limitConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.open.Add(-1) })
	return err
}
