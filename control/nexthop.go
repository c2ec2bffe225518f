package control

import (
	"net/netip"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// resolvedHop is the kernel's latest answer for the gateways: which
// gateways it was asked about, and their MACs.
type resolvedHop struct {
	gw4, gw6 netip.Addr
	nh       dataplane.NextHop
}

// nextHopLocked is the next hop a snapshot of cfg carries: the static
// next_hop_mac if configured, otherwise the resolved MACs of cfg's
// gateways. A family whose gateway the resolver has not answered for
// (a reload just changed it) is unresolved: its packets are dropped and
// counted until the new gateway's MAC is known, never sent to the old one.
func (p *Plane) nextHopLocked(cfg *config.Config) dataplane.NextHop {
	if nh, ok := StaticNextHop(cfg); ok {
		return nh
	}
	d := &cfg.Dataplane
	nh := p.hop.nh
	if !d.GatewayIPv4.IsValid() || p.hop.gw4 != d.GatewayIPv4.Addr {
		nh.MAC4, nh.Has4 = [6]byte{}, false
	}
	if !d.GatewayIPv6.IsValid() || p.hop.gw6 != d.GatewayIPv6.Addr {
		nh.MAC6, nh.Has6 = [6]byte{}, false
	}
	return nh
}

// Gateways are the gateways whose MACs the neighbour resolver must find:
// none when a static next_hop_mac is configured.
func (p *Plane) Gateways() (ipv4, ipv6 netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := &p.cfg.Dataplane
	if d.NextHopMAC.Set {
		return netip.Addr{}, netip.Addr{}
	}
	return d.GatewayIPv4.Addr, d.GatewayIPv6.Addr
}

// GatewaysChanged fires when a reload changed the gateways, so the
// resolver looks them up at once.
func (p *Plane) GatewaysChanged() <-chan struct{} { return p.gwChanged }

// SetNextHop records the MACs the kernel resolved for gateways ipv4 and
// ipv6 and publishes a copy of the current snapshot with them. An answer
// for gateways that are no longer configured (a reload came in between)
// is ignored, and SetNextHop returns false: the resolver must answer
// again, even if the gateways are back to these by then.
func (p *Plane) SetNextHop(ipv4, ipv6 netip.Addr, nh dataplane.NextHop) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := &p.cfg.Dataplane
	if d.NextHopMAC.Set {
		// Nothing to resolve (Gateways is empty): the answer for no
		// gateway is taken, or the resolver gives it again every round.
		return !ipv4.IsValid() && !ipv6.IsValid()
	}
	if ipv4 != d.GatewayIPv4.Addr || ipv6 != d.GatewayIPv6.Addr {
		return false
	}
	p.hop = resolvedHop{gw4: ipv4, gw6: ipv6, nh: nh}
	if svc := p.shared.Services.Load(); svc != nil {
		p.shared.Services.Store(svc.WithNextHop(p.nextHopLocked(p.cfg)))
	}
	p.announceLocked() // a fresh instance waits for its next hop (announce.go)
	return true
}

// SetOnApply sets what applies an accepted reload to the kernel's side of
// the exception path (its addresses and MTU); it runs after the new
// snapshot is published. nil: nothing (no exception path).
func (p *Plane) SetOnApply(f func(old, cur *config.Config) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onApply = f
}
