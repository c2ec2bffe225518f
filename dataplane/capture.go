package dataplane

// Capture: copies of the frames a worker receives, sends and drops, for
// fulcrumctl capture. While no capture runs the I/O loop pays one atomic
// load and one predictable branch per burst (Worker.capture is nil). While
// one runs, the worker copies the burst's frames into a per-burst scratch
// before Process (encapsulation rewrites them in place), then pushes the
// ones the filter selects into a bounded single-producer ring that the
// control plane drains; a frame that finds the ring full is counted as
// missed, never waited for. Nothing on the lcore allocates.
//
// Drop reasons: Process notes each dropped packet's reason (Worker.why, the
// counter it incremented), and a captured drop carries that reason's name.
// Frames dropped before Process (multi-segment) are not captured.

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/packet"
)

// Capture limits.
const (
	// CaptureSnapLen is the bytes kept of a frame: a standard 1500-byte
	// MTU frame with VLAN tags and the encapsulation's headers fits.
	CaptureSnapLen = 1600
	// CaptureRingFrames is the frames a worker's ring holds between two
	// drains (the reader drains every few milliseconds): 1024 frames,
	// 1.6 MB a worker.
	CaptureRingFrames = 1024
)

// dropWhy is a dropped packet's reason: which of the three drop counter
// families it incremented (the parser's, the encapsulation's, the
// dataplane's own) and the index in it. 0 is no reason.
type dropWhy uint16

const (
	whyParseBase dropWhy = 1 << 8
	whyEncapBase dropWhy = 2 << 8
)

func whyParse(r packet.Reason) dropWhy { return whyParseBase | dropWhy(r) }
func whyEncap(r encap.Result) dropWhy  { return whyEncapBase | dropWhy(r) }

// String is the reason's name, as in fulcrum_drops_total{reason}.
func (d dropWhy) String() string {
	k := int(d & 0xff)
	switch d &^ 0xff {
	case 0:
		return DropReason(k).String()
	case whyParseBase:
		return packet.Reason(k).String()
	case whyEncapBase:
		if k < len(encapDropNames) {
			return encapDropNames[k]
		}
	}
	return "unknown"
}

// CaptureKind says where a captured frame was seen.
type CaptureKind uint8

const (
	CaptureRx   CaptureKind = iota // as received
	CaptureTx                      // as sent (encapsulated, or an ICMP reply)
	CapturePunt                    // handed to the kernel
	CaptureDrop                    // dropped (as received); Reason says why
)

func (k CaptureKind) String() string {
	switch k {
	case CaptureRx:
		return "rx"
	case CaptureTx:
		return "tx"
	case CapturePunt:
		return "punt"
	}
	return "drop"
}

// CaptureFilter selects the frames a capture keeps. The zero value keeps
// nothing; a capture of everything sets Rx, Tx and Drops.
type CaptureFilter struct {
	Rx, Tx, Drops bool
	// DropReason, if set, keeps only drops of that reason.
	DropReason string
	// VIP, if valid, keeps only frames received for that address (and
	// VIPPort if not 0, VIPProto if not 0), and what they became.
	VIP      netip.Addr
	VIPPort  uint16
	VIPProto uint8
	// Backend, if valid, keeps only frames sent to that address and the
	// frames received that became them.
	Backend netip.Addr
}

// CapturedFrame is one frame taken from a capture ring.
type CapturedFrame struct {
	Kind    CaptureKind
	Reason  string // drops only
	Time    time.Time
	Worker  int
	OrigLen int // on the wire; len(Data) is at most CaptureSnapLen
	Data    []byte
}

type captureSlot struct {
	kind    CaptureKind
	reason  string // one of the static reason names: no allocation
	ns      int64
	origLen int
	n       int
	data    [CaptureSnapLen]byte
}

// captureRing is one worker's: the worker writes slots and publishes head,
// the reader consumes up to head and publishes tail.
type captureRing struct {
	f          CaptureFilter
	slots      []captureSlot
	head, tail atomic.Uint64
	missed     atomic.Uint64

	// Per-burst scratch (worker only).
	orig    [MaxBurst]captureSlot
	burstNs int64
}

// Capture is one running capture over a set of workers.
type Capture struct {
	workers []*Worker
	rings   []*captureRing
}

// StartCapture installs a capture with filter f on workers. Only one
// capture runs at a time: ErrBusy if one does.
func StartCapture(workers []*Worker, f CaptureFilter) (*Capture, error) {
	c := &Capture{workers: workers}
	for i, w := range workers {
		r := &captureRing{f: f, slots: make([]captureSlot, CaptureRingFrames)}
		if !w.capture.CompareAndSwap(nil, r) {
			for _, w := range workers[:i] {
				w.capture.Store(nil)
			}
			return nil, ErrBusy
		}
		c.rings = append(c.rings, r)
	}
	return c, nil
}

// Capturing reports whether a capture is installed on w (its hook's
// pointer is set): for tests and status that must see a stopped capture
// really detached from the lcore.
func (w *Worker) Capturing() bool { return w.capture.Load() != nil }

// Stop uninstalls the capture. A worker may still be writing its current
// burst; Drain after Stop sees it (the ring is not freed while referenced).
func (c *Capture) Stop() {
	for i, w := range c.workers {
		w.capture.CompareAndSwap(c.rings[i], nil)
	}
}

// Drain appends the frames captured since the last Drain to dst, worker
// by worker, and returns it. Frames are copied: the ring slots are reused.
func (c *Capture) Drain(dst []CapturedFrame) []CapturedFrame {
	for i, r := range c.rings {
		head, tail := r.head.Load(), r.tail.Load()
		for ; tail < head; tail++ {
			s := &r.slots[tail%uint64(len(r.slots))]
			dst = append(dst, CapturedFrame{Kind: s.kind, Reason: s.reason, Time: time.Unix(0, s.ns), Worker: c.workers[i].ID,
				OrigLen: s.origLen, Data: append([]byte(nil), s.data[:s.n]...)})
		}
		r.tail.Store(tail)
	}
	return dst
}

// Missed is the frames the filter selected but the rings had no room for.
func (c *Capture) Missed() uint64 {
	var n uint64
	for _, r := range c.rings {
		n += r.missed.Load()
	}
	return n
}

// captureBefore is the I/O loop's hook before Process: it copies the
// burst's frames. r is w.capture.Load(), non-nil.
func (r *captureRing) captureBefore(pkts []Pkt) {
	pkts = pkts[:min(len(pkts), MaxBurst)] // as Process: the scratch holds a burst
	r.burstNs = time.Now().UnixNano()
	for j := range pkts {
		fr := frameOf(&pkts[j])
		s := &r.orig[j]
		s.origLen = len(fr)
		s.n = copy(s.data[:], fr)
	}
}

// frameOf is p's frame, or nil if its offsets are inconsistent (Process
// drops such a packet as bad-buffer; the hooks must not slice it either).
func frameOf(p *Pkt) []byte {
	if p.Off < 0 || p.Len < 0 || p.Off > len(p.Buf) || p.Len > len(p.Buf)-p.Off {
		return nil
	}
	return p.Buf[p.Off : p.Off+p.Len]
}

// captureAfter is the I/O loop's hook after Process: it pushes what the
// filter selects of each packet (as received, as sent or dropped).
func (r *captureRing) captureAfter(pkts []Pkt, verdicts []Verdict, why []dropWhy) {
	f := &r.f
	pkts = pkts[:min(len(pkts), MaxBurst, len(verdicts), len(why))]
	for j := range pkts {
		o := &r.orig[j]
		if f.VIP.IsValid() && !matchesVIP(o.data[:o.n], f) {
			continue
		}
		out := frameOf(&pkts[j])
		v := verdicts[j]
		if f.Backend.IsValid() && (v != Tx || outerDst(out) != f.Backend) {
			continue
		}
		if f.Rx {
			r.push(CaptureRx, "", o.data[:o.n], o.origLen)
		}
		switch v {
		case Tx:
			if f.Tx {
				r.push(CaptureTx, "", out, len(out))
			}
		case Punt:
			if f.Tx {
				r.push(CapturePunt, "", o.data[:o.n], o.origLen)
			}
		default:
			if !f.Drops {
				continue
			}
			dropReason := why[j].String()
			if f.DropReason == "" || f.DropReason == dropReason {
				r.push(CaptureDrop, dropReason, o.data[:o.n], o.origLen)
			}
		}
	}
}

func (r *captureRing) push(kind CaptureKind, reason string, data []byte, origLen int) {
	head := r.head.Load()
	if head-r.tail.Load() >= uint64(len(r.slots)) {
		r.missed.Add(1)
		return
	}
	s := &r.slots[head%uint64(len(r.slots))]
	s.kind, s.reason, s.ns, s.origLen = kind, reason, r.burstNs, origLen
	s.n = copy(s.data[:], data)
	r.head.Store(head + 1)
}

// l3 finds the IP header of an Ethernet frame (up to two VLAN tags): its
// offset and version, or 0.
func l3(f []byte) (off int, version int) {
	off = 12
	for range 3 {
		if len(f) < off+2 {
			return 0, 0
		}
		switch uint16(f[off])<<8 | uint16(f[off+1]) {
		case 0x8100, 0x88a8:
			off += 4
			continue
		case 0x0800:
			return off + 2, 4
		case 0x86dd:
			return off + 2, 6
		}
		return 0, 0
	}
	return 0, 0
}

// matchesVIP reports whether a received frame is addressed to f's VIP. It
// finds the transport header as the parser does: after IPv4 options and
// IPv6 extension headers. A frame whose ports cannot be known (a non-first
// fragment) matches on the address and protocol, and one whose extension
// headers cannot be walked (the parser drops it) on the address alone: the
// capture shows what the VIP's traffic became rather than hide it.
func matchesVIP(fr []byte, f *CaptureFilter) bool {
	off, ver := l3(fr)
	var dst netip.Addr
	var proto uint8
	l4 := 0
	noPorts := false
	switch {
	case ver == 4 && len(fr) >= off+20:
		dst = netip.AddrFrom4([4]byte(fr[off+16 : off+20]))
		proto, l4 = fr[off+9], off+int(fr[off]&0xf)*4
		noPorts = (uint16(fr[off+6])<<8|uint16(fr[off+7]))&0x1fff != 0 // fragment offset
	case ver == 6 && len(fr) >= off+40:
		dst = netip.AddrFrom16([16]byte(fr[off+24 : off+40]))
		proto, l4 = fr[off+6], off+40
		if header.IPv6ExtAll.Has(proto) {
			end := min(len(fr), off+40+int(uint16(fr[off+4])<<8|uint16(fr[off+5]))) // the packet, not the frame's padding
			w := header.WalkIPv6Ext(fr[off:end], 40, proto, header.IPv6ExtAll, packet.MaxExtHeaders)
			if w.Status != header.IPv6ExtOK {
				return dst == f.VIP.Unmap()
			}
			proto, l4 = w.Proto, off+w.Off
			noPorts = w.Fragment && w.FragOffset != 0
		}
	default:
		return false
	}
	if dst == f.VIP.Unmap() && f.VIPProto != 0 && proto != f.VIPProto && (ver == 4 && proto == packet.ProtoICMP || ver == 6 && proto == packet.ProtoICMPv6) {
		return icmpErrorOfVIP(fr, f) // sent to the flow's backend: the VIP's traffic
	}
	if dst != f.VIP.Unmap() || f.VIPProto != 0 && proto != f.VIPProto {
		return false
	}
	if f.VIPPort == 0 || noPorts {
		return true
	}
	return (proto == 6 || proto == 17) && len(fr) >= l4+4 && uint16(fr[l4+2])<<8|uint16(fr[l4+3]) == f.VIPPort
}

// icmpErrorOfVIP reports whether fr is an ICMP error about a packet a
// backend sent from f's VIP (its source address, protocol and port), one
// the dataplane relays to that flow's backend. A quote of a later
// fragment (no ports) matches on the address and protocol.
func icmpErrorOfVIP(fr []byte, f *CaptureFilter) bool {
	var p packet.Parsed
	var q flow.Tuple
	if packet.Parse(fr, &p) != packet.OK || packet.ParseICMPError(fr, &p, &q) != packet.OK {
		return false
	}
	if q.SrcAddr() != f.VIP.Unmap() || f.VIPProto != 0 && q.Proto != f.VIPProto {
		return false
	}
	return f.VIPPort == 0 || q.SrcPort == f.VIPPort || q.SrcPort == 0 && q.DstPort == 0
}

// outerDst is the IP destination of a frame (for a sent frame, the
// tunnel's: the backend).
func outerDst(fr []byte) netip.Addr {
	off, ver := l3(fr)
	switch {
	case ver == 4 && len(fr) >= off+20:
		return netip.AddrFrom4([4]byte(fr[off+16 : off+20]))
	case ver == 6 && len(fr) >= off+40:
		return netip.AddrFrom16([16]byte(fr[off+24 : off+40]))
	}
	return netip.Addr{}
}

// ProcessCaptured is Process with the capture hooks around it, as the
// DPDK engine's loop runs them; for I/O loops outside this package (the
// test lcore of package dptest).
func (w *Worker) ProcessCaptured(pkts []Pkt, now conntrack.Time) {
	if len(pkts) > MaxBurst {
		pkts = pkts[:MaxBurst] // what Process handles; the hooks' arrays hold a burst
	}
	cp := w.capture.Load()
	if cp != nil {
		cp.captureBefore(pkts)
	}
	w.Process(pkts, now)
	if cp != nil {
		cp.captureAfter(pkts, w.Verdicts[:len(pkts)], w.why[:len(pkts)])
	}
}
