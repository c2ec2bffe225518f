package control

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/health"
)

// healthTargets lists a check target per checked backend, under its
// checkKey. The check goes to the backend's address on the check port, or
// the VIP's port; a check through the tunnel goes to the VIP instead,
// from the LB's address of the VIP's family and the backend's check port
// in svc, the snapshot built from cfg.
func healthTargets(cfg *config.Config, svc *dataplane.Services) (map[string]health.Target, error) {
	out := map[string]health.Target{}
	for _, v := range cfg.VIPs {
		if !healthEnabled(cfg, &v) {
			continue
		}
		hc := v.Health.Config // decoded and validated by package config
		for _, b := range v.Backends {
			t := health.Target{Addr: checkAddr(&v, &b), Config: hc}
			if hc.Tunnelled() {
				t.Tunnel = tunnelPath(cfg, svc, &v, b.Name)
			}
			if err := t.Validate(); err != nil {
				return nil, fmt.Errorf("vip %q backend %q health check: %w", v.Name, b.Name, err)
			}
			out[checkKey(dataplane.BackendRef{VIP: v.Name, Backend: b.Name})] = t
		}
	}
	return out, nil
}

// checkAddr is the backend a check of backend b of v names
// (health.Target.Addr): its address on the VIP's port. The check's own
// port, when set, is in the check's config (health.Config.Port), so that a
// reload moving the checks to another port gives the same backend's
// checker a successor that inherits its state (a flap ejection included)
// instead of a fresh one.
func checkAddr(v *config.VIP, b *config.Backend) netip.AddrPort {
	return netip.AddrPortFrom(b.Address.Addr, uint16(v.Port))
}

// tunnelPath is where a check through the tunnel of backend name of v goes
// (the VIP) and comes from (the LB's address, the backend's check port);
// what it cannot find stays zero, which Target.Validate refuses.
func tunnelPath(cfg *config.Config, svc *dataplane.Services, v *config.VIP, name string) health.Tunnel {
	t := health.Tunnel{VIP: v.Address.Addr}
	src := cfg.Dataplane.LBIPv4.Addr
	if v.Address.Is6() {
		src = cfg.Dataplane.LBIPv6.Addr
	}
	if svc == nil {
		return t
	}
	if port, ok := svc.HealthPort(v.Key(), name); ok {
		t.Source = netip.AddrPortFrom(src, port)
	}
	return t
}

// TunnelRoute is a VIP address whose backends are checked through the
// tunnel, and the largest IP packet to it that fits every one of those
// tunnels: the wire's MTU less the largest encapsulation overhead of the
// VIPs at the address. The kernel's route into the exception path carries
// it, so the checks' TCP segments fit the tunnel (a TLS ClientHello fills
// a whole 1500-byte segment; the dataplane could only drop it, as
// health-not-sent, and the check never passed).
type TunnelRoute struct {
	Addr netip.Addr
	MTU  int
}

// TunnelCheckedVIPs are the addresses of the VIPs whose backends cfg
// checks through the tunnel, with their MTU: the kernel routes them into
// the exception path (package exception), so that the checks'
// connections reach the dataplane.
func TunnelCheckedVIPs(cfg *config.Config) []TunnelRoute {
	var out []TunnelRoute
	at := map[netip.Addr]int{}
	for _, v := range cfg.VIPs {
		if !healthEnabled(cfg, &v) || !v.Health.Tunnelled() {
			continue
		}
		i, seen := at[v.Address.Addr]
		if !seen {
			i = len(out)
			at[v.Address.Addr] = i
			out = append(out, TunnelRoute{Addr: v.Address.Addr, MTU: cfg.Dataplane.MTU})
		}
		for _, b := range v.Backends {
			out[i].MTU = min(out[i].MTU, cfg.Dataplane.MTU-encap.Overhead(*v.Encap, b.Address.Addr.Is6()))
		}
	}
	return out
}

// checkKey is the key of a backend's checker in package health, whose
// events and logs name it: "vip/backend".
func checkKey(r dataplane.BackendRef) string { return r.String() }

// checkRef is the backend a checker's key names. Backend names never hold a
// '/' (a VIP's default name does), so the key splits at its last one.
func checkRef(key string) dataplane.BackendRef {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return dataplane.BackendRef{Backend: key}
	}
	return dataplane.BackendRef{VIP: key[:i], Backend: key[i+1:]}
}

// StartHealth runs the active health checks of every VIP that has them and
// feeds their verdicts into the tables until ctx ends. opts may supply the
// probers (tests dial their own servers); the zero value checks as each
// VIP's health.through says.
func (p *Plane) StartHealth(ctx context.Context, opts health.ManagerOptions) error {
	m := health.NewManager(opts)
	p.mu.Lock()
	targets, err := healthTargets(p.cfg, p.shared.Services.Load())
	if err == nil {
		err = m.Set(targets)
	}
	if err != nil {
		p.mu.Unlock()
		m.Close()
		return err
	}
	p.checks = m
	p.mu.Unlock()
	go func() {
		<-ctx.Done()
		p.mu.Lock()
		p.checks = nil
		p.mu.Unlock()
		m.Close()
	}()
	go func() {
		for ev := range m.Events() {
			p.healthEvent(ev)
		}
	}()
	return nil
}

// healthEvent applies a checker's verdict to its backend, if the backend
// is still checked where the verdict came from. An event can wait in the
// Manager's channel (or in this loop, for the lock) while a reload removes
// the backend or moves it to another address or check port: the old
// address's verdict says nothing of the new one (a new address is a new
// backend, down until its own checks pass; a backend whose check moved to
// another port keeps its verdict until the new check gives one:
// syncBackends), so such an event is dropped; so is one whose checker a
// reload has stopped (health.Event.Checker), even at the same address.
func (p *Plane) healthEvent(ev health.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.backends[checkRef(ev.Key)]
	if st == nil {
		return // removed by a reload meanwhile
	}
	if ev.Target != st.check {
		p.log.Debug("health event for an address the backend no longer has, dropped", "vip", st.vip, "backend", st.name,
			"event_target", ev.Target, "checked", st.check, "state", ev.New)
		return
	}
	// The same address, but maybe another incarnation: two reloads (the
	// backend removed and added back, moved away and back, its check
	// turned off and on) can pass while the event waits. The checker
	// that reported it must be the one running now.
	if p.checks != nil {
		if id, ok := p.checks.CheckerID(ev.Key); !ok || id != ev.Checker {
			p.log.Debug("health event of a checker stopped by a reload, dropped", "vip", st.vip, "backend", st.name,
				"checker", ev.Checker, "running", id, "state", ev.New)
			return
		}
	}
	p.setHealthLocked(st, ev.New == health.Up, ev.Reason)
}

// syncHealthLocked points the checkers at the configuration in force (after
// a reload). Unchanged backends keep their checker and state, and so do
// those of a VIP the reload renamed (from: new check key to old, as
// carryRenamedVIPs moved their states), whose checkers are keyed by name:
// restarted from scratch, a flapping backend held out for an hour came
// back at once.
func (p *Plane) syncHealthLocked(from map[string]string) error {
	if p.checks == nil {
		return nil
	}
	targets, err := healthTargets(p.cfg, p.shared.Services.Load())
	if err != nil {
		return err
	}
	for key := range from {
		if _, ok := targets[key]; !ok {
			delete(from, key)
		}
	}
	if err := p.checks.SetRenamed(targets, from); err != nil {
		return err
	}
	// A renamed checker's run goes on under its new key, but a change it
	// reported under the old key before the reload (pending, or held by
	// the event loop) is dropped: healthEvent finds no backend, or another
	// incarnation, under that key. Its state now is its latest verdict.
	for key := range from {
		s, ok := p.checks.Status(key)
		if st := p.backends[checkRef(key)]; ok && st != nil && s.State != health.Unknown && st.check == targets[key].Addr {
			p.setHealthLocked(st, s.State == health.Up, s.Reason)
		}
	}
	return nil
}

// HealthStatus is the checker's view of a backend (checks, failures, last
// error, round-trip times), for the admin API; ok is false for a backend
// without checks.
func (p *Plane) HealthStatus(vip, backend string) (health.Status, bool) {
	p.mu.Lock()
	m := p.checks
	p.mu.Unlock()
	if m == nil {
		return health.Status{}, false
	}
	return m.Status(checkKey(dataplane.BackendRef{VIP: vip, Backend: backend}))
}

// localFailureLogEvery is how often at most the checks this host failed
// to make are logged.
const localFailureLogEvery = time.Minute

// noteLocalFailuresLocked logs the health checks this host failed to make
// since it last did (out of file descriptors, socket buffers or memory:
// no verdict took them), at most once a minute: while they fail, every
// backend keeps its last verdict, so a backend that dies meanwhile is not
// seen. They are counted in fulcrum_health_checks_failed_locally_total.
func (p *Plane) noteLocalFailuresLocked() {
	if p.checks == nil {
		return
	}
	n, now := p.checks.LocalFailures(), time.Now()
	if n == p.localLog.n || now.Sub(p.localLog.at) < localFailureLogEvery {
		return
	}
	p.log.Error("health checks this host could not make (out of file descriptors, socket buffers or memory); every backend keeps its last verdict meanwhile: raise the process's open-file limit or check the host",
		"checks", n-p.localLog.n, "total", n)
	p.localLog.n, p.localLog.at = n, now
}
