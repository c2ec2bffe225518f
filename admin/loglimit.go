package admin

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// What a caller without the token can make the API log is rate-limited:
// every refused or failed call of such a caller (a wrong token, a
// cross-origin POST, a bad Host, an unknown path from a web page on
// loopback) and net/http's own errors (a TLS handshake error per
// connection) would otherwise write a record each, up to the 16 KiB
// header's worth (the path) per request: a flood of them fills the disk
// and buries the signal. At most refusedLogBurst such records are written
// per refusedLogWindow; the first one written after some were held back
// says how many ("suppressed"). Failures of callers that sent the token
// are always logged.
const (
	refusedLogWindow = time.Second
	refusedLogBurst  = 10
)

// logLimiter is the budget that limitedHandlers share.
type logLimiter struct {
	mu         sync.Mutex
	start      time.Time // of the current window
	n          int       // records written in it
	suppressed uint64    // held back since the last record written
}

// allow reports whether a record may be written at now and, if so, how
// many were held back before it.
func (l *logLimiter) allow(now time.Time) (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= refusedLogWindow {
		l.start, l.n = now, 0
	}
	if l.n >= refusedLogBurst {
		l.suppressed++
		return false, 0
	}
	l.n++
	held := l.suppressed
	l.suppressed = 0
	return true, held
}

// limitedHandler passes records to h within its limiter's budget.
type limitedHandler struct {
	h slog.Handler
	l *logLimiter
}

func (h *limitedHandler) Enabled(ctx context.Context, lv slog.Level) bool {
	return h.h.Enabled(ctx, lv)
}

func (h *limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	ok, held := h.l.allow(time.Now())
	if !ok {
		return nil
	}
	if held > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Uint64("suppressed", held))
	}
	return h.h.Handle(ctx, r)
}

func (h *limitedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &limitedHandler{h: h.h.WithAttrs(as), l: h.l}
}

func (h *limitedHandler) WithGroup(name string) slog.Handler {
	return &limitedHandler{h: h.h.WithGroup(name), l: h.l}
}

// limited returns a logger writing to log's handler within a budget of
// its own.
func limited(log *slog.Logger) *slog.Logger {
	return slog.New(&limitedHandler{h: log.Handler(), l: &logLimiter{}})
}
