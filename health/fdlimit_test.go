package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// signalProber tells the test when each probe starts and what it gave.
type signalProber struct {
	p       Prober
	started chan struct{}
	results chan error
}

func (s *signalProber) Probe(ctx context.Context, a netip.AddrPort) (time.Duration, error) {
	s.started <- struct{}{}
	rtt, err := s.p.Probe(ctx, a)
	s.results <- err
	return rtt, err
}

// exhaustFDs lowers RLIMIT_NOFILE's soft limit near the descriptors open
// now and opens /dev/null until the process has none left, as a daemon
// whose checks of thousands of silent backends hold every descriptor of
// a hard limit of 1024. All is undone at the end of the test.
func exhaustFDs(t *testing.T) {
	t.Helper()
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	low := syscall.Rlimit{Cur: uint64(len(ents)) + 32, Max: orig.Max}
	if low.Cur >= orig.Cur {
		t.Skip("soft limit already low")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig)
	})
	for i := 0; i < 1000; i++ {
		f, err := os.Open("/dev/null")
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
			return
		}
		files = append(files, f)
	}
	t.Fatal("no EMFILE after 1000 files")
}

// TestCheckLocalFDExhaustionIsNoVerdict: a check that cannot even create
// its socket (EMFILE: this process is out of descriptors) has learnt
// nothing about the backend, but it was judged as the backend's failure:
// every healthy backend whose checks ran while the limit was reached was
// called down (a row of silent backends holding descriptors for their
// timeouts takes the healthy ones out with them; with on_down = "move"
// their connections are moved, with panic_threshold = 0 the VIP is
// withdrawn). The backend must keep its state.
func TestCheckLocalFDExhaustionIsNoVerdict(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			c.Close()
		}
	}()
	cfg := fastConfig(KindTCP)
	cfg.Rise, cfg.Fall = 1, 1
	cfg.StartUp = true
	sp := &signalProber{p: &TCPProber{}, started: make(chan struct{}, 1000), results: make(chan error, 1000)}
	c, _ := startChecker(t, Target{Addr: netip.MustParseAddrPort(ln.Addr().String()), Config: cfg}, sp)
	// One passing check first: the backend is proven up.
	deadline := time.After(waitFor)
	for passed := false; !passed; {
		select {
		case err := <-sp.results:
			passed = err == nil
		case <-deadline:
			t.Fatal("no passing check")
		}
	}
	exhaustFDs(t)
	// Two checks that met EMFILE, and the start of the next (so the
	// second was judged).
	for n := 0; n < 2; {
		select {
		case err := <-sp.results:
			if errors.Is(err, syscall.EMFILE) {
				n++
			}
		case <-deadline:
			t.Fatal("no check met EMFILE")
		}
	}
	for drained := false; !drained; {
		select {
		case <-sp.started:
		default:
			drained = true
		}
	}
	select {
	case <-sp.started:
	case <-deadline:
		t.Fatal("no further check")
	}
	if st := c.Status(); st.State != Up || st.ConsecutiveFail != 0 {
		t.Errorf("after checks that could not open a socket: state %v, %d failures in a row (%q), want up and none", st.State, st.ConsecutiveFail, st.Reason)
	}
}

// errProber fails every check with err, counting them.
type errProber struct {
	err error
	n   *atomic.Int64
}

func (p errProber) Probe(context.Context, netip.AddrPort) (time.Duration, error) {
	p.n.Add(1)
	return 0, p.err
}

// TestManagerCountsLocalFailures: checks this host failed to make are
// counted (Manager.LocalFailures, which the status, the API and a metric
// show) and judged by nobody, whatever the wrapping; a backend's own
// failure (refused) is judged and not counted.
func TestManagerCountsLocalFailures(t *testing.T) {
	for _, tc := range []struct {
		err   error
		local bool
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}, true},
		{fmt.Errorf("tcp connect: %w", syscall.ENFILE), true},
		{fmt.Errorf("tcp connect: %w", syscall.ENOBUFS), true},
		{fmt.Errorf("tcp connect: %w", syscall.ECONNREFUSED), false},
	} {
		var n atomic.Int64
		m := NewManager(ManagerOptions{NewProber: func(string, Target) (Prober, error) { return errProber{tc.err, &n}, nil }})
		cfg := fastConfig(KindTCP)
		cfg.Rise, cfg.Fall = 1, 1
		if err := m.Set(map[string]Target{"web/be1": {Addr: netip.MustParseAddrPort("192.0.2.1:80"), Config: cfg}}); err != nil {
			t.Fatal(err)
		}
		poll(t, "checks", func() bool { return n.Load() >= 3 })
		st, _ := m.Status("web/be1")
		m.Close()
		if got := m.LocalFailures(); tc.local && (got < 3 || st.Checks != 0 || st.State != Unknown) {
			t.Errorf("%v: %d checks, %d counted as local failures, %d judged, state %v; want every one counted, none judged, unknown", tc.err, n.Load(), got, st.Checks, st.State)
		} else if !tc.local && (got != 0 || st.State != Down) {
			t.Errorf("%v (the backend's): %d counted as local failures, state %v; want 0, down", tc.err, got, st.State)
		}
	}
}
