package health

import (
	"context"
	"errors"
	"fmt"
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
	// Tunnel is where a check through the tunnel (Config.Through is
	// ThroughTunnel) goes and comes from; zero for direct checks.
	Tunnel Tunnel
}

// Tunnel is the path of a check through the tunnel. The check connects
// from Source to VIP (on the check port) over the kernel's route into the
// exception path; the dataplane recognises the connection by Source (the
// LB's address, and a port that names the backend) and encapsulates it to
// that backend alone, and the backend answers from the VIP straight to
// Source (DSR), which the dataplane hands back to the kernel as any packet
// for the LB's own address.
type Tunnel struct {
	VIP    netip.Addr
	Source netip.AddrPort
}

// ProbeAddr is the address checks go to: Addr (or the VIP, through the
// tunnel), with Config.Port instead of the service port when it is set.
func (t Target) ProbeAddr() netip.AddrPort {
	a := t.Addr.Addr()
	if t.Config.Tunnelled() {
		a = t.Tunnel.VIP
	}
	if t.Config.Port != 0 {
		return netip.AddrPortFrom(a, uint16(t.Config.Port))
	}
	return netip.AddrPortFrom(a, t.Addr.Port())
}

// Validate checks the address and the config.
func (t Target) Validate() error {
	if !t.Addr.Addr().IsValid() {
		return fmt.Errorf("address %v is not valid: %w", t.Addr, ErrConfig)
	}
	// An IPv6 zone ("fe80::1%eth0") cannot be checked over HTTP (a URL's
	// host has no zone: "invalid URL escape"); package config refuses
	// zones too.
	if t.Addr.Addr().Zone() != "" {
		return fmt.Errorf("address %v: IPv6 zones are not allowed: %w", t.Addr, ErrConfig)
	}
	if err := t.Config.Validate(); err != nil {
		return err
	}
	if t.ProbeAddr().Port() == 0 {
		return fmt.Errorf("address %v: no port to check (the service port is 0 and port is not set): %w", t.Addr, ErrConfig)
	}
	tu := t.Tunnel
	switch {
	case !t.Config.Tunnelled() && tu != Tunnel{}:
		return fmt.Errorf("address %v: a tunnel path (%v from %v) for a direct check: %w", t.Addr, tu.VIP, tu.Source, ErrConfig)
	case !t.Config.Tunnelled():
	case !tu.VIP.IsValid() || !tu.Source.Addr().IsValid() || tu.Source.Port() == 0:
		return fmt.Errorf("address %v: a check through the tunnel needs the VIP and a source address and port: %w", t.Addr, ErrConfig)
	case tu.VIP.Zone() != "" || tu.Source.Addr().Zone() != "":
		return fmt.Errorf("address %v: VIP %v or source %v has an IPv6 zone (not allowed): %w", t.Addr, tu.VIP, tu.Source, ErrConfig)
	case tu.VIP.Is4() != tu.Source.Addr().Is4():
		return fmt.Errorf("address %v: VIP %v and source %v are of different families: %w", t.Addr, tu.VIP, tu.Source, ErrConfig)
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
	id     uint64 // Event.Checker; set by the Manager before Run

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
		p, err := NewTargetProber(target)
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
	m.st.Key, m.st.Addr = c.key, c.addr // a renamed checker reports under its new key
	if !sameQuestion(old.target, c.target) {
		// The state is kept until the new check gives its own verdict,
		// rise or fall of its checks later: the old check's passes and
		// failures in a row say nothing of the new one.
		m.st.ConsecutiveOK, m.st.ConsecutiveFail = 0, 0
		m.askedAt, m.failedAt = m.st.Checks, m.st.Failures
	}
	c.mu.Lock()
	c.m = &m
	c.mu.Unlock()
}

// sameQuestion reports whether a and b check the same thing the same way
// (where, how, and what passes): only the cadence and the counts differ.
func sameQuestion(a, b Target) bool {
	ac, bc := a.Config, b.Config
	return a.ProbeAddr() == b.ProbeAddr() && a.Tunnel == b.Tunnel && ac.Kind == bc.Kind &&
		ac.Tunnelled() == bc.Tunnelled() && ac.TLSVerify == bc.TLSVerify &&
		(lookupKind(ac.Kind) == nil || !lookupKind(ac.Kind).request ||
			ac.Path == bc.Path && ac.Host == bc.Host && ac.ExpectStatus == bc.ExpectStatus)
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
	s := &share{prober: c.prober, addr: c.addr, done: make(chan struct{}), members: []*Checker{c}, kick: make(chan struct{}, 1)}
	s.run(ctx, c.target.Config)
}

// judge takes one check's answer at now and tells notify of a change.
func (c *Checker) judge(now time.Time, rtt time.Duration, err error) {
	c.mu.Lock()
	ev, changed := c.m.observe(now, rtt, err)
	c.mu.Unlock()
	if changed && c.notify != nil {
		ev.Target, ev.Checker = c.target.Addr, c.id
		c.notify(ev)
	}
}

// probeOnce runs one probe of addr under the timeout. Whatever a prober
// says when its time ran out, the failure is a timeout: that is what the
// operator must read, whichever layer noticed first.
func probeOnce(ctx context.Context, p Prober, addr netip.AddrPort, timeout time.Duration) (time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rtt, err := p.Probe(pctx, addr)
	if err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		return 0, timeoutError(timeout)
	}
	return rtt, err
}
