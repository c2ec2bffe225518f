package control

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

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
// reload that has not been checked yet.
//
// Likewise a fresh instance withholds a VIP address until it can forward
// to its backends: the next hop of at least one backend's address family
// is known (the gateway's MAC resolved). Announcing earlier would pull
// traffic onto an instance that drops it (no-next-hop).
func (p *Plane) announceLocked() {
	if p.announce == nil {
		return
	}
	svc := p.shared.Services.Load()
	unsettled := p.unsettledVIPsLocked()
	withheld := map[netip.Addr]bool{}
	for _, v := range svc.VIPs {
		if v != nil && (unsettled[v.Name] || !canForward(svc, v)) && !p.wasAnnounced[v.Addr] {
			withheld[v.Addr] = true
		}
	}
	var set []netip.Prefix
	seen := map[netip.Addr]bool{}
	for _, v := range svc.VIPs {
		if v == nil || v.Table == nil || seen[v.Addr] || withheld[v.Addr] {
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
	sort.Slice(set, func(i, j int) bool { return set[i].Addr().Less(set[j].Addr()) })
	key := fmt.Sprint(set)
	if key == p.announced {
		return
	}
	p.announced = key
	p.announce(set)
}

// canForward reports whether svc has a next hop for at least one of v's
// backends' address families.
func canForward(svc *dataplane.Services, v *dataplane.VIP) bool {
	nh := &svc.NextHop
	for _, id := range v.Members {
		if int(id) >= len(svc.Backends) || svc.Backends[id] == nil {
			continue
		}
		if a := svc.Backends[id].Addr; (a.Is4() && nh.Has4) || (a.Is6() && nh.Has6) {
			return true
		}
	}
	return false
}
