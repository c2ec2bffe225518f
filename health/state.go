package health

import (
	"fmt"
	"net/netip"
	"time"
)

// State is a backend's health as the balancer uses it.
type State uint8

const (
	// Unknown: not yet checked enough to say (for at most rise+fall-1
	// checks: see Down); not Routable. (Fulcrum's control plane routes
	// the Unknown of a backend configured at start like Up, so a fresh
	// instance matches its fleet: control/converge.go.)
	Unknown State = iota
	// Up: passed rise consecutive checks (or started Up with StartUp).
	Up
	// Down: failed fall consecutive checks, or ejected for flapping, or
	// (from Unknown) gave no verdict in rise+fall checks.
	Down
)

func (s State) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// MarshalText makes states read as words in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// RTTEWMAWeight is the weight of the newest round trip in Status.RTTEWMA:
// 0.25 makes the average follow a change within a few checks while one
// slow check moves it by a quarter of the difference.
const RTTEWMAWeight = 0.25

// Status is a snapshot of one backend's health and check counters.
type Status struct {
	Key   string         // the backend key given to NewChecker or Manager.Set
	Addr  netip.AddrPort // the address checked (service port or Config.Port)
	State State
	Since time.Time // when State was entered (the checker's start for the initial state)
	// Reason says why the backend entered State: the failing check
	// ("tcp connect: connection refused", "http status 503 not in
	// 200-399", "timeout after 1s"), "2 consecutive checks passed",
	// "flapping: ejected for 40s (...)", or "no verdict: 3 of 5 checks
	// failed, never 2 passes in a row (...)".
	Reason string

	Checks          uint64 // checks completed
	Failures        uint64 // of which failed
	ConsecutiveOK   int    // passing checks in a row (0 after a failure)
	ConsecutiveFail int    // failing checks in a row (0 after a pass)
	LastCheck       time.Time
	LastErr         error  `json:"-"` // the last check's error; nil if it passed
	LastError       string // LastErr's text, for JSON ("" if it passed)

	LastRTT time.Duration // round trip of the last passing check
	RTTEWMA time.Duration // moving average of passing checks' round trips

	Ejections    int           // flapping ejections so far
	Backoff      time.Duration // length of the current or last ejection; 0 once reset
	EjectedUntil time.Time     // end of the current ejection; zero when not ejected
}

// Routable reports whether the backend should receive new flows.
func (s Status) Routable() bool { return s.State == Up }

// Ejected reports whether the backend is held Down for flapping at now.
func (s Status) Ejected(now time.Time) bool { return now.Before(s.EjectedUntil) }

// Event is one state change of one backend.
type Event struct {
	Key  string
	Addr netip.AddrPort // where the check connects (Target.ProbeAddr: the VIP for a check through the tunnel)
	// Target is the checked backend's configured address (Target.Addr),
	// the same whichever way the check goes: a consumer can tell an event
	// of a backend's old address from one of its new address by it.
	Target netip.AddrPort
	// Checker identifies the run of checks that reported the change: a
	// Manager gives every checker it starts afresh a new one, and a
	// checker that inherits its predecessor's state (same address, new
	// config) keeps the predecessor's. Manager.CheckerID says the current
	// one of a key: an event of another was queued before the backend was
	// removed (or its check turned off) and added back, and says nothing
	// of the new one. 0 for a Checker run outside a Manager.
	Checker  uint64
	Old, New State
	Time     time.Time
	// Reason is Status.Reason after the change.
	Reason string
	// Err is the failing check that caused a change to Down (nil for Up).
	Err error
	// Ejected is true when the change to Down is a flapping ejection;
	// Status.Backoff and Status.EjectedUntil say for how long.
	Ejected bool
	// Coalesced is the number of changes this event stands for: 1, or
	// more when the Manager merged changes a slow consumer had not yet
	// received (Old is then the first change's, everything else the
	// last's).
	Coalesced int
	// Status is the backend's status right after the change.
	Status Status
}

// machine is the state machine of one backend. It is a pure function of
// the check results and the times given to it, so its tests need no clock.
type machine struct {
	rise, fall int
	window     uint64 // flap window, in checks
	base, max  time.Duration

	st Status
	// upAt is the check (Status.Checks) that began the current proven Up
	// period; 0 when there is none. Counting checks instead of time makes
	// the window mean the same at any interval and under jitter.
	upAt        uint64
	provisional bool // Up by StartUp, not yet confirmed by a check
	// recovered is true when the current Up period followed a Down: only
	// such a period can end in a flap. The first Up of a checker (from
	// Unknown, or StartUp's) is its first verdict, not a change of one:
	// a backend that fails soon after an instance (re)started, or after
	// a reload added it, has failed once, as every other instance of
	// the fleet sees it, and is not held out longer there.
	recovered bool
	// askedAt and failedAt are Status.Checks and Status.Failures when the
	// current question began (a reload changed what the check asks,
	// Checker.inherit): undecided counts only the checks since.
	askedAt, failedAt uint64
	// lastFail is the last failing check's error (nil if none failed):
	// the cause named when checks that never settle decide Down
	// (undecided).
	lastFail error
	// flapCause is the text of the failure that began the current or
	// last ejection, so that configure can restate the reason when it
	// shortens a running ejection.
	flapCause string
}

func newMachine(key string, addr netip.AddrPort, cfg Config, now time.Time) *machine {
	m := &machine{st: Status{Key: key, Addr: addr, State: Unknown, Since: now, Reason: "not checked yet"}}
	m.configure(cfg)
	if cfg.StartUp {
		m.st.State = Up
		m.st.Reason = "start_up: assumed up until the first check"
		m.provisional = true
	}
	return m
}

// configure takes the counts and times from cfg; the state is kept, so a
// checker whose config changed can inherit its predecessor's machine.
//
// An ejection running when flap_backoff_max is lowered is cut to the new
// maximum from its start (EjectedUntil − Backoff, exact: Backoff is the
// current ejection's length), so that an operator who lowers the maximum to
// get a backend back does not wait out the old ejection (up to MaxBackoff).
// An ejection whose cut end has passed ends at the next check.
func (m *machine) configure(cfg Config) {
	m.rise, m.fall = cfg.Rise, cfg.Fall
	m.window = uint64(cfg.EffectiveFlapWindow())
	m.base, m.max = cfg.BackoffBase, cfg.BackoffMax
	s := &m.st
	if !s.EjectedUntil.IsZero() && s.Backoff > m.max {
		start := s.EjectedUntil.Add(-s.Backoff)
		s.Backoff = m.max
		s.EjectedUntil = start.Add(m.max)
		s.Reason = flapReason(s.Backoff, m.flapCause) // still the ejection's: it holds the backend Down
	}
}

// observe records one check that ended at now and returns the event of the
// state change it caused, if any.
func (m *machine) observe(now time.Time, rtt time.Duration, err error) (Event, bool) {
	s := &m.st
	s.Checks++
	s.LastCheck = now
	s.LastErr = err
	if err != nil {
		s.Failures++
		s.ConsecutiveFail++
		s.ConsecutiveOK = 0
		s.LastError = err.Error()
		m.lastFail = err
	} else {
		s.ConsecutiveOK++
		s.ConsecutiveFail = 0
		s.LastError = ""
		s.LastRTT = rtt
		if s.RTTEWMA == 0 {
			s.RTTEWMA = rtt
		} else {
			s.RTTEWMA += time.Duration(RTTEWMAWeight * float64(rtt-s.RTTEWMA))
		}
	}

	old := s.State
	switch s.State {
	case Up:
		if err != nil {
			if m.provisional || s.ConsecutiveFail >= m.fall {
				return m.down(now, old, err), true
			}
			return Event{}, false
		}
		m.provisional = false
		if m.upAt == 0 {
			m.upAt = s.Checks // a StartUp backend's first pass starts its proven Up time
		}
		if s.Backoff > 0 && s.Checks-m.upAt >= m.window {
			s.Backoff = 0 // stable for a whole window: forgive past flaps
		}
		return Event{}, false
	default: // Unknown, Down
		if !s.EjectedUntil.IsZero() {
			if now.Before(s.EjectedUntil) {
				return Event{}, false // passes are counted, but cannot bring it Up yet
			}
			s.EjectedUntil = time.Time{}
		}
		if err == nil && s.ConsecutiveOK >= m.rise {
			s.State, s.Since = Up, now
			s.Reason = fmt.Sprintf("%d consecutive checks passed", s.ConsecutiveOK)
			m.upAt = s.Checks
			m.recovered = old == Down
			return m.event(now, old, nil, false), true
		}
		if err != nil && old == Unknown && s.ConsecutiveFail >= m.fall {
			return m.down(now, old, err), true
		}
		if old == Unknown && s.Checks-m.askedAt >= uint64(m.rise+m.fall) {
			return m.undecided(now), true
		}
		return Event{}, false
	}
}

// undecided gives the first verdict of a backend whose checks have mixed
// passes and failures for rise+fall checks without rise passes or fall
// failures in a row (a check port behind a round robin of a good and a
// wedged worker: +-+-...): Down, as it does not work reliably. Without it
// such a backend stays Unknown for ever and never sends an event (package
// control withholds a VIP's announcement until every backend configured at
// start has given its first verdict). Like a Down after fall failures from
// Unknown it is a first verdict, not a flap. The event's Err is the last
// failing check, which the check that decides may not be.
func (m *machine) undecided(now time.Time) Event {
	s := &m.st
	cause := m.lastFail
	s.State, s.Since = Down, now
	m.upAt = 0
	m.provisional, m.recovered = false, false
	s.Backoff = 0
	s.Reason = fmt.Sprintf("no verdict: %d of %d checks failed, never %d passes in a row (last failure: %v)",
		s.Failures-m.failedAt, s.Checks-m.askedAt, m.rise, cause)
	return m.event(now, Unknown, cause, false)
}

// down moves the backend Down because of err and decides whether the Up
// period that ends was a flap: it followed a Down (recovered) and its Up
// transition is within the last FlapWindow checks, so one whole
// down-up-down cycle fits in the window.
func (m *machine) down(now time.Time, old State, err error) Event {
	s := &m.st
	flapped := old == Up && m.recovered && m.upAt != 0 && s.Checks-m.upAt < m.window
	s.State, s.Since = Down, now
	m.upAt = 0
	m.provisional, m.recovered = false, false
	if !flapped {
		s.Backoff = 0
		s.Reason = err.Error()
		return m.event(now, old, err, false)
	}
	if s.Backoff == 0 {
		s.Backoff = m.base
	} else {
		s.Backoff = min(2*s.Backoff, m.max)
	}
	s.Ejections++
	s.EjectedUntil = now.Add(s.Backoff)
	m.flapCause = err.Error()
	s.Reason = flapReason(s.Backoff, m.flapCause)
	return m.event(now, old, err, true)
}

func flapReason(backoff time.Duration, cause string) string {
	return fmt.Sprintf("flapping: ejected for %v (%s)", backoff, cause)
}

func (m *machine) event(now time.Time, old State, err error, ejected bool) Event {
	return Event{
		Key: m.st.Key, Addr: m.st.Addr,
		Old: old, New: m.st.State, Time: now,
		Reason: m.st.Reason, Err: err, Ejected: ejected,
		Coalesced: 1, Status: m.st,
	}
}
