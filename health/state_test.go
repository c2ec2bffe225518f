package health

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var (
	t0      = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	errFail = &CheckError{Kind: ErrConnect, Msg: "tcp connect: connection refused"}
	addr    = netip.MustParseAddrPort("10.0.0.5:80")
)

// drive feeds results ('+' pass, '-' fail), one per step, and returns the
// transitions as "i:old>new", with "!" for an ejection.
func drive(m *machine, seq string, start time.Time, step time.Duration) []string {
	var out []string
	for i, r := range seq {
		var err error
		if r == '-' {
			err = errFail
		}
		if ev, ok := m.observe(start.Add(time.Duration(i)*step), time.Millisecond, err); ok {
			s := fmt.Sprintf("%d:%v>%v", i, ev.Old, ev.New)
			if ev.Ejected {
				s += "!"
			}
			out = append(out, s)
		}
	}
	return out
}

func TestMachineRiseFall(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rise, fall int
		startUp    bool
		seq        string
		want       string
	}{
		{"unknown up after rise", 2, 3, false, "++", "1:unknown>up"},
		{"unknown stays below rise", 3, 3, false, "++-++", ""},
		{"unknown down after fall", 2, 3, false, "---", "2:unknown>down"},
		{"unknown alternating: no verdict in rise+fall", 2, 3, false, "+-+-+-++", "4:unknown>down 7:down>up"},
		{"unknown two thirds failing: no verdict", 2, 3, false, "+--+--+--", "4:unknown>down"},
		{"unknown, fall on the last check", 2, 3, false, "-+---", "4:unknown>down"},
		{"unknown, rise on the last check", 2, 3, false, "-+-++", "4:unknown>up"},
		{"start_up alternating", 2, 3, true, "+-+-+-+-", ""},
		{"up tolerates fall-1", 2, 3, false, "++--+--+---", "1:unknown>up 10:up>down"},
		{"down needs rise in a row", 2, 2, false, "--+-++", "1:unknown>down 5:down>up"},
		{"rise 1 fall 1", 1, 1, false, "+-+-", "0:unknown>up 1:up>down 2:down>up 3:up>down"},
		{"start_up first failure", 2, 3, true, "-", "0:up>down"},
		{"start_up confirmed needs fall", 2, 3, true, "+--+---", "6:up>down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Rise, cfg.Fall, cfg.StartUp = tc.rise, tc.fall, tc.startUp
			cfg.FlapWindow = 1 // below MinFlapWindow (only the machine takes it): no Up period is that short, so no flap damping
			m := newMachine("b", addr, cfg, t0)
			got := strings.Join(drive(m, tc.seq, t0, time.Second), " ")
			if got != tc.want {
				t.Fatalf("transitions %q, want %q", got, tc.want)
			}
			st := m.st
			if st.Checks != uint64(len(tc.seq)) || st.Failures != uint64(strings.Count(tc.seq, "-")) {
				t.Fatalf("checks %d failures %d, want %d and %d", st.Checks, st.Failures, len(tc.seq), strings.Count(tc.seq, "-"))
			}
		})
	}
}

func TestMachineEventAndCounters(t *testing.T) {
	cfg := DefaultConfig() // rise 2, fall 3
	m := newMachine("web/a", addr, cfg, t0)
	if m.st.State != Unknown || m.st.Routable() {
		t.Fatalf("initial state %v, want unknown and not routable", m.st.State)
	}
	m.observe(t0, 3*time.Millisecond, nil)
	ev, ok := m.observe(t0.Add(2*time.Second), 5*time.Millisecond, nil)
	if !ok || ev.Old != Unknown || ev.New != Up || ev.Err != nil || ev.Key != "web/a" || ev.Coalesced != 1 {
		t.Fatalf("event %+v, want unknown>up for web/a", ev)
	}
	if s := ev.Status; s.ConsecutiveOK != 2 || s.Checks != 2 || s.LastRTT != 5*time.Millisecond || !s.Since.Equal(ev.Time) {
		t.Fatalf("status %+v", s)
	}
	// EWMA: 3ms, then 3 + 0.25×(5−3) = 3.5ms.
	if got := ev.Status.RTTEWMA; got != 3500*time.Microsecond {
		t.Fatalf("RTTEWMA = %v, want 3.5ms", got)
	}
	// Up for a whole flap window (20 checks), then failures; they leave the
	// RTT alone (a fast refusal must not look fast).
	for i := range cfg.EffectiveFlapWindow() {
		m.observe(t0.Add(time.Duration(3+i)*time.Second), 5*time.Millisecond, nil)
	}
	for i := range 3 {
		ev, ok = m.observe(t0.Add(time.Duration(3+i)*time.Minute), 0, errFail)
	}
	if !ok || ev.New != Down || !errors.Is(ev.Err, ErrConnect) || ev.Status.ConsecutiveFail != 3 {
		t.Fatalf("event %+v, want up>down after 3 failures", ev)
	}
	if ev.Status.RTTEWMA < 3500*time.Microsecond || ev.Status.RTTEWMA > 5*time.Millisecond || ev.Status.LastError != errFail.Msg || ev.Reason != errFail.Msg {
		t.Fatalf("status %+v", ev.Status)
	}
	if ev.Ejected || ev.Status.Ejections != 0 {
		t.Fatalf("an up period of a whole window (20 checks) was taken for a flap: %+v", ev)
	}
}

// A backend that cannot stay up is ejected; each flap doubles the ejection
// up to the max; passes during an ejection are counted but do not bring it
// up; the backoff resets after a whole window up.
func TestMachineFlapBackoff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rise, cfg.Fall = 2, 1
	cfg.FlapWindow = 60 // checks: a minute at this test's one check a second
	cfg.BackoffBase, cfg.BackoffMax = 10*time.Second, 25*time.Second
	m := newMachine("b", addr, cfg, t0)
	now := t0
	step := func(d time.Duration, pass bool) (Event, bool) {
		now = now.Add(d)
		var err error
		if !pass {
			err = errFail
		}
		return m.observe(now, time.Millisecond, err)
	}
	up := func() {
		t.Helper()
		for range 1000 {
			if ev, ok := step(time.Second, true); ok {
				if ev.New != Up {
					t.Fatalf("event %+v, want up", ev)
				}
				return
			}
		}
		t.Fatal("never came up")
	}
	up()
	// The first fall after the first Up (the checker's first verdict,
	// not a change of one) is a failure, not a flap.
	if ev, ok := step(time.Second, false); !ok || ev.New != Down || ev.Ejected || ev.Reason != errFail.Msg {
		t.Fatalf("first fall: event %+v ok=%v, want down without an ejection", ev, ok)
	}
	up()
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 25 * time.Second, 25 * time.Second} {
		ev, ok := step(time.Second, false)
		if !ok || ev.New != Down || !ev.Ejected || ev.Status.Backoff != want || ev.Status.Ejections != i+1 {
			t.Fatalf("flap %d: event %+v ok=%v, want an ejection for %v", i, ev, ok, want)
		}
		downAt := now
		if !ev.Status.EjectedUntil.Equal(downAt.Add(want)) || !ev.Status.Ejected(now) {
			t.Fatalf("flap %d: ejected until %v, want %v", i, ev.Status.EjectedUntil, downAt.Add(want))
		}
		if !strings.HasPrefix(ev.Reason, "flapping: ejected for") || !errors.Is(ev.Err, ErrConnect) {
			t.Fatalf("flap %d: reason %q err %v", i, ev.Reason, ev.Err)
		}
		// Passing checks all through the ejection: no Up before it ends.
		for now.Add(time.Second).Before(ev.Status.EjectedUntil) {
			if ev2, ok := step(time.Second, true); ok {
				t.Fatalf("flap %d: %v>%v during the ejection", i, ev2.Old, ev2.New)
			}
		}
		if m.st.ConsecutiveOK < cfg.Rise {
			t.Fatalf("flap %d: passes were not counted during the ejection", i)
		}
		ev, ok = step(time.Second, true)
		if !ok || ev.New != Up || ev.Time.Before(downAt.Add(want)) {
			t.Fatalf("flap %d: event %+v, want up right after the ejection", i, ev)
		}
	}
	// Up for a whole window: the backoff is forgiven, and a later fall is
	// not a flap.
	for range 60 {
		step(time.Second, true)
	}
	if m.st.Backoff != 0 || m.st.State != Up {
		t.Fatalf("after a stable window: backoff %v state %v, want 0 and up", m.st.Backoff, m.st.State)
	}
	if ev, ok := step(time.Second, false); !ok || ev.Ejected {
		t.Fatalf("fall after a stable window: %+v, want down without ejection", ev)
	}
	up()
	if ev, ok := step(time.Second, false); !ok || !ev.Ejected || ev.Status.Backoff != cfg.BackoffBase || ev.Status.Ejections != 5 {
		t.Fatalf("first flap after the reset: %+v, want an ejection for the base %v", ev, cfg.BackoffBase)
	}
}

// A checker's first Up (from Unknown, or StartUp's) is its first verdict,
// not a change of one: a fall soon after it is a failure, as every other
// instance of the fleet, whose checker has run longer, sees it. Only an Up
// that followed a Down can end in a flap. (Found by the lab demo: the
// instance restarted a few seconds before a backend was killed reported
// "flapping" and held it out 2 s longer than its peer.)
func TestMachineFirstUpIsNotAFlap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		startUp bool
		seq     string
		want    string
	}{
		{"from unknown", false, "++-", "1:unknown>up 2:up>down"},
		{"start_up confirmed", true, "+-", "1:up>down"},
		{"then a short up again", false, "++-++-", "1:unknown>up 2:up>down 4:down>up 5:up>down!"},
		{"down first, then a short up", false, "-++-", "0:unknown>down 2:down>up 3:up>down!"},
		{"start_up failing at once, then a short up", true, "-++-", "0:up>down 2:down>up 3:up>down!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Rise, cfg.Fall, cfg.StartUp = 2, 1, tc.startUp
			m := newMachine("b", addr, cfg, t0) // the default window: 20 checks
			if got := strings.Join(drive(m, tc.seq, t0, time.Second), " "); got != tc.want {
				t.Fatalf("transitions %q, want %q", got, tc.want)
			}
		})
	}
}

// The lab's flapping backend (issue: a 2 s flap at a 200 ms interval was
// never damped, because the old window was 2×(rise+fall)×interval = 1.6 s):
// with the default window of 20 checks, any flap whose Up period is
// shorter than 20 checks is damped. After the first flap the backend is held
// Down for the backoff and its state stops following the flap.
func TestMachineFlapWindowInChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		toggle int // checks between changes of the endpoint's answer
	}{
		{"toggles every 2s", 10}, // 10 checks pass, 10 fail: a 4 s cycle
		{"toggles every 1s", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig() // flap window: the default
			cfg.Interval, cfg.Timeout = 200*time.Millisecond, 150*time.Millisecond
			cfg.Rise, cfg.Fall = 2, 2
			cfg.BackoffBase, cfg.BackoffMax = 10*time.Second, 5*time.Minute
			m := newMachine("b", addr, cfg, t0)
			var seq strings.Builder
			const checks = 300 // 60 s of flapping
			for i := 0; i < checks; i++ {
				if (i/tc.toggle)%2 == 0 {
					seq.WriteByte('+')
				} else {
					seq.WriteByte('-')
				}
			}
			got := drive(m, seq.String(), t0, cfg.Interval)
			// Undamped, the 60 s make one Down per cycle: 15 (or 30) of
			// them. Damped, the ejection holds it down 10 s, then 20 s, then
			// 40 s: a handful of transitions.
			downs, ejections := 0, 0
			for _, s := range got {
				if strings.Contains(s, ">down") {
					downs++
				}
				if strings.HasSuffix(s, "!") {
					ejections++
				}
			}
			if ejections == 0 || downs > 4 {
				t.Fatalf("%d downs, %d ejections in 60 s of flapping: %v", downs, ejections, got)
			}
			if m.st.Ejections != ejections || m.st.Backoff < cfg.BackoffBase {
				t.Fatalf("status: ejections %d backoff %v", m.st.Ejections, m.st.Backoff)
			}
		})
	}
}

// A backend whose checks never settle (alternating pass and fail, or two
// failures to a pass: never rise passes nor fall failures in a row) gets a
// verdict after rise+fall checks: Down, with a reason that says so. It
// stayed Unknown for ever, without an event, and package control withholds
// a VIP's announcement until every backend has given its first verdict
// (found by a probe). Like any Down from Unknown it is a first verdict, not
// a flap: no ejection, and the flap rules apply to the Up periods after it.
func TestMachineNoVerdictDecidesDown(t *testing.T) {
	for _, tc := range []struct {
		rise, fall int
		pattern    string
		failed     int // of the first rise+fall checks
	}{
		{2, 3, "+-", 2},
		{2, 3, "-+", 3},
		{2, 3, "+--", 3},
		{3, 3, "++-", 2},
		{4, 2, "+++-", 1},
	} {
		name := fmt.Sprintf("rise %d fall %d %s", tc.rise, tc.fall, tc.pattern)
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Rise, cfg.Fall = tc.rise, tc.fall
			m := newMachine("b", addr, cfg, t0)
			n := tc.rise + tc.fall
			all := strings.Repeat(tc.pattern, 100)
			seq := all[:n]
			var ev Event
			var ok bool
			for i, r := range seq {
				var err error
				if r == '-' {
					err = errFail
				}
				ev, ok = m.observe(t0.Add(time.Duration(i)*time.Second), time.Millisecond, err)
				if ok != (i == n-1) {
					t.Fatalf("check %d of %q: event %v, want one at check %d alone", i, seq, ok, n-1)
				}
			}
			if ev.Old != Unknown || ev.New != Down || ev.Ejected || ev.Status.Ejections != 0 || ev.Status.Backoff != 0 || !ev.Status.EjectedUntil.IsZero() {
				t.Fatalf("event %+v, want unknown>down without an ejection", ev)
			}
			want := fmt.Sprintf("no verdict: %d of %d checks failed, never %d passes in a row (last failure: %v)", tc.failed, n, tc.rise, errFail)
			if ev.Reason != want || m.st.Reason != want || !errors.Is(ev.Err, ErrConnect) || !ev.Time.Equal(m.st.Since) {
				t.Fatalf("reason %q err %v, want %q and the last failure", ev.Reason, ev.Err, want)
			}
			// Down stays Down while the pattern goes on: the verdict holds.
			if got := drive(m, all[n:], t0.Add(time.Hour), time.Second); len(got) != 0 {
				t.Fatalf("after the verdict: %v", got)
			}
		})
	}
	// After that Down, a short Up period is a flap, as after any Down.
	cfg := DefaultConfig()
	m := newMachine("b", addr, cfg, t0)
	if got := strings.Join(drive(m, "+-+-+-++---", t0, time.Second), " "); got != "4:unknown>down 7:down>up 10:up>down!" {
		t.Fatalf("transitions %q", got)
	}
}

// A reload that lowers flap_backoff_max cuts an ejection already running to
// the new maximum from its start: the inherited state kept the old end, up
// to an hour, which the operator who lowered it to get a backend back had
// to wait out (found by a probe). A reload that raises it leaves the
// running ejection alone.
func TestMachineReloadCutsEjection(t *testing.T) {
	eject := func() (*machine, Config, time.Time) {
		cfg := DefaultConfig()
		cfg.Rise, cfg.Fall = 1, 1
		cfg.BackoffBase, cfg.BackoffMax = time.Hour, time.Hour
		m := newMachine("b", addr, cfg, t0)
		if got := strings.Join(drive(m, "-+-", t0, time.Second), " "); got != "0:unknown>down 1:down>up 2:up>down!" {
			t.Fatalf("transitions %q, want an ejection", got)
		}
		start := t0.Add(2 * time.Second)
		if !m.st.EjectedUntil.Equal(start.Add(time.Hour)) {
			t.Fatalf("ejected until %v", m.st.EjectedUntil)
		}
		return m, cfg, start
	}

	// Cut to a maximum already over: the next passing check brings it Up.
	m, cfg, start := eject()
	cfg.BackoffBase, cfg.BackoffMax = time.Second, time.Second
	m.configure(cfg)
	if s := m.st; s.State != Down || s.Backoff != time.Second || !s.EjectedUntil.Equal(start.Add(time.Second)) ||
		s.Reason != "flapping: ejected for 1s (tcp connect: connection refused)" || s.Ejections != 1 {
		t.Fatalf("after the reload: %+v, want an ejection of 1s from %v", s, start)
	}
	if ev, ok := m.observe(start.Add(8*time.Second), time.Millisecond, nil); !ok || ev.New != Up {
		t.Fatalf("pass 8s after the ejection began: %v %+v, want up", ok, ev)
	}

	// Cut to a maximum still running: held until start + the new maximum.
	m, cfg, start = eject()
	cfg.BackoffBase, cfg.BackoffMax = 10*time.Second, time.Minute
	m.configure(cfg)
	if !m.st.EjectedUntil.Equal(start.Add(time.Minute)) || m.st.Backoff != time.Minute {
		t.Fatalf("after the reload: until %v backoff %v, want %v and 1m", m.st.EjectedUntil, m.st.Backoff, start.Add(time.Minute))
	}
	if _, ok := m.observe(start.Add(59*time.Second), time.Millisecond, nil); ok {
		t.Fatal("up before the cut ejection ended")
	}
	if ev, ok := m.observe(start.Add(time.Minute), time.Millisecond, nil); !ok || ev.New != Up {
		t.Fatalf("at the cut ejection's end: %v %+v, want up", ok, ev)
	}

	// The same through a reload's new checker, which inherits the state.
	m, cfg, start = eject()
	old, err := NewChecker("b", Target{Addr: addr, Config: cfg}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	old.m = m
	cfg.BackoffBase, cfg.BackoffMax = time.Second, 5*time.Second
	c, err := NewChecker("b", Target{Addr: addr, Config: cfg}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.inherit(old)
	if s := c.Status(); !s.EjectedUntil.Equal(start.Add(5*time.Second)) || s.Backoff != 5*time.Second {
		t.Fatalf("inherited: until %v backoff %v, want %v and 5s", s.EjectedUntil, s.Backoff, start.Add(5*time.Second))
	}

	// Raised, or lowered above the running ejection: unchanged.
	for _, max := range []time.Duration{time.Hour, MaxBackoff} {
		m, cfg, start = eject()
		cfg.BackoffBase, cfg.BackoffMax = time.Second, max
		before := m.st
		m.configure(cfg)
		if m.st != before {
			t.Fatalf("max %v: status %+v, want unchanged %+v", max, m.st, before)
		}
	}
}
