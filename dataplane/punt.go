package dataplane

import (
	"net/netip"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/punt"
)

// The exception path's budgets (package punt has the policy and its
// classes): every packet for the host takes a token from its class's
// budget on the lcore, or is dropped as punt-rate-limited and counted in
// Counters.PuntLimited by class.

// SetPunt sets the snapshot's punt budgets (zero rates take the default)
// and the BGP neighbours whose packets are the bgp class. The control
// plane calls it on a snapshot it has built, before publishing it.
func (s *Services) SetPunt(c punt.Config, peers []netip.Addr) {
	s.punt = c.Rates()
	s.peers = make([][16]byte, 0, len(peers))
	for _, a := range peers {
		if a.IsValid() {
			s.peers = append(s.peers, a.Unmap().As16()) // IPv4 in its mapped form, as in flow.Tuple
		}
	}
}

// Punt is the snapshot's punt budgets, packets a second an lcore by class.
func (s *Services) Punt() punt.Rates { return s.punt }

// puntClass is the class of a punted IP packet ps (not VIP traffic).
func puntClass(svc *Services, ps *packet.Parsed) punt.Class {
	t := &ps.Tuple
	switch {
	case isND(ps) || isMLD(ps):
		return punt.Neighbour
	case svc == nil:
		return punt.Other
	}
	for i := range svc.peers {
		if svc.peers[i] == t.Src {
			return punt.BGP
		}
	}
	if _, ok := svc.backendAddrs[t.Src]; ok {
		return punt.Health
	}
	if ps.Proto == packet.ProtoTCP && isHealthPort(t.DstPort) && svc.isVIPAddr(&t.Src) {
		return punt.Health
	}
	return punt.Other
}

// isND reports whether ps is neighbour discovery a host's kernel acts on
// (RFC 4861; Linux's ndisc_rcv): a router advertisement, neighbour
// solicitation or advertisement, or redirect (134-137) over IPv6 (not
// IPv4's protocol 58), not fragmented (RFC 6980), code 0 and a hop limit
// of 255, which only a sender on the link can deliver. Anything else
// would let an attacker spend the neighbour budget with packets the
// kernel then drops: one from the internet, or a router solicitation,
// which only a router answers (Linux drops it unless forwarding).
func isND(ps *packet.Parsed) bool {
	return ps.Tuple.V6 && ps.Proto == packet.ProtoICMPv6 && !ps.Fragment && ps.TTL == 255 && ps.ICMPCode == 0 &&
		ps.ICMPType > header.ICMPv6RouterSolicit && ps.ICMPType <= header.ICMPv6Redirect
}

// isMLD reports whether ps is a multicast listener query as the kernel
// takes it (RFC 2710, RFC 3810): ICMPv6 type 130, not fragmented, from a
// link-local source with a hop limit of 1, which no router forwards. Where
// switches snoop MLD, a query the LB does not answer ends its membership
// of its solicited-node group, and neighbour solicitations for its
// address stop reaching it. Other hosts' reports and dones are other: a
// host needs none of them (an MLDv1 host that misses one only sends its
// own report), and on a busy link they would spend the budget ARP and
// neighbour discovery need.
func isMLD(ps *packet.Parsed) bool {
	t := &ps.Tuple
	return t.V6 && ps.Proto == packet.ProtoICMPv6 && !ps.Fragment && ps.TTL == 1 && t.Src[0] == 0xfe && t.Src[1]&0xc0 == 0x80 &&
		ps.ICMPType == header.ICMPv6MLDQuery
}

// puntL2 is the class of a punted frame that is not IP.
func puntL2(ps *packet.Parsed) punt.Class {
	if ps.EtherType == packet.EtherTypeARP {
		return punt.Neighbour
	}
	return punt.Other
}

// defaultPunt is the budgets before the first snapshot.
var defaultPunt = punt.Default.Rates()

// punt hands packet i to the kernel if its class's budget allows, or drops
// it (punt-rate-limited). svc may be nil (no snapshot yet): the default
// budgets apply.
func (w *Worker) punt(i int, svc *Services, class punt.Class, now conntrack.Time) {
	if w.noException {
		// Nowhere to punt to: the drop is no-exception-path, decided
		// here (not by the I/O loop after a snapshot may have counted a
		// punt), and no budget is spent.
		w.drop(i, DropNoException)
		return
	}
	if taggedVLAN(&w.parsed[i]) {
		// The kernel's end of the tap has no VLAN interface: it drops
		// a frame tagged with a VLAN other than 0 (PACKET_OTHERHOST)
		// after the tap's write, and a trunk's other VLANs' broadcast
		// ARP would take the neighbour budget from the LB's own.
		w.drop(i, DropNotForHost)
		return
	}
	rate := defaultPunt[class]
	if svc != nil {
		rate = svc.punt[class]
	}
	if !w.puntBudget[class].take(now, rate, punt.Burst(rate)) {
		w.c.PuntLimited[class]++
		w.drop(i, DropPuntRateLimited)
		return
	}
	w.c.Punted++
	w.Verdicts[i] = Punt
}

// SetExceptionPath tells the worker whether its I/O loop has an exception
// path: without one, packets for the host are dropped as no-exception-path
// rather than punted. Call it while the worker is not running.
func (w *Worker) SetExceptionPath(has bool) { w.noException = !has }

// tunnelError reports whether ps, an ICMP error for the host, is about one
// of the LB's own tunnel packets: its quote is from the address the error
// came to, to a backend, by GRE, IPIP or UDP to the GUE port. A router
// between the LB and the backend sends such an error when the tunnel's
// path is smaller than dataplane.mtu (a packet too big) or the backend is
// unreachable. The kernel has no tunnel or socket for it and would
// discard it after the tap's write; the dataplane counts it instead
// (tunnel-icmp-error), the one sign that full-size packets to a backend
// are being lost on the way (README: the path to every backend must carry
// mtu). It is not relayed to the client.
func (s *Services) tunnelError(p *Pkt, ps *packet.Parsed) bool {
	var q flow.Tuple
	if packet.ParseICMPError(p.Buf[p.Off:p.Off+p.Len], ps, &q) != packet.OK || q.Src != ps.Tuple.Dst || q.V6 != ps.Tuple.V6 {
		return false
	}
	if _, ok := s.backendAddrs[q.Dst]; !ok {
		return false
	}
	switch q.Proto {
	case header.ProtoGRE, header.ProtoIPIP, header.ProtoIPv6:
		return true
	case packet.ProtoUDP:
		return s.Enc != nil && int(q.DstPort) == s.Enc.Config().GUEPort
	}
	return false
}

// taggedVLAN reports whether ps came in a frame tagged with a VLAN other
// than 0 (a priority tag, which the kernel takes as untagged).
func taggedVLAN(ps *packet.Parsed) bool {
	for _, tci := range ps.VLANs[:ps.NumVLANs] {
		if tci&0x0fff != 0 {
			return true
		}
	}
	return false
}
