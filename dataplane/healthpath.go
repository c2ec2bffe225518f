package dataplane

import (
	"fmt"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

// Health checks through the tunnel (Maglev section 3.3.2, GLB's
// health checks): a check of a backend must cross the same tunnel as its
// clients' packets, or a backend whose decapsulation or VIP-on-loopback is
// broken passes its checks and black-holes every flow it is given.
//
// The check is an ordinary TCP connection of the LB host's kernel, from
// the LB's own address (lb_ipv4, lb_ipv6: the tunnels' outer source) to
// the VIP, routed by the kernel into the exception tap. Its source port
// names the backend: HealthPortBase + the backend's slot, a number the
// snapshot hands to every backend of a VIP whose checks go through the
// tunnel and keeps across reloads, as it keeps backend ids. The engine
// gives every burst the tap delivers to ProcessFromKernel, which
// encapsulates the check packets to their backend exactly as client
// packets are encapsulated (the VIP's encapsulation, the backend's tunnel
// target, the next hop's MAC) and passes every other packet through
// unchanged. The backend answers from the VIP to the LB's address (DSR);
// that answer is not VIP traffic, so Process hands it to the kernel like
// any packet for the LB's own address.
//
// Only packets the kernel sent are steered: Process never looks at source
// ports, so a packet on the wire that claims the LB's address and a check
// port is VIP traffic like any other (or not served at all). Check packets
// never touch conntrack and are not client traffic: no VIP or backend
// counter moves; HealthTunnelTx counts them.
const (
	// HealthPortBase is the source port of slot 0. The range begins just
	// above Linux's default ephemeral ports (ip_local_port_range,
	// 32768-60999), so the kernel never picks one of them for a
	// connection of its own; a host whose range reaches 61000 must lower
	// it.
	HealthPortBase = 61000
	// HealthSlots bounds the backends checked through the tunnel, over all
	// VIPs: ports HealthPortBase..HealthPortBase+HealthSlots-1
	// (61000-65095).
	HealthSlots = 4096
)

// isHealthPort reports whether port is one of the checks' source ports
// (HealthPortBase..HealthPortBase+HealthSlots-1).
func isHealthPort(port uint16) bool {
	return port >= HealthPortBase && int(port) < HealthPortBase+HealthSlots
}

// healthSlots is the snapshot's map of checks through the tunnel.
type healthSlots struct {
	byIdent map[backendIdent]uint16 // kept across snapshots
	backend []uint32                // slot -> backend id + 1; 0: free
	n       int                     // slots in use; 0: ProcessFromKernel passes everything
	// The LB's addresses, as a parsed tuple holds them (IPv4 mapped).
	src4, src6 [16]byte
	has4, has6 bool
}

// assign gives every backend of a tunnel-checked VIP of s its slot: the
// one it had in prev, or a free one that prev did not use (so a check of a
// removed backend still in flight cannot reach the backend that took its
// slot). Only when every slot prev left unused is taken does a new
// backend get one that prev used for a backend s no longer has: a
// reload within HealthSlots backends is never refused for want of slots
// (replacing a backend of a full table, or moving a VIP to another port,
// which makes every backend of it new here).
func (h *healthSlots) assign(prev, s *Services) error {
	var old map[backendIdent]uint16
	usedBefore := map[uint16]bool{}
	if prev != nil {
		old = prev.health.byIdent
		for _, sl := range old {
			usedBefore[sl] = true
		}
	}
	*h = healthSlots{byIdent: map[backendIdent]uint16{}}
	var fresh []backendIdent
	var freshIDs []uint32
	taken := map[uint16]bool{}
	for _, v := range s.VIPs {
		if v == nil || !v.HealthTunnel {
			continue
		}
		for _, id := range v.Members {
			b := s.Backends[id]
			ident := backendIdent{v.Key, b.Name, b.Addr}
			if sl, ok := old[ident]; ok {
				h.set(ident, sl, id)
				taken[sl] = true
				continue
			}
			fresh = append(fresh, ident)
			freshIDs = append(freshIDs, id)
		}
	}
	next, reuse := 0, 0
	for i, ident := range fresh {
		for next < HealthSlots && (taken[uint16(next)] || usedBefore[uint16(next)]) {
			next++
		}
		sl := next
		if next < HealthSlots {
			next++
		} else {
			for reuse < HealthSlots && taken[uint16(reuse)] {
				reuse++
			}
			if reuse >= HealthSlots {
				return fmt.Errorf("more than %d backends checked through the tunnel (source ports %d-%d)", HealthSlots, HealthPortBase, HealthPortBase+HealthSlots-1)
			}
			sl = reuse
		}
		taken[uint16(sl)] = true
		h.set(ident, uint16(sl), freshIDs[i])
	}
	if h.n == 0 {
		return nil
	}
	cfg := s.Enc.Config()
	if cfg.SrcV4.IsValid() {
		h.src4, h.has4 = cfg.SrcV4.As16(), true
	}
	if cfg.SrcV6.IsValid() {
		h.src6, h.has6 = cfg.SrcV6.As16(), true
	}
	return nil
}

func (h *healthSlots) set(ident backendIdent, slot uint16, id uint32) {
	h.byIdent[ident] = slot
	for len(h.backend) <= int(slot) {
		h.backend = append(h.backend, 0)
	}
	h.backend[slot] = id + 1
	h.n++
}

// HealthPort is the source port of the checks through the tunnel of the
// backend named backend of the VIP whose key is vip (ok false when the
// VIP's checks are direct, or there is no such backend).
func (s *Services) HealthPort(vip flow.VIPKey, backend string) (port uint16, ok bool) {
	vid, ok := s.vipIDs[vip]
	if !ok || int(vid) >= len(s.VIPs) || s.VIPs[vid] == nil {
		return 0, false
	}
	for _, id := range s.VIPs[vid].Members {
		if b := s.Backends[id]; b != nil && b.Name == backend {
			sl, ok := s.health.byIdent[backendIdent{vip, b.Name, b.Addr}]
			if !ok {
				return 0, false
			}
			return HealthPortBase + sl, true
		}
	}
	return 0, false
}

// healthBackend is the backend whose checks through the tunnel leave from
// port (nil if none).
func (s *Services) healthBackend(port uint16) *Backend {
	sl := int(port) - HealthPortBase
	if sl < 0 || sl >= len(s.health.backend) || s.health.backend[sl] == 0 {
		return nil
	}
	return s.Backends[s.health.backend[sl]-1]
}

// checkAnswerOwner is the backend whose check through the tunnel k is the
// client's side of (the reverse of an ICMP error's quote: from the LB's
// address and a check port to the VIP), or nil: a router's error about
// the backend's answer (sent by DSR from the VIP to the LB) concerns that
// backend's connection only.
func (s *Services) checkAnswerOwner(k *flow.Tuple) *Backend {
	h := &s.health
	if h.n == 0 || k.Proto != packet.ProtoTCP || !isHealthPort(k.SrcPort) {
		return nil
	}
	if k.V6 {
		if !h.has6 || k.Src != h.src6 {
			return nil
		}
	} else if !h.has4 || k.Src != h.src4 {
		return nil
	}
	be := s.healthBackend(k.SrcPort)
	if be == nil {
		return nil
	}
	if v := s.VIPs[be.VIP]; v == nil || !v.HealthTunnel || v.Addr.As16() != k.Dst {
		return nil
	}
	return be
}

// SteersFromKernel reports whether the snapshot in force has checks
// through the tunnel, so that the engine hands the tap's bursts to
// ProcessFromKernel; without them the tap's packets go to the wire as
// they are, at no cost.
func (w *Worker) SteersFromKernel() bool {
	s := w.shared.Services.Load()
	return s != nil && s.health.n > 0
}

// ProcessFromKernel decides the fate of a burst of at most MaxBurst
// packets the kernel sent through the exception tap: Verdicts[i] is Tx for
// a packet to send on the wire (a health check's, encapsulated to its
// backend with pkts[i] moved to the new frame; any other, unchanged) or
// Drop (a check packet that cannot be delivered, counted under its
// reason). It allocates nothing, takes no lock and makes no syscall.
func (w *Worker) ProcessFromKernel(pkts []Pkt) {
	if len(pkts) > MaxBurst {
		pkts = pkts[:MaxBurst]
	}
	svc := w.shared.Services.Load()
	for i := range pkts {
		w.Verdicts[i] = Tx
		if svc == nil || svc.health.n == 0 {
			continue
		}
		p := &pkts[i]
		if p.Off < 0 || p.Len < 0 || p.Off > len(p.Buf) || p.Len > len(p.Buf)-p.Off {
			continue // not ours to judge: the driver's frame goes out as it came
		}
		ps := &w.parsed[i]
		if packet.Parse(p.Buf[p.Off:p.Off+p.Len], ps) != packet.OK {
			continue
		}
		if !w.healthCheck(svc, ps) {
			continue
		}
		w.steer(svc, p, ps, i)
	}
}

// healthCheck reports whether a parsed packet from the kernel is a check
// through the tunnel: TCP, not a fragment, from the LB's address and a
// check port, to a VIP address. The VIP and the slot are steer's to judge.
func (w *Worker) healthCheck(svc *Services, ps *packet.Parsed) bool {
	h := &svc.health
	if ps.Proto != packet.ProtoTCP || ps.Fragment {
		return false
	}
	if !isHealthPort(ps.Tuple.SrcPort) {
		return false
	}
	if ps.Tuple.V6 {
		if !h.has6 || ps.Tuple.Src != h.src6 {
			return false
		}
	} else if !h.has4 || ps.Tuple.Src != h.src4 {
		return false
	}
	return svc.isVIPAddr(&ps.Tuple.Dst)
}

// steer encapsulates check packet i to the backend its source port names.
func (w *Worker) steer(svc *Services, p *Pkt, ps *packet.Parsed, i int) {
	be := svc.healthBackend(ps.Tuple.SrcPort)
	if be == nil {
		w.drop(i, DropHealthNoSlot)
		return
	}
	v := svc.VIPs[be.VIP]
	if v == nil || !v.HealthTunnel || v.Addr.As16() != ps.Tuple.Dst {
		w.drop(i, DropHealthNoSlot) // the slot is another VIP's (or a stale check's)
		return
	}
	dst, ok := svc.NextHop.mac(be.Target.OuterV6())
	if !ok {
		// Not a wire packet: counted as the kernel's (no-next-hop is the
		// wire's, and would read as client traffic lost).
		w.drop(i, DropHealthNotSent)
		return
	}
	start, length, res := svc.Enc.Encap(p.Buf, p.Off, p.Len, ps, w.hasher.Hash(&ps.Tuple), v.Encap, &be.Target, *dst, w.portMAC)
	if res != encap.Forward {
		// Too big, or not encapsulable: a check is small, and the
		// kernel must not get an ICMP error from its own dataplane.
		w.drop(i, DropHealthNotSent)
		return
	}
	p.Off, p.Len = start, length
	w.c.HealthTunnelTx++
}
