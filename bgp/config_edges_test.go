package bgp

import (
	"context"
	"net"
	"net/netip"
	"sync"

	api "github.com/osrg/gobgp/v4/api"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"strings"
	"testing"
	"time"
)

// holdRouter is a BGP router on loopback whose OPEN proposes hold; it
// sends one KEEPALIVE (to reach Established) and then nothing, as a
// router with hold time 0 (no keepalives) does. Each message it receives
// after the OPEN goes to got, when not nil.
func holdRouter(t *testing.T, hold uint16, got chan<- *gbgp.BGPMessage) (port int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				m, err := readMsg(c)
				if err != nil || m.Header.Type != gbgp.BGP_MSG_OPEN {
					return
				}
				open, _ := gbgp.NewBGPOpenMessage(65001, hold, netip.MustParseAddr("127.0.0.2"), []gbgp.OptionParameterInterface{
					gbgp.NewOptionParameterCapability([]gbgp.ParameterCapabilityInterface{
						gbgp.NewCapMultiProtocol(gbgp.RF_IPv4_UC),
						gbgp.NewCapFourOctetASNumber(65001),
					}),
				})
				if writeMsg(c, open) != nil || writeMsg(c, gbgp.NewBGPKeepAliveMessage()) != nil {
					return
				}
				for {
					m, err := readMsg(c)
					if err != nil {
						return
					}
					if got != nil {
						select {
						case got <- m:
						default:
						}
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// The same listen address twice passed Validate; the daemon then exited
// at start with "bind: address already in use", which names no key.
func TestListenAddressTwiceRefused(t *testing.T) {
	c := validConfig()
	c.ListenPort = 1179
	c.ListenAddresses = []string{"127.0.0.1", "::1", "127.0.0.1"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "listen_addresses[2]") {
		t.Errorf("listen_addresses [127.0.0.1 ::1 127.0.0.1]: %v, want listen_addresses[2] refused", err)
	}
	c.ListenAddresses = []string{"127.0.0.1", "::1"}
	if err := c.Validate(); err != nil {
		t.Errorf("listen_addresses [127.0.0.1 ::1]: %v", err)
	}
}

// TestListenAddressesStartCannotUseRefused: listen addresses GoBGP cannot
// listen on as written are refused, naming the entry; fulcrum check
// passed them and fulcrum run then failed at start (after its dataplane
// began forwarding) or never listened where the config said:
//   - a zoned address: GoBGP cannot read the zone ("no suitable address");
//   - an IPv4-mapped address: it listens on IPv4 only;
//   - a wildcard with an address of its family: the second bind fails
//     ("address already in use"), which names no key;
//   - "::" for a passive IPv4 neighbour: GoBGP's "::" socket is IPv6
//     only, so the router's connection is refused and the session never
//     comes up (seen against bird2).
func TestListenAddressesStartCannotUseRefused(t *testing.T) {
	for _, c := range []struct {
		listen []string
		key    string
	}{
		{[]string{"fe80::1%lo"}, "listen_addresses[0]"},
		{[]string{"127.0.0.1", "::ffff:127.0.0.1"}, "listen_addresses[1]"},
		{[]string{"0.0.0.0", "127.0.0.1"}, "listen_addresses[1]"},
		{[]string{"127.0.0.1", "0.0.0.0"}, "listen_addresses[0]"},
		{[]string{"::", "::1"}, "listen_addresses[1]"},
	} {
		cfg := validConfig()
		cfg.ListenPort = 1179
		cfg.ListenAddresses = c.listen
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("listen_addresses %v: %v, want %s refused", c.listen, err, c.key)
		}
	}
	cfg := validConfig()
	cfg.ListenPort = 1179
	cfg.Neighbors[0].Passive = true
	cfg.ListenAddresses = []string{"::"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "passive") {
		t.Errorf("passive IPv4 neighbour with listen_addresses [::]: %v, want passive refused", err)
	}
	for _, l := range [][]string{{"0.0.0.0", "::"}, {"0.0.0.0", "::1"}, nil} {
		cfg.ListenAddresses = l
		if err := cfg.Validate(); err != nil {
			t.Errorf("passive IPv4 neighbour with listen_addresses %v: %v", l, err)
		}
	}
}

// RFC 4271 §6.2: a Hold Time of one or two seconds MUST be rejected.
func TestRouterHoldTimeOneOrTwoRefused(t *testing.T) {
	for _, hold := range []uint16{1, 2} {
		port := holdRouter(t, hold, nil)
		s := loopbackSpeaker(t, port, nil)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		var st api.PeerState_SessionState
		var neg uint64
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) {
			_ = s.srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
				st = p.GetState().GetSessionState()
				neg = p.GetTimers().GetState().GetNegotiatedHoldTime()
			})
			if st == api.PeerState_SESSION_STATE_ESTABLISHED {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st == api.PeerState_SESSION_STATE_ESTABLISHED {
			t.Errorf("router hold time %d s: session Established (negotiated %d s); RFC 4271 says reject", hold, neg)
		}
		s.Stop()
	}
}

// A passive neighbor whose address family has no listen address: the
// router can never connect (nothing listens on its family), like the
// "passive is set but listen_port is 0" case; "::" is IPv6 only.
func TestPassiveNeighborNeedsListenerOfItsFamily(t *testing.T) {
	mk := func(listen ...string) Config {
		return Config{
			ASN: 65100, RouterID: "192.0.2.10",
			ListenPort: 1179, ListenAddresses: listen,
			NextHopV6: "2001:db8::10",
			Neighbors: []Neighbor{{Address: "::1", PeerASN: 65001, Passive: true}},
		}
	}
	if err := mk("127.0.0.1").Validate(); err == nil || !strings.Contains(err.Error(), "passive") {
		t.Errorf("passive ::1 with listen_addresses [127.0.0.1]: %v, want passive refused", err)
	}
	for _, l := range [][]string{{"::1"}, {"::"}, {"127.0.0.1", "::1"}, nil} {
		if err := mk(l...).Validate(); err != nil {
			t.Errorf("passive ::1 with listen_addresses %v: %v", l, err)
		}
	}
}

// A router proposing hold time 0 makes the negotiated hold time 0 (the
// smaller of the two): no keepalives, no hold timer, and a dead LB never
// withdrawn. The speaker ends such a session with a Cease, keeps the
// reason as the neighbour's last error, and tries again later.
func TestRouterHoldTimeZeroRefused(t *testing.T) {
	old := holdZeroRetry
	holdZeroRetry = 500 * time.Millisecond
	t.Cleanup(func() { holdZeroRetry = old })
	got := make(chan *gbgp.BGPMessage, 64)
	port := holdRouter(t, 0, got)
	s := loopbackSpeaker(t, port, nil)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ceases := 0
	deadline := time.After(20 * time.Second)
	for ceases < 2 { // refused, enabled again after holdZeroRetry, refused again
		select {
		case m := <-got:
			if m.Header.Type != gbgp.BGP_MSG_NOTIFICATION {
				continue
			}
			n := m.Body.(*gbgp.BGPNotification)
			if n.ErrorCode != gbgp.BGP_ERROR_CEASE || n.ErrorSubcode != gbgp.BGP_ERROR_SUB_ADMINISTRATIVE_SHUTDOWN {
				t.Fatalf("notification code %d subcode %d, want Cease/administrative shutdown", n.ErrorCode, n.ErrorSubcode)
			}
			ceases++
		case <-deadline:
			t.Fatalf("%d Cease notifications in 20 s, want 2; peer %+v", ceases, s.Peers()[0])
		}
	}
	if p := s.Peers()[0]; !strings.Contains(p.LastError, "hold time 0") {
		t.Errorf("last error %q does not name the hold time", p.LastError)
	}
}

// A router proposing a hold time of 3 s or more is kept.
func TestRouterHoldTimeThreeKept(t *testing.T) {
	got := make(chan *gbgp.BGPMessage, 64)
	port := holdRouter(t, 30, got)
	s := loopbackSpeaker(t, port, nil)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitLoopbackEstablished(t, s)
	// The speaker's first keepalive (3 s) proves the session is kept past
	// the check that runs at Established.
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-got:
			switch m.Header.Type {
			case gbgp.BGP_MSG_NOTIFICATION:
				t.Fatalf("hold time 30 s: speaker sent a NOTIFICATION %+v", m.Body)
			case gbgp.BGP_MSG_KEEPALIVE:
				if p := s.Peers()[0]; p.State != StateEstablished {
					t.Fatalf("after a keepalive the session is %v", p.State)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no keepalive in 10 s; peer %+v", s.Peers()[0])
		}
	}
}
