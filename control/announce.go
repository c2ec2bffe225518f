package control

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// NextHopGrace is how long an announced VIP address stays announced after
// the snapshot lost the next hop of every address family its backends
// use; then it is withdrawn (its packets are all dropped as no-next-hop,
// so announcing it black-holes this instance's share of the traffic), and
// announced again as soon as the next hop is back.
//
// The grace covers a normal re-resolution of the gateway's MAC. The
// resolver (exception.Resolver, run by cmd/fulcrum) reads the kernel's
// neighbour table every second, and only a FAILED entry counts as lost
// (STALE, DELAY and PROBE keep their MAC, and an entry gone or INCOMPLETE
// after a MAC was published keeps it up to 5 s while the kernel
// resolves it again); the kernel's
// re-solicitation of a lost entry (mcast_solicit 3 x retrans_time 1 s) or
// a gateway's VRRP failover (about 3 advertisement intervals) takes a few
// seconds. 15 s is several of those, and short against the minutes a
// typo'd gateway_ipv4 in a reload would otherwise black-hole traffic.
const NextHopGrace = 15 * time.Second

// hopLoss tracks one address family's missing next hop.
type hopLoss struct {
	gw    netip.Addr // the gateway configured when the loss began (a new one restarts the grace)
	since time.Time  // when the snapshot lost the next hop; zero: it has one
	// ended: the grace is over, as a step of Run judged it
	// (announceAfterGraceLocked), after the step took any pause of the
	// process out of it (holdGraceAcrossPauseLocked). Only a step ends a
	// grace: a rebuild that an API call or a reload made in the moment
	// after a pause, before Run's first step, would otherwise count the
	// pause and withdraw the VIPs.
	ended bool
}

// SetAnnouncer hands the control plane the function that announces the VIPs
// that can serve (at least one backend takes new flows, or panic mode) and
// withdraws the others; it is called at once and after every rebuild that
// changes the set (rebuildLocked calls announceLocked; the first verdict of
// a backend kicks a rebuild). The daemon sets it only while the dataplane
// forwards, and sets nil before it withdraws everything on shutdown. peers
// reports the BGP sessions for Status.
func (p *Plane) SetAnnouncer(announce func([]netip.Prefix), peers func() []PeerInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.announce, p.announced = announce, ""
	if peers != nil {
		p.peers = peers
	}
	p.announceLocked()
}

// announceLocked passes the serving VIPs to the announcer if they changed.
//
// A VIP address is withheld until every active health check of every VIP
// on it has given its first verdict (see converge.go): until then this
// fresh instance's table may differ from the fleet's, and announcing it
// would pull traffic onto the difference. The prefix covers every port of
// the address, so one unsettled VIP withholds the whole address. Once
// announced, an address is not withdrawn for a backend added later by a
// reload that has not been checked yet; one withdrawn (its VIPs removed,
// or none serving) is held to these rules again, as a new one.
//
// Likewise a fresh instance withholds a VIP address until it can forward
// to its backends: the next hop of at least one backend's address family
// is known (the gateway's MAC resolved). Announcing earlier would pull
// traffic onto an instance that drops it (no-next-hop). Once announced, a
// VIP address is withdrawn only when no VIP on it has had a next hop for
// NextHopGrace (a brief loss while the gateway is re-resolved does not
// withdraw it), and is announced again when the next hop is back.
func (p *Plane) announceLocked() {
	svc := p.shared.Services.Load()
	now := p.now()
	p.trackNextHopLocked(svc, now)
	if p.announce == nil {
		return
	}
	unsettled := p.unsettledVIPsLocked()
	withheld := map[netip.Addr]bool{}
	// fresh: addresses not announced yet; freshFwd: those with a VIP that
	// serves and can forward. A fresh address is withheld for a missing
	// next hop only when no VIP on it can serve: a VIP of another port
	// whose backends' family has no next hop held back a port that could
	// serve (a restart during one family's gateway trouble withdrew it
	// from the fleet).
	fresh, freshFwd := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	// noHop: announced addresses with a VIP that has had no next hop for
	// the grace period; an address stays announced while any VIP on it
	// can forward (or has not been without a next hop for that long).
	noHop, keep := map[netip.Addr]*dataplane.VIP{}, map[netip.Addr]bool{}
	for _, v := range svc.VIPs {
		if v == nil {
			continue
		}
		fwd := canForward(svc, v)
		if !p.wasAnnounced[v.Addr] {
			fresh[v.Addr] = true
			if unsettled[v.Name] {
				withheld[v.Addr] = true
			}
			if fwd && serving(svc, v, false) {
				freshFwd[v.Addr] = true
			}
			continue
		}
		if !serving(svc, v, true) {
			continue // not serving: not announced for that reason alone
		}
		// An address withdrawn for a lost next hop comes back only once a
		// VIP on it can forward, as a fresh one would: a reload that
		// changed the gateway restarts the loss's grace, but the new
		// gateway has not resolved yet.
		if !fwd && (p.hopWithdrawn[v.Addr] || p.graceEnded(svc, v)) {
			if noHop[v.Addr] == nil {
				noHop[v.Addr] = v
			}
		} else {
			keep[v.Addr] = true
		}
	}
	for a := range fresh {
		if !freshFwd[a] {
			withheld[a] = true
		}
	}
	for a, v := range noHop {
		if keep[a] {
			continue
		}
		withheld[a] = true
		if !p.hopWithdrawn[a] {
			if p.hopWithdrawn == nil {
				p.hopWithdrawn = map[netip.Addr]bool{}
			}
			p.hopWithdrawn[a] = true
			p.log.Error("withdrawing VIP: no next hop for its backends' address family; every packet is dropped (no-next-hop)",
				"vip", v.Name, "address", a, "grace", NextHopGrace,
				"ipv4_gateway", p.hopLost[0].gw, "ipv4_next_hop", hopState(p.hopLost[0], now),
				"ipv6_gateway", p.hopLost[1].gw, "ipv6_next_hop", hopState(p.hopLost[1], now))
		}
	}
	var set []netip.Prefix
	seen := map[netip.Addr]bool{}
	for _, v := range svc.VIPs {
		// An address withdrawn for a lost next hop has no flows left to
		// keep: it comes back as a fresh one would, only with a table.
		if v == nil || !serving(svc, v, p.wasAnnounced[v.Addr] && !p.hopWithdrawn[v.Addr]) || seen[v.Addr] || withheld[v.Addr] {
			continue
		}
		// One address may carry several VIPs (ports); it is announced
		// while any of them can serve.
		seen[v.Addr] = true
		if p.wasAnnounced == nil {
			p.wasAnnounced = map[netip.Addr]bool{}
		}
		p.wasAnnounced[v.Addr] = true
		set = append(set, netip.PrefixFrom(v.Addr, v.Addr.BitLen()))
	}
	for a := range p.hopWithdrawn {
		if !withheld[a] {
			delete(p.hopWithdrawn, a)
			if seen[a] {
				p.log.Warn("announcing VIP again: its next hop is back", "address", a)
			}
		}
	}
	// An address that left the set for another reason than a lost next
	// hop (its VIPs removed by a reload, or none of them serving) is
	// announced again only as a new one is: once its checks have given
	// their first verdicts. Otherwise a VIP removed and added back (a
	// reverted reload) would be announced before its backends, which
	// start down and unchecked, were checked at all.
	for a := range p.wasAnnounced {
		if !seen[a] && !p.hopWithdrawn[a] {
			delete(p.wasAnnounced, a)
		}
	}
	sort.Slice(set, func(i, j int) bool { return set[i].Addr().Less(set[j].Addr()) })
	if p.stallWithdrawsLocked() {
		// A worker is stalled (stall.go): the addresses keep their
		// announced state above and come back as they were.
		set = nil
	}
	key := fmt.Sprint(set)
	if key == p.announced {
		return
	}
	p.announced = key
	p.announce(set)
}

// serving reports whether v is announced for its backends' sake: it has a
// table (a backend takes new flows, or panic mode), or, once announced,
// every backend that takes none is drained or at weight 0 by the operator
// and at least one of those is alive (not down or unhealthy). Its
// established flows keep going to their backends until they end, as a
// drain promises; withdrawing the address would cut them all (with the
// drain in the fleet's configuration, on every instance at once). New
// flows meanwhile are dropped as no-backend. A fresh instance, which has
// no flows to keep, does not announce such a VIP.
func serving(svc *dataplane.Services, v *dataplane.VIP, announced bool) bool {
	if v.Table != nil {
		return true
	}
	if !announced {
		return false
	}
	for _, id := range v.Members {
		if int(id) < len(svc.Backends) {
			if b := svc.Backends[id]; b != nil && !b.Down && !b.Unhealthy {
				return true
			}
		}
	}
	return false
}

// carrier is member id of v if it can take v's traffic: in v's table (a
// weight: up, or used by panic mode) when v has one; else, alive (v's
// drained backends keep their flows). nil otherwise. A drained or down
// backend of a family whose next hop is known kept an address announced
// while every new flow to it was dropped (no-next-hop).
func carrier(svc *dataplane.Services, v *dataplane.VIP, id uint32) *dataplane.Backend {
	if int(id) >= len(svc.Backends) || svc.Backends[id] == nil {
		return nil
	}
	b := svc.Backends[id]
	if v.Table != nil && b.Weight > 0 || v.Table == nil && !b.Down && !b.Unhealthy {
		return b
	}
	return nil
}

// canForward reports whether svc has a next hop for at least one of the
// address families of v's backends that can take its traffic (carrier).
func canForward(svc *dataplane.Services, v *dataplane.VIP) bool {
	nh := &svc.NextHop
	for _, id := range v.Members {
		b := carrier(svc, v, id)
		if b == nil {
			continue
		}
		if a := b.Addr; (a.Is4() && nh.Has4) || (a.Is6() && nh.Has6) {
			return true
		}
	}
	return false
}

// trackNextHopLocked notes when each family of svc's next hop went
// missing. A gateway changed by a reload restarts the clock: the resolver
// looks the new one up at once (Apply), and it gets the full grace.
func (p *Plane) trackNextHopLocked(svc *dataplane.Services, now time.Time) {
	if svc == nil {
		return
	}
	d := &p.cfg.Dataplane
	for i, x := range []struct {
		has bool
		gw  netip.Addr
	}{{svc.NextHop.Has4, d.GatewayIPv4.Addr}, {svc.NextHop.Has6, d.GatewayIPv6.Addr}} {
		l := &p.hopLost[i]
		switch {
		case x.has:
			*l = hopLoss{}
		case l.since.IsZero() || l.gw != x.gw:
			*l = hopLoss{gw: x.gw, since: now}
		}
	}
}

// graceEnded reports whether v has been without a next hop for the
// grace: every address family of its backends that can take its traffic
// (carrier) has lost its next hop and that loss's grace has ended (false:
// v has no such backend, or one of their families has a next hop or is
// still in its grace).
func (p *Plane) graceEnded(svc *dataplane.Services, v *dataplane.VIP) bool {
	lost := false
	for _, id := range v.Members {
		b := carrier(svc, v, id)
		if b == nil {
			continue
		}
		l := p.hopLost[0]
		if b.Addr.Is6() {
			l = p.hopLost[1]
		}
		if l.since.IsZero() || !l.ended {
			return false
		}
		lost = true
	}
	return lost
}

// announceAfterGraceLocked ends the grace of a family whose next hop has
// been missing for NextHopGrace and runs announceLocked, so the withdrawal
// does not wait for the next rebuild. Run calls it at every step, after
// holdGraceAcrossPauseLocked.
func (p *Plane) announceAfterGraceLocked() {
	now := p.now()
	ended := false
	for i := range p.hopLost {
		if l := &p.hopLost[i]; !l.since.IsZero() && !l.ended && now.Sub(l.since) >= NextHopGrace {
			l.ended, ended = true, true
		}
	}
	if ended {
		p.announceLocked()
	}
}

// stepSlack is how much later than its second a step of Run must come to
// say that the process did not run meanwhile (as the resolver's).
const stepSlack = time.Second

// holdGraceAcrossPauseLocked is given when Run received its once-a-second
// step. A step over stepSlack late says the process did not run meanwhile
// (SIGSTOP, a VM paused for migration, starved of CPU). Nothing read ARP or ND answers then, and the
// resolver holds an entry that failed across a pause as one being
// resolved again. The pause does not count toward a lost next hop's grace
// either: a loss whose grace had not ended at the previous step is dated
// later by the pause, so the resolver has what was left of the grace to
// find the gateway again. Counting it withdrew the VIPs at the first step
// after any pause longer than what was left, and the resolver announced
// them again a moment later: a withdrawal and an announcement the routers
// pass on, for nothing. (The status's "missing for" is then the time the
// process ran without the next hop.)
//
// idle is when Run last began to wait for a step or a kick: a step due
// while Run was still at work (a long rebuild) comes as soon as it waits,
// and the time until then is running time, not a pause (the resolver and
// the workers ran). Zero: Run waited since the previous step.
func (p *Plane) holdGraceAcrossPauseLocked(at, idle time.Time) {
	last := p.lastStep
	p.lastStep = at
	seen := p.pauses.paused(p.pauses.now())
	watched := seen - p.pausedAtStep
	p.pausedAtStep = seen
	if last.IsZero() {
		return
	}
	due := last.Add(time.Second)
	if idle.After(due) {
		due = idle
	}
	// The pause watch's, when larger: a pause while Run waited for the
	// lock or was at work (after idle, or before at) is in it alone. A
	// pause while Run waited for this step is in both, once.
	pause := max(at.Sub(due), watched)
	if pause <= stepSlack {
		return
	}
	now := p.now()
	if now.Before(at) {
		now = at
	}
	for i := range p.hopLost {
		if l := &p.hopLost[i]; !l.since.IsZero() && last.Sub(l.since) < NextHopGrace {
			// Never past this step (its time once it holds the
			// lock): a loss seen during the gap (the resolver runs
			// while Run is late) did not wait through the part of
			// the gap before it.
			if l.since = l.since.Add(pause); l.since.After(now) {
				l.since = now
			}
		}
	}
}

func hopState(l hopLoss, now time.Time) string {
	if l.since.IsZero() {
		return "resolved"
	}
	return "missing for " + now.Sub(l.since).Round(time.Second).String()
}
