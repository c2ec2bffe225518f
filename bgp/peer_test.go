package bgp

// The speaker against a hand-rolled BGP router on loopback (no root, no
// BIRD): what it accepts from the router, and how it survives one that
// sends what GoBGP cannot parse. Cases that once crashed the process run
// in a child process, so that a crash fails the test instead of killing
// the package's run.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// fakeRouter is a minimal BGP router: it accepts the speaker's
// connection, answers its OPEN, keeps the session alive and records every
// UPDATE.
type fakeRouter struct {
	l       net.Listener
	mu      sync.Mutex
	updates []*gbgp.BGPUpdate
	comms   map[string]int // communities received with each prefix
	conns   atomic.Int32
	conn    net.Conn
	// onConn, if set, replaces the BGP exchange (hostile routers).
	onConn func(c net.Conn)
}

func newFakeRouter(t *testing.T, onConn func(net.Conn)) *fakeRouter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRouter{l: l, onConn: onConn, comms: map[string]int{}}
	t.Cleanup(func() {
		l.Close()
		r.mu.Lock()
		if r.conn != nil {
			r.conn.Close()
		}
		r.mu.Unlock()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.conns.Add(1)
			if r.onConn != nil {
				go r.onConn(c)
				continue
			}
			go r.serve(c)
		}
	}()
	return r
}

func (r *fakeRouter) port() int { return r.l.Addr().(*net.TCPAddr).Port }

func readMsg(c net.Conn) (*gbgp.BGPMessage, error) {
	h := make([]byte, gbgp.BGP_HEADER_LENGTH)
	if _, err := io.ReadFull(c, h); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(h[16:18]))
	if n < gbgp.BGP_HEADER_LENGTH {
		return nil, fmt.Errorf("bad length %d", n)
	}
	body := make([]byte, n-gbgp.BGP_HEADER_LENGTH)
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	return gbgp.ParseBGPMessage(append(h, body...))
}

func writeMsg(c net.Conn, m *gbgp.BGPMessage) error {
	b, err := m.Serialize()
	if err != nil {
		return err
	}
	_, err = c.Write(b)
	return err
}

func (r *fakeRouter) serve(c net.Conn) {
	defer c.Close()
	r.mu.Lock()
	r.conn = c
	r.mu.Unlock()
	m, err := readMsg(c)
	if err != nil || m.Header.Type != gbgp.BGP_MSG_OPEN {
		return
	}
	open, err := gbgp.NewBGPOpenMessage(65001, 9, netip.MustParseAddr("127.0.0.2"), []gbgp.OptionParameterInterface{
		gbgp.NewOptionParameterCapability([]gbgp.ParameterCapabilityInterface{
			gbgp.NewCapMultiProtocol(gbgp.RF_IPv4_UC),
			gbgp.NewCapMultiProtocol(gbgp.RF_IPv6_UC),
			gbgp.NewCapFourOctetASNumber(65001),
		}),
	})
	if err != nil || writeMsg(c, open) != nil || writeMsg(c, gbgp.NewBGPKeepAliveMessage()) != nil {
		return
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if writeMsg(c, gbgp.NewBGPKeepAliveMessage()) != nil {
					return
				}
			}
		}
	}()
	for {
		m, err := readMsg(c)
		if err != nil {
			return
		}
		if m.Header.Type == gbgp.BGP_MSG_UPDATE {
			u := m.Body.(*gbgp.BGPUpdate)
			n, nlri := 0, slices.Clone(u.NLRI)
			for _, a := range u.PathAttributes {
				switch a := a.(type) {
				case *gbgp.PathAttributeCommunities:
					n = len(a.Value)
				case *gbgp.PathAttributeMpReachNLRI:
					nlri = append(nlri, a.Value...)
				}
			}
			r.mu.Lock()
			r.updates = append(r.updates, u)
			for _, p := range nlri {
				r.comms[p.NLRI.String()] = n
			}
			r.mu.Unlock()
		}
	}
}

// send writes m on the current session.
func (r *fakeRouter) send(t *testing.T, m *gbgp.BGPMessage) {
	t.Helper()
	r.mu.Lock()
	c := r.conn
	r.mu.Unlock()
	if c == nil {
		t.Fatal("no session")
	}
	if err := writeMsg(c, m); err != nil {
		t.Fatal(err)
	}
}

// announcedNLRI lists the IPv4 prefixes announced in the UPDATEs so far.
func (r *fakeRouter) announcedNLRI() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, u := range r.updates {
		for _, n := range u.NLRI {
			out = append(out, n.NLRI.String())
		}
	}
	return out
}

func loopbackSpeaker(t *testing.T, port int, mod func(*Config)) *Speaker {
	t.Helper()
	cfg := Config{
		ASN:       65100,
		RouterID:  "127.0.0.1",
		Neighbors: []Neighbor{{Address: "127.0.0.1", PeerASN: 65001, Port: port, ConnectRetry: time.Second}},
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func waitLoopbackEstablished(t *testing.T, s *Speaker) {
	t.Helper()
	waitFor(t, 10*time.Second, "session established", func() (bool, string) {
		p := s.Peers()[0]
		return p.State == StateEstablished, fmt.Sprintf("%+v", p)
	})
}

// The speaker is an originator: a route the router sends must not enter
// its RIB (else it could be re-advertised to another router).
func TestSpeakerImportsNothing(t *testing.T) {
	router := newFakeRouter(t, nil)
	s := loopbackSpeaker(t, router.port(), nil)
	if err := s.Announce(netip.MustParsePrefix("203.0.113.7/32"), VIPAttrs{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitLoopbackEstablished(t, s)
	waitFor(t, 5*time.Second, "VIP received by the router", func() (bool, string) {
		got := router.announcedNLRI()
		return strings.Contains(fmt.Sprint(got), "203.0.113.7/32"), fmt.Sprint(got)
	})
	// The router sends a default route and a more specific of the VIP.
	nlri := func(s string) gbgp.PathNLRI {
		p, err := gbgp.NewIPAddrPrefix(netip.MustParsePrefix(s))
		if err != nil {
			t.Fatal(err)
		}
		return gbgp.PathNLRI{NLRI: p}
	}
	nh, err := gbgp.NewPathAttributeNextHop(netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	router.send(t, gbgp.NewBGPUpdateMessage(nil, []gbgp.PathAttributeInterface{
		gbgp.NewPathAttributeOrigin(0),
		gbgp.NewPathAttributeAsPath([]gbgp.AsPathParamInterface{gbgp.NewAs4PathParam(gbgp.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{65001})}),
		nh,
	}, []gbgp.PathNLRI{nlri("0.0.0.0/0"), nlri("203.0.113.8/32")}))
	time.Sleep(time.Second)
	var global []string
	err = s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gbgp.RF_IPv4_UC},
		func(p gbgp.NLRI, _ []*apiutil.Path) { global = append(global, p.String()) })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(global) != "[203.0.113.7/32]" {
		t.Errorf("global RIB %v, want only the VIP", global)
	}
	if p := s.Peers()[0]; p.State != StateEstablished {
		t.Errorf("session dropped after the router's UPDATE: %+v", p)
	}
}

// childEnv names the scenario a re-executed test binary runs.
const childEnv = "FULCRUM_BGP_TEST_CHILD"

// childSurvived is logged by a child that got to its end.
const childSurvived = "child survived"

// runChild re-runs test in a child process with childEnv=name and fails
// if the child panicked, failed or did not get to its end.
func runChild(t *testing.T, test, name string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if i := strings.Index(string(out), "panic:"); i >= 0 || err != nil {
		t.Errorf("%s: the process died (%v):\n%.1500s", name, err, out[max(0, i):])
		return
	}
	if !strings.Contains(string(out), childSurvived) {
		t.Errorf("%s: the child did not run to its end:\n%.1500s", name, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, childSurvived) {
			t.Logf("%s: %s", name, strings.TrimSpace(l))
		}
	}
}

// A router (or anyone who can inject into the TCP session: no MD5) sends
// one message GoBGP cannot parse. GoBGP v3 dereferenced a nil message in
// fsmHandler.handlingError (osrg/gobgp#3325) and the whole process died:
// in fulcrum, the dataplane with it. The speaker must survive, answer
// with a NOTIFICATION, reset the session and try again.
func TestSpeakerSurvivesMalformedMessage(t *testing.T) {
	cases := map[string][]byte{
		// A well-formed header of unknown type 9 (RFC 4271 §6.1: answer
		// with a NOTIFICATION, Bad Message Type).
		"unknown-type": []byte(strings.Repeat("\xff", 16) + "\x00\x13\x09"),
		// Type 1 (OPEN) too short to decode.
		"short-open": []byte(strings.Repeat("\xff", 16) + "\x00\x15\x01\x04\x00"),
	}
	if name := os.Getenv(childEnv); name != "" {
		msg, ok := cases[name]
		if !ok {
			t.Skip("another child's scenario")
		}
		var notified atomic.Value
		router := newFakeRouter(t, func(c net.Conn) {
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			readMsg(c) // the speaker's OPEN
			c.Write(msg)
			for {
				m, err := readMsg(c)
				if err != nil {
					return
				}
				if n, ok := m.Body.(*gbgp.BGPNotification); ok {
					notified.Store(gbgp.NewNotificationErrorCode(n.ErrorCode, n.ErrorSubcode).String())
				}
			}
		})
		s := loopbackSpeaker(t, router.port(), nil)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "a second connection after the reset", func() (bool, string) {
			return router.conns.Load() >= 2, fmt.Sprintf("%d connections, %+v", router.conns.Load(), s.Peers()[0])
		})
		p := s.Peers()[0]
		if p.State == StateEstablished || p.LastError == "" {
			t.Errorf("after the malformed message: %+v, want not established, with a last error", p)
		}
		if notified.Load() == nil {
			t.Errorf("no NOTIFICATION sent for the malformed message")
		}
		t.Logf("%s: %d connections; notification %v; peer %+v", childSurvived, router.conns.Load(), notified.Load(), p)
		return
	}
	for name := range cases {
		t.Run(name, func(t *testing.T) { runChild(t, "TestSpeakerSurvivesMalformedMessage", name) })
	}
}

// receivedCommunities returns how many communities the router got with
// prefix, and whether it got prefix.
func (r *fakeRouter) receivedCommunities(prefix string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.comms[prefix]
	return n, ok
}

// A VIP with MaxCommunities communities reaches the router, IPv4 and
// IPv6, in one valid UPDATE; with more, added by the caller, Announce
// refuses it and the previous announcement stays. GoBGP's UPDATE packer
// panicked (killing the process) on attributes larger than a message,
// hence the child process.
func TestSpeakerCommunitiesFitOneUpdate(t *testing.T) {
	if os.Getenv(childEnv) != "communities" {
		runChild(t, "TestSpeakerCommunitiesFitOneUpdate", "communities")
		return
	}
	router := newFakeRouter(t, nil)
	s := loopbackSpeaker(t, router.port(), func(c *Config) {
		c.Communities = communityStrings(0, MaxCommunities-1)
		c.MED = u32(7)
		c.NextHopV6 = "2001:db8::99" // IPv6 VIPs over the IPv4 session
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitLoopbackEstablished(t, s)
	v4, v6 := netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("2001:db8::7/128")
	one := VIPAttrs{Communities: []Community{CommunityNoExport}}
	two := VIPAttrs{Communities: []Community{CommunityNoExport, CommunityNoAdvertise}}
	for _, p := range []netip.Prefix{v4, v6} {
		if err := s.Announce(p, one); err != nil {
			t.Fatalf("%v with %d communities: %v", p, MaxCommunities, err)
		}
	}
	for _, p := range []netip.Prefix{v4, v6} {
		err := s.Announce(p, two)
		if !errors.Is(err, ErrTooManyCommunities) {
			t.Errorf("%v with %d communities: %v, want ErrTooManyCommunities", p, MaxCommunities+1, err)
		}
		t.Logf("refused: %v", err)
	}
	err := s.SetAnnounced(map[netip.Prefix]VIPAttrs{v4: two, v6: one})
	if !errors.Is(err, ErrTooManyCommunities) {
		t.Errorf("SetAnnounced with one VIP over the limit: %v", err)
	}
	for _, p := range []netip.Prefix{v4, v6} {
		waitFor(t, 10*time.Second, fmt.Sprintf("%v received with %d communities", p, MaxCommunities), func() (bool, string) {
			n, ok := router.receivedCommunities(p.String())
			return ok && n == MaxCommunities, fmt.Sprintf("received %v, %d communities", ok, n)
		})
	}
	if got := s.Announced(); !slices.Equal(got, []netip.Prefix{v4, v6}) {
		t.Errorf("Announced() = %v, want the earlier announcements kept", got)
	}
	time.Sleep(time.Second)
	if p := s.Peers()[0]; p.State != StateEstablished || p.PrefixesSent != 2 {
		t.Errorf("peer %+v, want established with both VIPs", p)
	}
	t.Logf("%s: peer %+v", childSurvived, s.Peers()[0])
}

// A router that resets every connection, or answers garbage: the speaker
// keeps retrying at about connect_retry, stays bounded in goroutines and
// never crashes.
func TestSpeakerHostileRouters(t *testing.T) {
	if testing.Short() {
		t.Skip("22 s")
	}
	modes := map[string]func(net.Conn){
		"reset at once": func(c net.Conn) {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			c.Close()
		},
		"bad marker": func(c net.Conn) {
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			c.Write(make([]byte, 64))
			io.Copy(io.Discard, c)
		},
		"huge length": func(c net.Conn) {
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			h := []byte(strings.Repeat("\xff", 16) + "\xff\xff\x01")
			c.Write(h)
			io.Copy(io.Discard, c)
		},
		"open then notification-less close": func(c net.Conn) {
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := readMsg(c); err != nil {
				return
			}
			// OPEN with AS 0 and a zero router ID.
			if open, err := gbgp.NewBGPOpenMessage(0, 1, netip.IPv4Unspecified(), nil); err == nil {
				writeMsg(c, open)
			}
			io.Copy(io.Discard, c)
		},
	}
	before := runtime.NumGoroutine()
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			router := newFakeRouter(t, mode)
			s := loopbackSpeaker(t, router.port(), nil)
			if err := s.Announce(netip.MustParsePrefix("203.0.113.7/32"), VIPAttrs{}); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Second)
			n := router.conns.Load()
			p := s.Peers()[0]
			t.Logf("%d connections in 5s; goroutines %d; peer %+v", n, runtime.NumGoroutine(), p)
			if n < 1 || n > 8 {
				t.Errorf("%d connections in 5 s with connect_retry 1s", n)
			}
			if p.State == StateEstablished {
				t.Errorf("established with a hostile peer: %+v", p)
			}
			s.Stop()
		})
	}
	time.Sleep(2 * time.Second)
	if after := runtime.NumGoroutine(); after > before+20 {
		t.Errorf("goroutines %d before, %d after every hostile peer was stopped", before, after)
	}
}

// Start failing (listen port taken) returns at once, and the speaker is
// stopped cleanly.
func TestSpeakerStartListenPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s := loopbackSpeaker(t, 1179, func(c *Config) {
		c.ListenPort = port
		c.ListenAddresses = []string{"127.0.0.1"}
	})
	done := make(chan error, 1)
	go func() { done <- s.Start(context.Background()) }()
	select {
	case err := <-done:
		t.Logf("Start: %v", err)
		if err == nil {
			t.Errorf("Start succeeded on a taken listen port")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start hangs when the listen port is taken")
	}
	if err := s.Announce(netip.MustParsePrefix("203.0.113.7/32"), VIPAttrs{}); err == nil {
		t.Errorf("Announce after a failed Start: nil error")
	}
}
