package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// gobgpLogger passes GoBGP's log lines to slog, and keeps the last error
// seen for each neighbour: GoBGP's API reports a session's state but not
// why it left Established or why it never got there, and an operator's
// first question about a session that is down is "why".
//
// GoBGP logs at Info what an LB operator considers detail (every peer
// added, every policy set), so its Info becomes slog's Debug; the
// speaker logs the session state changes itself, at Info and Warn.
type gobgpLogger struct {
	log *slog.Logger

	mu      sync.Mutex
	lastErr map[netip.Addr]string
}

func newGobgpLogger(log *slog.Logger) *gobgpLogger {
	return &gobgpLogger{log: log.With("component", "gobgp"), lastErr: map[netip.Addr]string{}}
}

var _ gobgplog.Logger = (*gobgpLogger)(nil)

// lastError returns the last error logged for the neighbour at a.
func (l *gobgpLogger) lastError(a netip.Addr) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr[a]
}

// record keeps msg as the neighbour's last error when the line is about a
// peer ("Topic": "Peer", "Key": its address) and says something went wrong.
func (l *gobgpLogger) record(level slog.Level, msg string, f gobgplog.Fields) {
	if f["Topic"] != "Peer" {
		return
	}
	key, _ := f["Key"].(string)
	a, err := netip.ParseAddr(key)
	if err != nil {
		return
	}
	var text string
	switch {
	case msg == "Peer Down":
		text = fmt.Sprintf("session down: %v", f["Reason"])
	case msg == "failed to connect":
		// Logged at debug level for every failed attempt; the one thing
		// an operator needs when a session never comes up.
		text = fmt.Sprintf("connect: %v", f["Error"])
	case level >= slog.LevelWarn:
		// For example "sent notification: as number mismatch expected
		// 65002, received 65001".
		sep := ": "
		text = msg
		for _, k := range []string{"Error", "Reason", "Data", "Code", "Subcode"} {
			if v, ok := f[k]; ok {
				text += sep + fmt.Sprint(v)
				sep = ", "
			}
		}
	default:
		return
	}
	l.mu.Lock()
	l.lastErr[a] = text
	l.mu.Unlock()
}

// demoted are GoBGP lines logged above their worth.
var demoted = map[string]bool{
	// Logged at Error whenever a peer that never came up is deleted (as
	// at Stop): GoBGP closes a connection that is already closed.
	"failed to close existing tcp connection": true,
}

func (l *gobgpLogger) emit(level slog.Level, msg string, f gobgplog.Fields) {
	if demoted[msg] {
		level = slog.LevelDebug
	}
	l.record(level, msg, f)
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, f[k])
	}
	l.log.Log(context.Background(), level, msg, args...)
}

// Panic and Fatal mark GoBGP's "code logic bug" paths; GoBGP's own logger
// panics or exits there, and going on would run on a broken invariant.
func (l *gobgpLogger) Panic(msg string, f gobgplog.Fields) {
	l.emit(slog.LevelError, msg, f)
	panic("gobgp: " + msg)
}

func (l *gobgpLogger) Fatal(msg string, f gobgplog.Fields) {
	l.emit(slog.LevelError, msg, f)
	panic("gobgp: " + msg)
}

func (l *gobgpLogger) Error(msg string, f gobgplog.Fields) { l.emit(slog.LevelError, msg, f) }
func (l *gobgpLogger) Warn(msg string, f gobgplog.Fields)  { l.emit(slog.LevelWarn, msg, f) }
func (l *gobgpLogger) Info(msg string, f gobgplog.Fields)  { l.emit(slog.LevelDebug, msg, f) }
func (l *gobgpLogger) Debug(msg string, f gobgplog.Fields) {
	// GoBGP debug lines are dropped except the ones record keeps.
	l.record(slog.LevelDebug-1, msg, f)
}

// SetLevel is ignored: the slog handler decides what is shown.
func (l *gobgpLogger) SetLevel(gobgplog.LogLevel) {}

// GetLevel reports debug so that GoBGP calls Debug for failed connection
// attempts (it checks the level first); Debug drops the rest cheaply.
func (l *gobgpLogger) GetLevel() gobgplog.LogLevel { return gobgplog.DebugLevel }
