package health

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Target is one backend to check: its address with the service port, and
// how to check it. Targets are comparable; Manager.Set compares them to
// tell an unchanged backend from a changed one.
type Target struct {
	Addr   netip.AddrPort
	Config Config
}

// ProbeAddr is the address checks go to: Addr, with Config.Port instead of
// the service port when it is set.
func (t Target) ProbeAddr() netip.AddrPort {
	if t.Config.Port != 0 {
		return netip.AddrPortFrom(t.Addr.Addr(), uint16(t.Config.Port))
	}
	return t.Addr
}

// Validate checks the address and the config.
func (t Target) Validate() error {
	if !t.Addr.Addr().IsValid() {
		return fmt.Errorf("address %v is not valid: %w", t.Addr, ErrConfig)
	}
	if err := t.Config.Validate(); err != nil {
		return err
	}
	if t.ProbeAddr().Port() == 0 {
		return fmt.Errorf("address %v: no port to check (the service port is 0 and port is not set): %w", t.Addr, ErrConfig)
	}
	return nil
}

// Checker checks one backend from its own goroutine (Run) and keeps its
// state. Status may be called from any goroutine.
type Checker struct {
	key    string
	target Target
	addr   netip.AddrPort
	prober Prober
	notify func(Event)

	running atomic.Bool
	mu      sync.Mutex
	m       *machine
}

// NewChecker returns a checker of target under key. A nil prober means the
// one Config describes (NewProber). notify, if not nil, is called from the
// checker's goroutine with every state change; it must not block for long,
// as the next check waits for it.
func NewChecker(key string, target Target, prober Prober, notify func(Event)) (*Checker, error) {
	if err := target.Validate(); err != nil {
		return nil, fmt.Errorf("health check of %q: %w", key, err)
	}
	if prober == nil {
		p, err := NewProber(target.Config)
		if err != nil {
			return nil, fmt.Errorf("health check of %q: %w", key, err)
		}
		prober = p
	}
	addr := target.ProbeAddr()
	return &Checker{
		key: key, target: target, addr: addr, prober: prober, notify: notify,
		m: newMachine(key, addr, target.Config, time.Now()),
	}, nil
}

// inherit takes over the state of old, a checker of the same backend whose
// config changed. Call it before Run, after old has stopped.
func (c *Checker) inherit(old *Checker) {
	m := old.machineCopy()
	m.configure(c.target.Config)
	m.st.Addr = c.addr
	c.mu.Lock()
	c.m = &m
	c.mu.Unlock()
}

func (c *Checker) machineCopy() machine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.m
}

// Status returns a snapshot of the backend's state and counters.
func (c *Checker) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.st
}

// Run checks the backend until ctx ends. It returns at once if the checker
// is already running. A check in flight when ctx ends is abandoned and not
// counted.
func (c *Checker) Run(ctx context.Context) {
	if !c.running.CompareAndSwap(false, true) {
		return
	}
	defer c.running.Store(false)
	cfg := c.target.Config
	t := time.NewTimer(firstDelay(cfg.Interval, cfg.Jitter, rand.Float64()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		rtt, err := c.check(ctx, cfg.Timeout)
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		ev, changed := c.m.observe(time.Now(), rtt, err)
		c.mu.Unlock()
		if changed && c.notify != nil {
			c.notify(ev)
		}
		next := start.Add(jitterDelay(cfg.Interval, cfg.Jitter, rand.Float64()))
		t.Reset(max(0, time.Until(next)))
	}
}

// check runs one probe under the timeout. Whatever a prober says when its
// time ran out, the failure is a timeout: that is what the operator must
// read, whichever layer noticed first.
func (c *Checker) check(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rtt, err := c.prober.Probe(pctx, c.addr)
	if err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		return 0, timeoutError(timeout)
	}
	return rtt, err
}
