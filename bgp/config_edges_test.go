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
// router with hold time 0 (no keepalives) does.
func holdRouter(t *testing.T, hold uint16) (port int) {
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
					if _, err := readMsg(c); err != nil {
						return
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

// RFC 4271 §6.2: a Hold Time of one or two seconds MUST be rejected.
func TestRouterHoldTimeOneOrTwoRefused(t *testing.T) {
	for _, hold := range []uint16{1, 2} {
		port := holdRouter(t, hold)
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
// "passive is set but listen_port is 0" case; "::" listens for both.
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
