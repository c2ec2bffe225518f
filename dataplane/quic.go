package dataplane

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/fulcrumlb/fulcrum/packet"
)

// QUIC connection-ID routing (docs/quic.md, package packet's QUICConfig).
//
// A UDP VIP with QUIC on routes each short-header packet by the server id
// in its destination connection ID to the backend that owns the id, before
// and instead of conntrack: the client's address may have changed (a new
// port after a NAT rebinding, a new network), which changes the 5-tuple
// and so the conntrack key and the hash, but not the connection ID. Like
// Katran, a routed packet neither reads nor writes conntrack: the id is
// the state, kept by the backend, and the same on every LB instance.
// Long headers, short headers without an id of this layout, ids no backend
// owns and ids of a down backend take the usual way: conntrack, then the
// scheduler. A drained backend (weight 0, not down) keeps its connections.
//
// The fused path leaves QUIC VIPs to the general path (fast.go), which
// does the lookup above; its cost per packet is in docs/quic.md.

// QUICPath is the way a packet to a QUIC VIP took; Counters.QUIC counts
// each.
type QUICPath uint8

const (
	QUICLongHeader QUICPath = iota // long header: flow hash and conntrack
	QUICRouted                     // short header, routed to the backend owning its server id
	QUICNoID                       // short header without a server id of the VIP's layout (too short, fixed bit clear, other config): fallback
	QUICUnknownID                  // short header whose server id no backend of the VIP owns: fallback
	QUICDownID                     // short header whose server id's backend is down: fallback
	NumQUICPaths
)

var quicPathNames = [NumQUICPaths]string{
	QUICLongHeader: "long-header",
	QUICRouted:     "routed",
	QUICNoID:       "no-id",
	QUICUnknownID:  "unknown-id",
	QUICDownID:     "down-id",
}

// String is the path's metric label.
func (p QUICPath) String() string {
	if p < NumQUICPaths {
		return quicPathNames[p]
	}
	return "unknown"
}

// quicRoutes is one VIP's server-id lookup: the layout, and the ids its
// backends own, sorted, with their backend ids. A VIP has few backends,
// so a binary search over a flat array is a handful of compares and needs
// no hashing.
type quicRoutes struct {
	cfg      packet.QUICConfig
	ids      []uint64
	backends []uint32
}

// QUICLayout is the connection-ID layout v routes QUIC short headers by
// (defaults filled in), and whether v routes them at all.
func (v *VIP) QUICLayout() (packet.QUICConfig, bool) {
	if v.QUIC == nil {
		return packet.QUICConfig{}, false
	}
	return v.QUIC.cfg, true
}

// newQUICRoutes builds v's lookup from its specs' ids (ids maps a
// backend's name to its backend id in the snapshot).
func newQUICRoutes(cv *VIPSpec, ids map[string]uint32) (*quicRoutes, error) {
	cfg := cv.QUIC.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("vip %s: %w", cv.Name, err)
	}
	type pair struct {
		id uint64
		be uint32
	}
	var ps []pair
	for _, cb := range cv.Backends {
		if !cb.HasQUICID {
			continue
		}
		if cb.QUICID > cfg.MaxServerID() {
			return nil, fmt.Errorf("vip %s: backend %q: quic_id %d does not fit %d octets", cv.Name, cb.Name, cb.QUICID, cfg.ServerIDLen)
		}
		ps = append(ps, pair{cb.QUICID, ids[cb.Name]})
	}
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Compare(a.id, b.id) })
	r := &quicRoutes{cfg: cfg}
	for k, p := range ps {
		if k > 0 && ps[k-1].id == p.id {
			return nil, fmt.Errorf("vip %s: quic_id %d is used by two backends", cv.Name, p.id)
		}
		r.ids = append(r.ids, p.id)
		r.backends = append(r.backends, p.be)
	}
	return r, nil
}

// owner is the backend id that owns server id, if any.
func (r *quicRoutes) owner(id uint64) (uint32, bool) {
	if k, found := slices.BinarySearch(r.ids, id); found {
		return r.backends[k], true
	}
	return 0, false
}

// routeQUIC decides packet i of QUIC VIP v: it returns the backend owning
// the server id of a short header when that backend is up, or nil for the
// usual way; either way the packet's path is counted. Fast path: no
// allocation.
func (w *Worker) routeQUIC(svc *Services, v *VIP, p *Pkt, i int) *Backend {
	ps := &w.parsed[i]
	w.initial[i] = false
	if ps.Proto != packet.ProtoUDP {
		return nil // an ICMP error about the flow: its quote's conntrack entry
	}
	c := &w.c
	payload := packet.UDPPayload(p.Buf[p.Off:p.Off+p.Len], ps)
	kind, id := packet.QUICServerID(payload, &v.QUIC.cfg)
	switch kind {
	case packet.QUICLong:
		c.QUIC[QUICLongHeader]++
		w.initial[i] = packet.QUICClientInitial(payload)
		return nil
	case packet.QUICNoID:
		c.QUIC[QUICNoID]++
		return nil
	}
	bid, ok := v.QUIC.owner(id)
	if !ok || int(bid) >= len(svc.Backends) || svc.Backends[bid] == nil {
		c.QUIC[QUICUnknownID]++
		return nil
	}
	be := svc.Backends[bid]
	if be.Down {
		c.QUIC[QUICDownID]++
		return nil
	}
	if isSelf(svc, &ps.Tuple.Src) {
		// From a VIP or the LB's own address: spoofed, or a loop. Routed,
		// the backend would answer that address (a reflection through
		// the LB). Not counted as a path: conntrack's miss drops it
		// (martian-source), as it drops such a new flow of any VIP.
		return nil
	}
	c.QUIC[QUICRouted]++
	return be
}

// QUICSummary names every non-zero QUIC path counter of c, for logs:
// "long-header=4 routed=1070"; empty without QUIC traffic.
func QUICSummary(c *Counters) string {
	var b []byte
	for p, n := range c.QUIC {
		if n == 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, QUICPath(p).String()...)
		b = append(b, '=')
		b = strconv.AppendUint(b, n, 10)
	}
	return string(b)
}
