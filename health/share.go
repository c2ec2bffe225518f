package health

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A share is one run of checks that several checkers take their answers
// from: the backends of several VIPs at one address, checked the same way
// (an equal ShareKey), are probed once a round, and each checker judges
// the answer with its own rise, fall and flap settings. Without it 4,096
// VIPs over the same 16 servers ran 65,536 checks a round.
type share struct {
	key    Target // ShareKey of the members' targets
	prober Prober
	addr   netip.AddrPort
	cancel context.CancelFunc
	done   chan struct{}
	local  *atomic.Uint64   // counts the checks this host failed (localFailure); nil: not counted
	now    func() time.Time // what the checks' start and end are read from; nil: time.Now

	mu      sync.Mutex // held while the members judge an answer
	members []*Checker
	// kick wakes run when a member joined that has not been asked its
	// question yet (Checker.unasked), to bring the next check forward so
	// that the newcomer is checked as a new checker would be (within
	// firstDelay), not at the next round.
	kick chan struct{}
}

// ShareKey is what a check asks, where and how often: checkers with equal
// keys get the same answers (the Manager runs one check a round for them). What only judges the answers (rise, fall, the
// flap settings, the initial state) is left out, and the service port
// where Config.Port replaces it.
func ShareKey(t Target) Target {
	k := Target{Addr: t.ProbeAddr(), Config: t.Config, Tunnel: t.Tunnel}
	c := &k.Config
	c.Port, c.Rise, c.Fall, c.StartUp, c.FlapWindow, c.BackoffBase, c.BackoffMax = 0, 0, 0, false, 0, 0, 0
	if kd := lookupKind(c.Kind); kd == nil || !kd.request {
		c.Path, c.Host, c.ExpectStatus = "", "", "" // a tcp check sends no request
	}
	return k
}

// newShare starts the checks of c's target, with c's prober, for c alone.
func newShare(parent context.Context, key Target, c *Checker, local *atomic.Uint64) *share {
	ctx, cancel := context.WithCancel(parent)
	s := &share{key: key, prober: c.prober, addr: c.addr, cancel: cancel, done: make(chan struct{}), local: local, members: []*Checker{c}, kick: make(chan struct{}, 1)}
	go s.run(ctx, c.target.Config)
	return s
}

// run checks the share's target until ctx ends, every member judging
// each answer (Checker.Run is a share of one).
func (s *share) run(ctx context.Context, cfg Config) {
	defer close(s.done)
	next := time.Now().Add(firstDelay(cfg.Interval, cfg.Jitter, rand.Float64()))
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			// A member joined that no answer has reached yet: its first
			// check comes within firstDelay, as a checker of its own's
			// would.
			if at := time.Now().Add(firstDelay(cfg.Interval, cfg.Jitter, rand.Float64())); s.waiting() && at.Before(next) {
				next = at
				t.Reset(max(0, time.Until(next)))
			}
			continue
		case <-t.C:
		}
		start, began := time.Now(), s.clock()
		rtt, err := probeOnce(ctx, s.prober, s.addr, cfg.Timeout)
		if ctx.Err() != nil {
			return
		}
		now, took := time.Now(), s.clock().Sub(began)
		if localFailure(err) || overran(err, took, cfg.Timeout) {
			// Not the backend's answer: nobody judges it (a backend
			// keeps its verdict, an unknown one stays unknown).
			if s.local != nil {
				s.local.Add(1)
			}
		} else {
			s.mu.Lock()
			for _, c := range s.members {
				c.judge(now, rtt, err)
			}
			s.mu.Unlock()
		}
		next = start.Add(jitterDelay(cfg.Interval, cfg.Jitter, rand.Float64()))
		t.Reset(max(0, time.Until(next)))
	}
}

func (s *share) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// add makes c a member: it judges the next answer.
func (s *share) add(c *Checker) {
	s.mu.Lock()
	s.members = append(s.members, c)
	s.mu.Unlock()
	if c.unasked() { // new, or an inheritor whose check changed: not asked this question yet
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// waiting reports whether a member has not been asked its question yet.
func (s *share) waiting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.members, (*Checker).unasked)
}

// remove takes c out; once it returns, c judges nothing more (its state
// is final, for a successor to inherit). It reports whether the share has
// no member left.
func (s *share) remove(c *Checker) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range s.members {
		if m == c {
			s.members = append(s.members[:i], s.members[i+1:]...)
			break
		}
	}
	return len(s.members) == 0
}

// unasked reports whether c has had no answer to its own check yet: a new
// checker, or one that inherited the state of a check that asked
// something else (another port, path or host).
func (c *Checker) unasked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.st.Checks == c.m.askedAt
}

// overran reports whether err is a timeout that this host, not the
// backend, made: the check ended more than min(timeout, 1 s) after its
// deadline (10 ms at least: a timeout of a millisecond or two is
// overrun by the timer's and the scheduler's own delay), so the process
// did not run for that long while it waited
// (SIGSTOP, a paused VM, a starved cgroup; the control plane's stall fold
// and the neighbour resolver judge nothing then either). Its timer fired
// late and the answer may have been waiting: the check measured nothing
// of the backend. A stall long enough to time out fall checks in a row
// that did end on time is still the backend's (or the path's).
func overran(err error, took, timeout time.Duration) bool {
	return errors.Is(err, ErrTimeout) && took > timeout+max(10*time.Millisecond, min(timeout, time.Second))
}

// localFailure reports whether err is this host's failure, not the
// backend's: the check could not get a socket or memory (the process or
// the system out of file descriptors, socket buffers or memory). Such a
// check says nothing of the backend and is not judged: a descriptor
// limit reached by the checks of silent backends (each holding a socket
// for its whole timeout) called the healthy ones down with them.
// EADDRNOTAVAIL is not one: a tunnel check whose source address is not
// configured gets it too.
func localFailure(err error) bool {
	return err != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM))
}
