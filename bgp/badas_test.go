package bgp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// recordsHandler keeps every record's message, level and attributes (those
// added with With are not kept: they are the component).
type recordsHandler struct {
	mu   sync.Mutex
	recs []capturedRecord
}

type capturedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *recordsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordsHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordsHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordsHandler) Handle(_ context.Context, r slog.Record) error {
	c := capturedRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		c.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, c)
	h.mu.Unlock()
	return nil
}

// logged reports whether a record with message msg, at Warn or above,
// carries attribute key with value v.
func (h *recordsHandler) logged(msg, key, v string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.msg == msg && r.level >= slog.LevelWarn && r.attrs[key] == v {
			return true
		}
	}
	return false
}

// A peer AS mismatch is named, with the AS to check, in the session's
// LastError (fulcrumctl peers) and on a Warn log line (as the "error"
// attribute, equal to LastError), whichever side refuses the session.
//
// "router's AS is not peer_asn": the router (AS 65001) is configured as
// peer_asn 65002; the speaker refuses its OPEN. GoBGP logs the
// NOTIFICATION it sends with numbers only (Code 2, Subcode 2).
//
// "router expects another AS": the router refuses this LB's OPEN (its
// remote AS for the LB is not asn 65100) with a Bad Peer AS NOTIFICATION
// after its own OPEN, as BIRD does. GoBGP drops a NOTIFICATION received
// in OpenConfirm without a log line, so the session cycled through active
// and idle with an empty LastError and nothing logged above Debug.
func TestSpeakerBadPeerASNamed(t *testing.T) {
	refuse := func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if m, err := readMsg(c); err != nil || m.Header.Type != gbgp.BGP_MSG_OPEN {
			return
		}
		open, err := gbgp.NewBGPOpenMessage(65001, 9, netip.MustParseAddr("127.0.0.2"), []gbgp.OptionParameterInterface{
			gbgp.NewOptionParameterCapability([]gbgp.ParameterCapabilityInterface{
				gbgp.NewCapMultiProtocol(gbgp.RF_IPv4_UC),
				gbgp.NewCapFourOctetASNumber(65001),
			}),
		})
		if err != nil || writeMsg(c, open) != nil {
			return
		}
		writeMsg(c, gbgp.NewBGPNotificationMessage(gbgp.BGP_ERROR_OPEN_MESSAGE_ERROR, gbgp.BGP_ERROR_SUB_BAD_PEER_AS, nil))
		io.Copy(io.Discard, c)
	}
	tests := []struct {
		name    string
		onConn  func(net.Conn)
		peerASN uint32
		logMsg  string // the Warn line that reports it
		names   string // the AS number LastError must name
		notName string // ... and the setting it must not blame
	}{
		{"router's AS is not peer_asn", nil, 65002, "sent notification", "65002", "asn 65100"},
		{"router expects another AS", refuse, 65001, "bgp session refused", "65100", "peer_asn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			router := newFakeRouter(t, tt.onConn)
			h := &recordsHandler{}
			s, err := New(Config{
				ASN:       65100,
				RouterID:  "127.0.0.1",
				Neighbors: []Neighbor{{Address: "127.0.0.1", PeerASN: tt.peerASN, Port: router.port(), ConnectRetry: time.Second}},
			}, slog.New(h))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Stop)
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 15*time.Second, "the AS at fault in LastError and on a Warn line", func() (bool, string) {
				p := s.Peers()[0]
				logged := p.LastError != "" && h.logged(tt.logMsg, "error", p.LastError)
				ok := p.State != StateEstablished && router.conns.Load() > 0 &&
					strings.Contains(p.LastError, tt.names) && !strings.Contains(p.LastError, tt.notName) && logged
				return ok, fmt.Sprintf("peer %+v; %d connections; Warn %q line with error=LastError: %v", p, router.conns.Load(), tt.logMsg, logged)
			})
		})
	}
}
