package dataplane

import (
	"encoding/binary"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/internal/prefetch"
	"github.com/fulcrumlb/fulcrum/packet"
)

// The fused path.
//
// Nearly every packet a busy LB forwards is a TCP segment (or a UDP
// datagram) of a flow conntrack already knows, to a VIP of one exact port: parse, one VIP probe, the local hash (flow.LocalHasher; the fleet
// hash the tunnel's entropy fields need is stored in the entry), one
// conntrack hit, one encapsulation. fastBurst does exactly that over the burst, in three
// passes (parse and classify; one prefetched conntrack probe for all
// candidates; commit in order), with no Parsed zeroing (packet.ParseFlow
// sets only what the pipeline reads) and counters added once per burst.
// A SYN of a known flow on a Maglev VIP (a retransmission, or a new
// connection on a tuple whose end the LB saw) is fused too: it takes the
// table's choice, from the fleet hash stored in the entry; a SYN on an
// established flow keeps its pin and is the general path's. So is a Maglev VIP's SYN that
// misses, a new flow (fuseNew: the fleet hash, the table's choice, the
// insert, with the burst's insert lines and table slots prefetched
// together, as the general path does), which keeps a SYN flood on this
// path. Everything else (other misses, SYNs to VIPs of load-based
// schedulers, fragments, ICMP, VLAN tags, IP options, punts, every-port
// VIPs, pins to a backend that left or is down, too-big packets) goes
// through the general stages (process) afterwards.
//
// Inserts inside the burst. The burst's probe runs before its inserts, so
// the commit looks again where an insert may have changed the answer: a
// hit whose entry an insert evicted (Table.Evictions moved, and the slot
// holds another flow now) is a miss, and a miss of a flow a fuseNew
// inserted (a second filter, ins) is looked up again (Table.Peek). The
// general path does the same (Table.Stale, Table.LookupAgain), so both
// count each packet once, as the lookup that decided it.
//
// Order. The fused packets are committed before the general ones, so a
// flow must never have a general packet before a fused one in the same
// burst (a SYN that re-chooses the backend, then an ACK that must follow
// it). Two rules keep every flow's packets in arrival order:
//   - after the first packet ParseFlow declines (its flow is unknown here),
//     the rest of the burst is general;
//   - a packet whose flow (by a 256-bit filter over a cheap tuple hash;
//     a false match only costs the general path) had an earlier general
//     packet in this burst is general too.
// Everything the fused path checks per flow (the entry, its pin, the
// backend's state, the next hop) is the same for every packet of the flow
// within the burst, so a flow the fused path refuses is refused whole;
// only per-packet checks (the SYN flag, the MTU, headroom) split a flow,
// and the filter covers those.
//
// Equality. For the packets it takes the fused path does what the general
// path does, in the same order per flow: the same conntrack hit (counted
// once, as Hits and CTHits), the same Touch, the same Encap on the same
// Parsed fields (through the backend's prepared headers, encap.Header,
// as the general path), the same counters. TestFastPathMatchesGeneral runs
// captures through both and compares frames, verdicts, counters and the
// conntrack table.

// maxFastBackoff bounds the bursts run without trying the fused path after
// bursts that fused nothing: a SYN flood or a cold table wastes the attempt
// (parse, hash, probe, all repeated by the general path) on at most one
// burst in 1+maxFastBackoff, and established traffic that returns waits
// at most that many bursts. Either path gives the same results.
const maxFastBackoff = 8

// fastScratch is fastBurst's per-burst state, kept in the Worker.
type fastScratch struct {
	kind  [MaxBurst]uint8 // fastOther, fastGeneral or fastCandidate
	slow  [MaxBurst]uint8 // the general packets' indices, in order
	gen   [MaxBurst]Pkt   // the general packets, gathered for process
	verd  [MaxBurst]Verdict
	why   [MaxBurst]dropWhy // a fused packet's drop reason (0: none), moved to Worker.why
	lines [MaxBurst]uintptr // the candidates' bucket lines, to prefetch
	// The new flows' insert and Maglev slot lines, to prefetch.
	newLines [(conntrack.BucketSlots + 1) * MaxBurst]uintptr
}

const (
	fastOther     = iota // parsed, but no exact-port VIP: general, and no fused packet shares its flow
	fastGeneral          // a VIP packet the general path must take (a SYN of a load-based VIP)
	fastCandidate        // probed in conntrack; fused if its entry and backend allow
	fastNew              // a candidate that missed, a pure SYN of a Maglev VIP: fused as a new flow (fuseNew) if it can be
)

// fastBurst runs the fused path over pkts and the general path over what
// it leaves, and sets every packet's verdict.
func (w *Worker) fastBurst(pkts []Pkt, svc *Services, now conntrack.Time) {
	f := &w.fast
	n := len(pkts)
	cut := n  // from here on, every packet is general
	m := 0    // conntrack candidates
	sent := 0 // candidates whose bucket is prefetched
	var lastK vipKey
	var lastV *VIP
	for i := range pkts {
		p := &pkts[i]
		// Off and Len within Buf, as two unsigned compares (a negative
		// value is a huge one): the general path drops what fails.
		if uint(p.Off) > uint(len(p.Buf)) || uint(p.Len) > uint(len(p.Buf)-p.Off) {
			cut = i
			break
		}
		ps := &w.parsed[i]
		if !packet.ParseFlow(p.Buf[p.Off:][:p.Len], ps) {
			cut = i
			break
		}
		k := makeVIPKey(&ps.Tuple.Dst, ps.Tuple.DstPort, ps.Proto)
		v := lastV // a burst is mostly one VIP's: skip the probe when it is the last packet's
		if k != lastK || v == nil {
			v = svc.index.get(&k)
			lastK, lastV = k, v
		}
		if v == nil || martian(&ps.Tuple) {
			f.kind[i] = fastOther // a martian source: the general path drops it
			continue
		}
		if ps.TCPFlags&packet.TCPSyn != 0 && (ps.TCPFlags&packet.TCPAck != 0 || v.Sched.IsPicker()) || v.QUIC != nil {
			// A SYN under a load-based scheduler, or a SYN-ACK from a
			// client: rare, and the general path's. So is every packet
			// of a QUIC VIP: its short headers are routed by connection
			// ID before conntrack (quic.go).
			f.kind[i] = fastGeneral
			continue
		}
		h := w.local.Hash(&ps.Tuple)
		w.vips[i] = v
		f.kind[i] = fastCandidate
		w.ctHashes[m] = h
		w.ctKeys[m] = &ps.Tuple
		// The buckets' signature words, prefetched eight at a time
		// (one call each: the call costs more than the prefetch).
		f.lines[m&(MaxBurst-1)] = w.ct.BucketLine(h)
		m++
		sent = prefetch.Eights(f.lines[:], sent, m)
	}
	if m > sent {
		prefetch.Lines(f.lines[sent:m])
	}
	if m == 0 {
		w.fastBackoff = min(max(2*w.fastBackoff, 1), maxFastBackoff)
		w.fastIdle = w.fastBackoff
		w.process(pkts, svc, now) // nothing to fuse: no gathering either
		return
	}
	if w.ct.ProbeBurst(w.ctHashes[:m], w.ctKeys[:m], now, w.ctOut[:m]) < m {
		w.fastMisses(cut)
	}

	c := &w.c
	nh := &svc.NextHop
	enc := svc.Enc
	var seen flowFilter // the flows that had a general packet
	var ins flowFilter  // the flows fuseNew inserted, by local hash: their later packets look again
	nslow, fused, fresh, fdrops, j := 0, 0, 0, 0, 0
	ev := w.ct.Evictions() // fuseNew's inserts may evict a later packet's entry
	var rxBytes uint64
	for i := 0; i < cut; i++ {
		switch f.kind[i] {
		case fastOther:
			f.slow[nslow] = uint8(i)
			nslow++
			continue
		case fastGeneral:
			seen.mark(&w.parsed[i].Tuple)
			f.slow[nslow] = uint8(i)
			nslow++
			continue
		}
		e, k := w.ctOut[j], j
		j++
		if nslow > 0 && w.parsed[i].TCPFlags&(packet.TCPFin|packet.TCPRst) != 0 {
			// A close makes an established entry the first to evict:
			// committed ahead of an earlier packet's insert on the
			// general path, it would let that insert evict the
			// connection, whose next packet then goes where the table
			// says. After a general packet it goes general too, in
			// arrival order, and so do its flow's later packets.
			seen.mark(&w.parsed[i].Tuple)
			f.slow[nslow] = uint8(i)
			nslow++
			continue
		}
		if fresh > 0 {
			// fuseNew's inserts earlier in the burst change what the
			// probe saw: an entry evicted for one of them now holds
			// another flow, and a flow they inserted has an entry now.
			// The general path finds the same (Stale, LookupAgain).
			key := w.ctKeys[k]
			if e != nil && w.ct.Evictions() != ev && !e.Is(key) {
				e = nil
			}
			if e == nil && ins.hasHash(w.ctHashes[k]) {
				e = w.ct.Peek(w.ctHashes[k], key, now)
			}
		}
		l := pkts[i].Len
		var ok bool
		var res encap.Result
		if v := w.vips[i]; e == nil && w.parsed[i].TCPFlags&packet.TCPSyn != 0 && v.Table != nil {
			key := w.ctKeys[k]
			h := w.hashes[i] // fastMisses' when it marked it
			if f.kind[i] != fastNew {
				h = w.fleetHash(v, key)
			}
			if ok, res = w.fuseNew(&pkts[i], i, svc, nh, enc, w.ctHashes[k], h, &seen, now); ok {
				fresh++
				ins.markHash(w.ctHashes[k])
			}
		} else {
			ok, res = w.fuse(&pkts[i], i, svc, nh, enc, e, &seen, now)
		}
		if ok {
			fused++
			rxBytes += uint64(l)
			f.verd[i] = Tx
			if res != encap.Forward { // not reached: fuse checked what Encap checks
				c.Encap[res]++
				c.Encap[encap.Forward]--
				f.verd[i] = Drop
				f.why[i] = whyEncap(res)
				fdrops++
			}
			continue
		}
		f.slow[nslow] = uint8(i)
		nslow++
	}
	for i := cut; i < n; i++ {
		f.slow[nslow] = uint8(i)
		nslow++
	}
	if fused == 0 {
		w.fastBackoff = min(max(2*w.fastBackoff, 1), maxFastBackoff)
		w.fastIdle = w.fastBackoff
	} else {
		w.fastBackoff = 0
	}
	c.RxPackets += uint64(fused)
	c.RxBytes += rxBytes
	c.CTHits += uint64(fused - fresh)
	c.Encap[encap.Forward] += uint64(fused)
	w.ct.CountHits(fused - fresh)

	switch nslow {
	case 0:
		copy(w.Verdicts[:n], f.verd[:n])
		w.fusedWhy(n, fdrops)
		return
	case n:
		w.process(pkts, svc, now)
		return
	}
	for k := 0; k < nslow; k++ {
		f.gen[k] = pkts[f.slow[k]]
	}
	w.process(f.gen[:nslow], svc, now)
	// Scatter back. Going down is safe in place: slow[k] >= k.
	for k := nslow - 1; k >= 0; k-- {
		i := f.slow[k]
		pkts[i].Off, pkts[i].Len = f.gen[k].Off, f.gen[k].Len
		f.verd[i] = w.Verdicts[k]
		w.why[i] = w.why[k]
	}
	for k := range f.gen[:nslow] {
		f.gen[k].Buf = nil // hold no packet memory past the burst
	}
	copy(w.Verdicts[:n], f.verd[:n])
	w.fusedWhy(n, fdrops)
}

// fastMisses marks the candidates among the first cut packets that
// missed in conntrack and that fuseNew may take as new flows: pure SYNs of
// VIPs with a Maglev table (fastBurst left SYNs of load-based VIPs to the
// general path). Their fleet hash goes to Worker.hashes, and the entry
// lines their inserts will touch and the table slots they will read are
// prefetched together, as the general path does for its misses.
func (w *Worker) fastMisses(cut int) {
	f := &w.fast
	nl, j := 0, 0
	for i := 0; i < cut; i++ {
		if f.kind[i] != fastCandidate {
			continue
		}
		k := j
		j++
		ps := &w.parsed[i]
		v := w.vips[i]
		if w.ctOut[k] != nil || ps.TCPFlags&packet.TCPSyn == 0 || v.Table == nil {
			continue
		}
		h := w.fleetHash(v, &ps.Tuple)
		w.hashes[i] = h
		f.kind[i] = fastNew
		nl += w.ct.InsertLines(w.ctHashes[k], f.newLines[nl:])
		f.newLines[nl] = v.Table.SlotLine(h)
		nl++
	}
	prefetch.Lines(f.newLines[:nl])
}

// fusedWhy moves the drop reasons of the fused packets the burst dropped
// (fdrops of them, almost always none) to Worker.why.
func (w *Worker) fusedWhy(n, fdrops int) {
	if fdrops == 0 {
		return
	}
	f := &w.fast
	for i := range f.why[:n] {
		if f.why[i] != 0 {
			w.why[i], f.why[i] = f.why[i], 0
		}
	}
}

// fuse forwards packet i through its conntrack entry e and returns true
// with Encap's result, or returns false, having changed nothing, when the
// general path must take it (and marks its flow in seen so that its later
// packets do too). It does what selectBackend does for a hit of a Maglev
// VIP's flow: a non-SYN packet follows the pin; a SYN (a retransmission, or
// a new connection reusing the tuple) takes the table's current choice and
// repins.
func (w *Worker) fuse(p *Pkt, i int, svc *Services, nh *NextHop, enc *encap.Encapsulator, e *conntrack.Entry, seen *flowFilter, now conntrack.Time) (ok bool, res encap.Result) {
	ps := &w.parsed[i]
	if e == nil || e.FlowHash() == 0 || seen.has(&ps.Tuple) {
		seen.mark(&ps.Tuple)
		return false, 0
	}
	v := w.vips[i]
	syn := ps.TCPFlags&packet.TCPSyn != 0 // a pure SYN: fastBurst left the others to the general path
	var be *Backend
	var cht *encap.Backend // the flow's second chance (secondchance.go), as selectBackend finds it
	if syn {
		// A SYN on a live flow keeps its pin (selectBackend):
		// rare, and the general path's. Any other SYN takes the table's
		// current choice under the VIP's current hash setting; an entry
		// hashed under an older one is the general path's (hashfields.go).
		if e.Live() {
			seen.mark(&ps.Tuple)
			return false, 0
		}
		h := w.fleetHash(v, &ps.Tuple)
		if h != e.FlowHash() {
			seen.mark(&ps.Tuple)
			return false, 0
		}
		be = w.fromTable(svc, v, h)
	} else if e.State() == conntrack.StateClosing {
		// A segment after the client's FIN or RST may go to the table's
		// choice instead of the pin, or repin the entry if it reopens it
		// (secondchance.go: closingChance, reopened): the general path's;
		// rare, one ACK in a normal close.
		seen.mark(&ps.Tuple)
		return false, 0
	} else if be = w.pinned(svc, v, e); be != nil && be.Down {
		be = nil
	} else if _, ok := e.Chance(); ok && be != nil {
		cht = chanceTarget(v.Encap, entryChance(svc, v, e, be))
	}
	if be == nil {
		seen.mark(&ps.Tuple)
		return false, 0
	}
	dst, known := nh.mac(be.Target.OuterV6())
	if !known {
		seen.mark(&ps.Tuple)
		return false, 0
	}
	// What Encap and EncapChance would not forward (too big, no
	// headroom: the general path answers or counts it) is the general
	// path's. Without a second chance, the prepared header is written
	// first: Header.Encap checks what it needs (Fits, headroom) and
	// changes nothing when it refuses, and nothing below changes what it
	// writes (the entry's fleet hash is set at insert).
	var start, length int
	if cht == nil {
		if start, length = be.Hdr.Encap(p.Buf, p.Off, p.Len, ps, v.Encap, e.FlowHash(), dst, &w.portMAC); length == 0 {
			seen.mark(&ps.Tuple)
			return false, 0
		}
	} else if !enc.FitsChance(v.Encap, &be.Target, cht, int(ps.IPLen)) ||
		p.Off < encap.Overhead(v.Encap, be.Target.OuterV6())+encap.ChanceLen(v.Encap, cht) {
		seen.mark(&ps.Tuple)
		return false, 0
	}
	c := &w.c
	was, lastSeen := e.State(), e.LastSeen()
	w.ct.TouchSegment(e, now, ps.TCPFlags, hasData(ps))
	switch {
	case syn:
		if was == conntrack.StateNew {
			backendCounters(c, be).SYNRetrans++
		} else {
			w.countNew(c, v, be, e.TryHandshake())
		}
		if w.pinned(svc, v, e) != be {
			w.ct.Repin(e, be.ID, be.Gen)
		}
		e.ClearChance()
	case was == conntrack.StateNew && e.State() == conntrack.StateEstablished && e.SYNSeen():
		// The handshake completed (as in selectBackend).
		e.HandshakeDone()
		bc := backendCounters(c, be)
		bc.Established++
		bc.HandshakeMs += uint64(now - lastSeen)
	}
	// encapTo's second case, written out: the call through encapTo (11
	// arguments, not inlined) cost as much as its work.
	if cht != nil {
		if start, length, res = enc.EncapChance(p.Buf, p.Off, p.Len, ps, e.FlowHash(), v.Encap, &be.Target, cht, *dst, w.portMAC); res != encap.Forward {
			return true, res
		}
		c.SecondChance++
	}
	countForward(c, v, be, int(ps.L3Off)+int(ps.IPLen))
	p.Off, p.Len = start, length
	return true, encap.Forward
}

// fuseNew forwards packet i, a pure SYN of a Maglev VIP's flow that
// conntrack does not know, of fleet hash h, as a new flow and returns true
// with Encap's result, or returns false, having changed nothing, when the
// general path must take it. It does what the general path does for such
// a miss (LookupBurst's miss, selectBackend's choice from the table, the
// insert with the flow's fleet hash, the new-flow counters): the same
// backend, the same entry.
func (w *Worker) fuseNew(p *Pkt, i int, svc *Services, nh *NextHop, enc *encap.Encapsulator, lh, h uint64, seen *flowFilter, now conntrack.Time) (ok bool, res encap.Result) {
	ps := &w.parsed[i]
	if seen.has(&ps.Tuple) {
		seen.mark(&ps.Tuple)
		return false, 0
	}
	v := w.vips[i]
	be := w.fromTable(svc, v, h)
	if be == nil || isSelf(svc, &ps.Tuple.Src) { // from a VIP or the LB: the general path drops it
		seen.mark(&ps.Tuple)
		return false, 0
	}
	dst, known := nh.mac(be.Target.OuterV6())
	if !known || !be.Hdr.Fits(v.Encap, ps) || p.Off+int(ps.L3Off) < be.Hdr.HeaderLen() {
		seen.mark(&ps.Tuple)
		return false, 0
	}
	c := &w.c
	c.CTMisses++
	// The general path's LookupBurst would miss too: fastBurst looked
	// again after any insert of the burst that could have made an entry,
	// and ProbeBurst reclaimed an expired one.
	w.ct.CountMiss()
	w.countNew(c, v, be, true)
	e := w.ct.Insert(lh, &ps.Tuple, conntrack.Initial(ps.Proto, ps.TCPFlags), v.ID, be.ID, be.Gen, now)
	if e != nil {
		e.SetFlowHash(h)
		e.MarkSYN() // a pure SYN (fastBurst)
	}
	start, length, res := w.encapTo(enc, p, ps, entropyHash(e, h), v.Encap, be, nil, dst)
	if res != encap.Forward {
		return true, res
	}
	countForward(c, v, be, int(ps.L3Off)+int(ps.IPLen))
	p.Off, p.Len = start, length
	return true, encap.Forward
}

// flowFilter is fastBurst's filter of the flows that had a general packet
// earlier in the burst: 256 bits over filterBit, computed only once a flow
// is marked (a burst with no general packet, the common case, hashes
// nothing).
type flowFilter struct {
	bits [4]uint64
	any  bool
}

func (f *flowFilter) mark(t *flow.Tuple) { f.set(filterBit(t)) }

// has reports whether t's bit is set: t's flow, or (rarely) another that
// shares its bit, had a general packet.
func (f *flowFilter) has(t *flow.Tuple) bool { return f.any && f.get(filterBit(t)) }

// markHash and hasHash are mark and has by a flow's local hash (its
// conntrack hash, which the burst has computed already) instead of its
// tuple, for the filter of the flows fuseNew inserted (ins): every packet
// of a flow has the same local hash, so none is missed, and a false match
// costs one Peek. Under a SYN flood every packet is marked and looked up,
// and filterBit's mix of the tuple cost 5 ns of the flood's 145 a packet
// (BenchmarkSYNFlood). The bits are 32-39, which neither the bucket index
// (the low bits), the second bucket (bits 49-50) nor the signature (the
// top byte) uses.
func (f *flowFilter) markHash(h uint64) { f.set(uint8(h >> 32)) }

func (f *flowFilter) hasHash(h uint64) bool { return f.any && f.get(uint8(h>>32)) }

func (f *flowFilter) set(b uint8) {
	f.bits[b>>6] |= 1 << (b & 63)
	f.any = true
}

func (f *flowFilter) get(b uint8) bool { return f.bits[b>>6]&(1<<(b&63)) != 0 }

// filterBit is a flow's bit in flowFilter: a cheap mix of the tuple's
// words (the filter only needs to tell flows of one burst apart, mostly).
func filterBit(t *flow.Tuple) uint8 {
	x := binary.LittleEndian.Uint64(t.Src[0:]) ^ binary.LittleEndian.Uint64(t.Src[8:])*0x9e3779b97f4a7c15 ^
		binary.LittleEndian.Uint64(t.Dst[8:]) ^ (uint64(t.SrcPort)<<16|uint64(t.DstPort))*0xc2b2ae3d27d4eb4f
	x ^= binary.LittleEndian.Uint64(t.Dst[0:])
	x *= 0x165667b19e3779f9
	return uint8(x >> 56)
}
