package health

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor is how long a test waits for an event before it gives up: far
// beyond any check interval used here, so only a real bug hits it.
const waitFor = 10 * time.Second

// fastConfig checks every 50 ms. Flap damping is as good as off (the
// smallest window, 2 checks, is shorter than any Up period at fall 3) so
// that tests of rise and fall see no ejections.
func fastConfig(kind string) Config {
	c := DefaultConfig()
	c.Kind = kind
	c.Interval = 50 * time.Millisecond
	c.Timeout = 45 * time.Millisecond
	c.FlapWindow = MinFlapWindow
	return c
}

// startChecker runs a checker of target until the test ends and returns it
// with its events.
func startChecker(t *testing.T, target Target, prober Prober) (*Checker, <-chan Event) {
	t.Helper()
	events := make(chan Event, 1000)
	c, err := NewChecker("b", target, prober, func(e Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c, events
}

func next(t *testing.T, events <-chan Event) Event {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(waitFor):
		t.Fatalf("no event within %v", waitFor)
		return Event{}
	}
}

// expect takes the next event and checks its transition.
func expect(t *testing.T, events <-chan Event, old, new State) Event {
	t.Helper()
	e := next(t, events)
	if e.Old != old || e.New != new {
		t.Fatalf("event %v>%v (%s), want %v>%v", e.Old, e.New, e.Reason, old, new)
	}
	return e
}

func serverAddr(t *testing.T, rawURL string) netip.AddrPort {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return netip.MustParseAddrPort(u.Host)
}

func TestTCPCheckListenerCloseReopen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort(ln.Addr().String())
	cfg := fastConfig(KindTCP)
	_, events := startChecker(t, Target{Addr: ap, Config: cfg}, nil)

	e := expect(t, events, Unknown, Up)
	if e.Status.ConsecutiveOK != cfg.Rise || e.Status.LastRTT <= 0 || e.Status.RTTEWMA <= 0 {
		t.Fatalf("up: %+v", e.Status)
	}
	ln.Close() // nothing listens on the port now: connect is refused
	e = expect(t, events, Up, Down)
	if e.Status.ConsecutiveFail != cfg.Fall || !errors.Is(e.Err, ErrConnect) || e.Ejected {
		t.Fatalf("down: err %v, status %+v", e.Err, e.Status)
	}
	ln, err = net.Listen("tcp", ap.String()) // the same port again
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e = expect(t, events, Down, Up)
	if e.Status.ConsecutiveOK != cfg.Rise {
		t.Fatalf("up again: %+v", e.Status)
	}
}

// statusServer answers every request with the status in code.
func statusServer(t *testing.T, tls bool) (*httptest.Server, *atomic.Int32) {
	var code atomic.Int32
	code.Store(http.StatusOK)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(code.Load())) })
	s := httptest.NewUnstartedServer(h)
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s, &code
}

func TestHTTPCheckStatusFlip(t *testing.T) {
	srv, code := statusServer(t, false)
	cfg := fastConfig(KindHTTP)
	cfg.ExpectStatus = "200-299"
	c, events := startChecker(t, Target{Addr: serverAddr(t, srv.URL), Config: cfg}, nil)

	e := expect(t, events, Unknown, Up)
	if s := e.Status; s.Checks != uint64(cfg.Rise) || s.Failures != 0 || s.ConsecutiveOK != cfg.Rise {
		t.Fatalf("up after %d checks, %d failures, %d in a row; want exactly rise=%d passes", s.Checks, s.Failures, s.ConsecutiveOK, cfg.Rise)
	}
	code.Store(http.StatusServiceUnavailable)
	e = expect(t, events, Up, Down)
	if s := e.Status; s.ConsecutiveFail != cfg.Fall || s.ConsecutiveOK != 0 || !errors.Is(e.Err, ErrStatus) || !errors.Is(s.LastErr, ErrStatus) {
		t.Fatalf("down: err %v, status %+v; want fall=%d failing checks", e.Err, s, cfg.Fall)
	}
	downChecks := e.Status.Checks
	code.Store(http.StatusOK)
	e = expect(t, events, Down, Up)
	if s := e.Status; s.ConsecutiveOK != cfg.Rise || s.LastErr != nil {
		t.Fatalf("up again: %+v", s)
	}
	if e.Status.Checks < downChecks+uint64(cfg.Rise) {
		t.Fatalf("up after %d checks, down after %d: fewer than rise between", e.Status.Checks, downChecks)
	}
	if st := c.Status(); st.State != Up || st.Checks < e.Status.Checks {
		t.Fatalf("Status() = %+v after the last event %+v", st, e.Status)
	}
}

func TestHTTPCheckHostAndPath(t *testing.T) {
	type seen struct{ host, uri, ua string }
	got := make(chan seen, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- seen{r.Host, r.URL.RequestURI(), r.UserAgent()}:
		default:
		}
	}))
	defer srv.Close()
	cfg := fastConfig(KindHTTP)
	cfg.Host = "app.example:8080"
	cfg.Path = "/healthz?deep=1"
	startChecker(t, Target{Addr: serverAddr(t, srv.URL), Config: cfg}, nil)
	select {
	case s := <-got:
		if s.host != cfg.Host || s.uri != cfg.Path || s.ua != UserAgent {
			t.Fatalf("server saw Host %q, target %q, User-Agent %q; want %q, %q, %q", s.host, s.uri, s.ua, cfg.Host, cfg.Path, UserAgent)
		}
	case <-time.After(waitFor):
		t.Fatal("no request reached the server")
	}
}

// The check port overrides the service port.
func TestCheckPortOverride(t *testing.T) {
	srv, _ := statusServer(t, false)
	ap := serverAddr(t, srv.URL)
	cfg := fastConfig(KindHTTP)
	cfg.Port = int(ap.Port())
	target := Target{Addr: netip.AddrPortFrom(ap.Addr(), 1), Config: cfg} // nothing serves port 1
	if target.ProbeAddr() != ap {
		t.Fatalf("ProbeAddr = %v, want %v", target.ProbeAddr(), ap)
	}
	_, events := startChecker(t, target, nil)
	expect(t, events, Unknown, Up)
}

func TestHTTPSCheck(t *testing.T) {
	srv, _ := statusServer(t, true)
	cfg := fastConfig(KindHTTPS)
	// TLS handshakes are slow under the race detector: give them time.
	cfg.Interval, cfg.Timeout = 400*time.Millisecond, 350*time.Millisecond
	cfg.Host = "example.com" // in httptest's certificate, used for SNI
	_, events := startChecker(t, Target{Addr: serverAddr(t, srv.URL), Config: cfg}, nil)
	expect(t, events, Unknown, Up) // skip-verify by default

	// Verifying the test server's self-signed certificate fails.
	cfg.TLSVerify = true
	cfg.Fall = 1
	_, events = startChecker(t, Target{Addr: serverAddr(t, srv.URL), Config: cfg}, nil)
	e := expect(t, events, Unknown, Down)
	if !errors.Is(e.Err, ErrRequest) || errors.Is(e.Err, ErrTimeout) {
		t.Fatalf("err %v, want a TLS request failure", e.Err)
	}
}

func TestHTTPCheckTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for handlers
	cfg := fastConfig(KindHTTP)
	cfg.Timeout = 20 * time.Millisecond
	cfg.Fall = 2
	c, events := startChecker(t, Target{Addr: serverAddr(t, srv.URL), Config: cfg}, nil)
	e := expect(t, events, Unknown, Down)
	var ce *CheckError
	if !errors.Is(e.Err, ErrTimeout) || !errors.As(e.Err, &ce) || e.Status.ConsecutiveFail != cfg.Fall {
		t.Fatalf("err %v, status %+v; want %d timeouts", e.Err, e.Status, cfg.Fall)
	}
	if st := c.Status(); st.Failures < uint64(cfg.Fall) || st.RTTEWMA != 0 {
		t.Fatalf("status %+v: timeouts must count as failures and leave the RTT unset", st)
	}
}

// A backend that goes down right after coming up is ejected, for a backoff
// that doubles with each flap up to the max; passing checks cannot bring
// it back before the ejection ends.
func TestFlappingBackendEjected(t *testing.T) {
	srv, code := statusServer(t, false)
	cfg := fastConfig(KindHTTP)
	cfg.Interval, cfg.Timeout = 20*time.Millisecond, 15*time.Millisecond
	cfg.Rise, cfg.Fall = 1, 1
	cfg.FlapWindow = MaxFlapWindow // every up period in this test is a flap
	cfg.BackoffBase, cfg.BackoffMax = 40*time.Millisecond, 100*time.Millisecond
	_, events := startChecker(t, Target{Addr: serverAddr(t, srv.URL), Config: cfg}, nil)

	expect(t, events, Unknown, Up)
	// The first fall ends the checker's first Up period, its first
	// verdict: a failure, not a flap.
	code.Store(http.StatusInternalServerError)
	if down := next(t, events); down.New != Down || down.Ejected {
		t.Fatalf("first fall: %v>%v, ejected %v; want down without an ejection", down.Old, down.New, down.Ejected)
	}
	code.Store(http.StatusOK)
	up := expect(t, events, Down, Up)
	var backoff time.Duration
	for i := 1; i <= 4; i++ {
		code.Store(http.StatusInternalServerError)
		down := next(t, events)
		if down.New != Down || !down.Ejected {
			t.Fatalf("flap %d: %v>%v, ejected %v; want an ejection", i, down.Old, down.New, down.Ejected)
		}
		want := cfg.BackoffBase
		if backoff > 0 {
			want = min(2*backoff, cfg.BackoffMax)
		}
		s := down.Status
		if s.Backoff != want || s.Ejections != i || !s.EjectedUntil.Equal(down.Time.Add(want)) {
			t.Fatalf("flap %d: backoff %v, ejections %d, until %v; want %v, %d, %v", i, s.Backoff, s.Ejections, s.EjectedUntil, want, i, down.Time.Add(want))
		}
		if !down.Time.After(up.Time) {
			t.Fatalf("flap %d: events out of order", i)
		}
		backoff = s.Backoff
		code.Store(http.StatusOK)
		up = expect(t, events, Down, Up)
		if up.Time.Before(s.EjectedUntil) {
			t.Fatalf("flap %d: up at %v, before the ejection ended at %v", i, up.Time, s.EjectedUntil)
		}
	}
	if backoff != cfg.BackoffMax {
		t.Fatalf("after 4 flaps the backoff is %v, want the max %v", backoff, cfg.BackoffMax)
	}
}

// A target with an IPv6 zone is refused: the HTTP check's URL cannot carry
// one ("invalid URL escape"), so every check of it failed before it
// connected, although Validate had accepted it (found by a probe). Package
// config refuses zones too. An IPv6 address without one is fine.
func TestTargetValidateZone(t *testing.T) {
	cfg := fastConfig(KindHTTP)
	tcfg := cfg
	tcfg.Through = ThroughTunnel
	for _, tc := range []struct {
		name string
		t    Target
		ok   bool
	}{
		{"ipv6", Target{Addr: netip.MustParseAddrPort("[fe80::1]:80"), Config: cfg}, true},
		{"ipv6 with zone", Target{Addr: netip.MustParseAddrPort("[fe80::1%eth0]:80"), Config: cfg}, false},
		{"loopback with zone", Target{Addr: netip.MustParseAddrPort("[::1%lo]:80"), Config: cfg}, false},
		{"tcp check, zone", Target{Addr: netip.MustParseAddrPort("[fe80::1%eth0]:80"), Config: fastConfig(KindTCP)}, false},
		{"tunnel, vip with zone", Target{Addr: netip.MustParseAddrPort("[2001:db8::5]:80"), Config: tcfg,
			Tunnel: Tunnel{VIP: netip.MustParseAddr("fe80::7%eth0"), Source: netip.MustParseAddrPort("[2001:db8::1]:61000")}}, false},
		{"tunnel, source with zone", Target{Addr: netip.MustParseAddrPort("[2001:db8::5]:80"), Config: tcfg,
			Tunnel: Tunnel{VIP: netip.MustParseAddr("2001:db8::7"), Source: netip.MustParseAddrPort("[fe80::1%eth0]:61000")}}, false},
	} {
		err := tc.t.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "zone")) {
			t.Errorf("%s: %v does not wrap ErrConfig or name the zone", tc.name, err)
		}
	}
	if _, err := NewChecker("b", Target{Addr: netip.MustParseAddrPort("[::1%lo]:80"), Config: cfg}, nil, nil); err == nil {
		t.Error("NewChecker accepted a zoned address")
	}
}

// The same end to end: a backend answering 200 and 503 in turn (a check
// port behind a round robin of a good and a wedged worker) gets a verdict,
// Down, after rise+fall checks; it stayed Unknown for ever, without an
// event (found by a probe).
func TestHTTPCheckAlternatingBackendGetsVerdict(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	cfg := fastConfig(KindHTTP) // rise 2, fall 3
	// Long enough that no check times out and upsets the pattern.
	cfg.Interval, cfg.Timeout = 100*time.Millisecond, 90*time.Millisecond
	_, events := startChecker(t, Target{Addr: serverAddr(t, srv.URL), Config: cfg}, nil)
	e := expect(t, events, Unknown, Down)
	if e.Ejected || e.Status.Checks != uint64(cfg.Rise+cfg.Fall) || !errors.Is(e.Err, ErrStatus) || !strings.HasPrefix(e.Reason, "no verdict: ") {
		t.Fatalf("event %+v: want down without an ejection after %d checks, reason \"no verdict: ...\"", e, cfg.Rise+cfg.Fall)
	}
}

// proberOf is a Prober from a function.
type proberOf func(netip.AddrPort) error

func (f proberOf) Probe(_ context.Context, a netip.AddrPort) (time.Duration, error) {
	return time.Millisecond, f(a)
}

// An event names the checked backend's configured address (Target) as
// well as where the check connected (Addr, here the check's own port): a
// consumer tells a backend's old address from its new one by Target,
// which is the same however the check goes (through the tunnel Addr is
// the VIP).
func TestEventNamesTheTarget(t *testing.T) {
	cfg := fastConfig("tcp")
	cfg.Port = 8080
	target := Target{Addr: netip.MustParseAddrPort("127.0.0.1:80"), Config: cfg}
	var probed atomic.Value
	_, events := startChecker(t, target, proberOf(func(a netip.AddrPort) error {
		probed.Store(a)
		return nil
	}))
	e := expect(t, events, Unknown, Up)
	if e.Target != target.Addr || e.Addr != target.ProbeAddr() || probed.Load() != target.ProbeAddr() {
		t.Errorf("event Target %v Addr %v (probed %v); want %v and %v", e.Target, e.Addr, probed.Load(), target.Addr, target.ProbeAddr())
	}
}
