package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// gobgpLogger passes GoBGP's log lines to slog, and keeps the last error
// seen for each neighbour: GoBGP's API reports a session's state but not
// why it left Established or why it never got there, and an operator's
// first question about a session that is down is "why".
//
// GoBGP logs at Info what an LB operator considers detail (every peer
// added, every policy set), so its Info becomes slog's Debug; the
// speaker logs the session state changes itself, at Info and Warn.
//
// GoBGP v4 logs through a *slog.Logger: gobgpLogger is the state shared
// by the slog.Handler it is given (gobgpHandler), whatever attributes
// GoBGP adds with Logger.With.
type gobgpLogger struct {
	log *slog.Logger

	localASN uint32 // the configured asn, to explain a refused OPEN

	mu      sync.Mutex
	lastErr map[netip.Addr]string
	sent    map[netip.Addr]bool   // lastErr is a NOTIFICATION GoBGP sent
	held    map[netip.Addr]bool   // lastErr is the speaker's own refusal: GoBGP's lines do not replace it
	peerASN map[netip.Addr]uint32 // configured peer_asn, to explain a bad peer AS
}

func newGobgpLogger(log *slog.Logger, localASN uint32) *gobgpLogger {
	return &gobgpLogger{
		log:      log.With("component", "gobgp"),
		localASN: localASN,
		lastErr:  map[netip.Addr]string{},
		sent:     map[netip.Addr]bool{},
		held:     map[netip.Addr]bool{},
		peerASN:  map[netip.Addr]uint32{},
	}
}

// slog returns the logger to give GoBGP.
func (l *gobgpLogger) slog() *slog.Logger { return slog.New(&gobgpHandler{l: l}) }

// lastError returns the last error logged for the neighbour at a.
func (l *gobgpLogger) lastError(a netip.Addr) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr[a]
}

// fields are one GoBGP line's attributes, by key.
type fields map[string]any

// notification describes a NOTIFICATION GoBGP logged ("Code", "Subcode",
// "Communicated-Reason"), as "code 2(open) subcode 2(bad peer as)".
func (l *gobgpLogger) notification(a netip.Addr, f fields) string {
	code, _ := f["Code"].(int64)
	sub, _ := f["Subcode"].(int64)
	text := gbgp.NewNotificationErrorCode(uint8(code), uint8(sub)).String()
	if r, _ := f["Communicated-Reason"].(string); r != "" {
		text += fmt.Sprintf(" (%q)", r)
	}
	if code == gbgp.BGP_ERROR_OPEN_MESSAGE_ERROR && sub == gbgp.BGP_ERROR_SUB_BAD_PEER_AS {
		l.mu.Lock()
		as, ok := l.peerASN[a]
		l.mu.Unlock()
		if ok {
			text += fmt.Sprintf(": the router's OPEN does not carry peer_asn %d", as)
		}
	}
	return text
}

// record keeps msg as the neighbour's last error when the line is about a
// peer ("Topic": "Peer", "Key": its address) and says something went
// wrong, and returns it ("" for any other line).
func (l *gobgpLogger) record(level slog.Level, msg string, f fields) string {
	if f["Topic"] != "Peer" {
		return ""
	}
	key, _ := f["Key"].(string)
	a, err := netip.ParseAddr(key)
	if err != nil {
		return ""
	}
	var text string
	switch {
	case msg == "Peer Down":
		text = fmt.Sprintf("session down: %v", f["Reason"])
	case msg == "failed to connect":
		// Logged at debug level for every failed attempt; the one thing
		// an operator needs when a session never comes up.
		text = fmt.Sprintf("connect: %v", f["Error"])
	case msg == "sent notification" || msg == "received notification":
		// With the codes as numbers in GoBGP v4: for example "sent
		// notification: code 2(open) subcode 2(bad peer as)".
		text = msg + ": " + l.notification(a, f)
	case level >= slog.LevelWarn:
		// For example "Session will be reset due to malformed BGP
		// message: ...".
		sep := ": "
		text = msg
		for _, k := range []string{"Error", "Reason", "Data", "Code", "Subcode"} {
			if v, ok := f[k]; ok {
				text += sep + fmt.Sprint(v)
				sep = ", "
			}
		}
	default:
		return ""
	}
	l.mu.Lock()
	if !l.held[a] {
		l.lastErr[a] = text
		l.sent[a] = msg == "sent notification"
	}
	l.mu.Unlock()
	return text
}

// hold records the speaker's own reason for ending the session with the
// neighbour at a, which GoBGP's lines about that session (the Cease it
// sends, the session going down) do not replace until release.
func (l *gobgpLogger) hold(a netip.Addr, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr[a] = text
	l.sent[a] = true
	l.held[a] = true
}

// release lets GoBGP's lines record the neighbour's last error again.
func (l *gobgpLogger) release(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, a)
}

// refused explains a session the router ended during the OPEN exchange
// (in state in; why is GoBGP's disconnect reason), which GoBGP does not
// log: a NOTIFICATION received in OpenConfirm is dropped as "invalid-msg"
// and a connection closed in OpenSent or OpenConfirm is "read-failed",
// both silently. That is how a router refuses this LB's OPEN, bad peer AS
// first among the reasons (its remote AS for this LB is not asn): the
// session cycled through active and idle with no error at all. A failure
// GoBGP explained (a NOTIFICATION it sent, logged before the state
// change) is left as it is. It returns the error recorded, or "".
func (l *gobgpLogger) refused(a netip.Addr, in State, why string) string {
	text := fmt.Sprintf("the router ended the session in %s (%s) without a reason GoBGP reports: it most likely refused this LB's OPEN; check that its neighbor for this LB has remote AS %d (asn here), and accepts the hold time and capabilities",
		in, why, l.localASN)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sent[a] {
		return ""
	}
	l.lastErr[a] = text
	return text
}

// demoted are GoBGP lines logged above their worth.
var demoted = map[string]bool{
	// Logged at Error whenever a peer that never came up is deleted (as
	// at Stop): GoBGP closes a connection that is already closed.
	"failed to close existing tcp connection": true,
}

// promoted are GoBGP lines logged below their worth: GoBGP v3 logged
// NOTIFICATIONs at Warn, v4 at Info.
var promoted = map[string]bool{
	"sent notification":     true,
	"received notification": true,
}

// emit handles one GoBGP line: GoBGP's Debug lines are dropped except the
// ones record keeps; its Info lines become Debug.
func (l *gobgpLogger) emit(ctx context.Context, level slog.Level, msg string, f fields) {
	switch {
	case demoted[msg]:
		level = slog.LevelDebug
	case promoted[msg]:
		level = max(level, slog.LevelWarn)
	}
	switch {
	case level < slog.LevelInfo:
		l.record(slog.LevelDebug-1, msg, f)
		return
	case level < slog.LevelWarn:
		level = slog.LevelDebug
	}
	text := l.record(level, msg, f)
	if !l.log.Enabled(ctx, level) {
		return
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range f {
			if !yield(k) {
				return
			}
		}
	})
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, f[k])
	}
	if text != "" {
		// GoBGP's fields give a NOTIFICATION as numbers (Code 2,
		// Subcode 2): the line says what they mean, as Peers does.
		args = append(args, "error", text)
	}
	l.log.Log(ctx, level, msg, args...)
}

// gobgpHandler is the slog.Handler of the logger GoBGP is given: it
// collects the attributes of each line (those GoBGP added with With
// included) and hands them to emit.
type gobgpHandler struct {
	l      *gobgpLogger
	attrs  []slog.Attr
	prefix string // groups, "a.b."
}

var _ slog.Handler = (*gobgpHandler)(nil)

// Enabled reports every level: GoBGP's Debug lines include failed
// connection attempts, which record keeps; emit drops the rest cheaply.
func (h *gobgpHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *gobgpHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	n := *h
	n.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		n.attrs = append(n.attrs, slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	return &n
}

func (h *gobgpHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.prefix += name + "."
	return &n
}

func (h *gobgpHandler) Handle(ctx context.Context, r slog.Record) error {
	f := make(fields, len(h.attrs)+r.NumAttrs())
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			p := prefix
			if a.Key != "" {
				p += a.Key + "."
			}
			for _, g := range v.Group() {
				add(p, g)
			}
			return
		}
		if a.Key == "" {
			return
		}
		f[prefix+a.Key] = v.Any()
	}
	for _, a := range h.attrs {
		add("", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		add(h.prefix, a)
		return true
	})
	h.l.emit(ctx, r.Level, r.Message, f)
	return nil
}
