package conntrack

import (
	"time"

	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

// Time is a point on the dataplane's monotonic clock in milliseconds
// (Resolution), wrapping every 2^32 ms (49.7 days). See the package doc.
type Time uint32

// State is a flow's tracking state; see the package doc for the machine.
type State uint8

// The states. Their order is not their eviction rank (see rank).
const (
	StateNew         State = iota // TCP: SYN or a first mid-stream packet seen
	StateEstablished              // TCP: a non-SYN ACK followed the first packet
	StateClosing                  // TCP: FIN or RST seen
	StateOther                    // UDP and other protocols

	numStates = 4
)

// NumStates is the number of States, for arrays indexed by State.
const NumStates = numStates

var stateNames = [numStates]string{"new", "established", "closing", "other"}

// String is the state's lower-case name.
func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "invalid"
}

// rank orders the states from least to most valuable for eviction (package
// doc): closing < new < half-closed and still acknowledging (rankHalfClosed)
// < other < established.
var rank = [numStates]uint8{
	StateClosing:     0,
	StateNew:         1,
	StateOther:       3,
	StateEstablished: 4,
}

// rankHalfClosed is the eviction rank of a closing entry whose client went
// on acknowledging after its FIN (entryActive) within HalfClosedIdle:
// above new, so a SYN flood cannot push it out, and below other and
// established.
const rankHalfClosed = 2

// HalfClosedIdle is how long a half-closed connection (entryActive) stays
// in use without a packet from its client. The LB cannot see the server's
// FIN, so the client's last ACK (of that FIN) looks like any other: a
// connection that ended stops counting once its client has been quiet
// this long, instead of holding a drain's flow count (and its rank) for
// the whole closing timeout. Two ACKs after a FIN also come from a
// connection that merely ended slowly (a retransmitted server FIN
// acknowledged twice), which this ends just as soon. A download that
// pauses longer counts again with its next ACK.
const HalfClosedIdle = 10 * time.Second

// halfClosedIdle is HalfClosedIdle in clock units.
const halfClosedIdle = int32(HalfClosedIdle / Resolution)

// Initial is the state of a flow's first packet: other for every protocol
// but TCP; for TCP closing on FIN or RST and new otherwise. A mid-stream TCP
// packet (a flow that ECMP moved here from another instance) starts as new
// like a SYN, and becomes established with its next ACK: one unsolicited ACK
// never buys an established, flood-proof slot.
func Initial(proto, tcpFlags uint8) State {
	if proto != packet.ProtoTCP {
		return StateOther
	}
	if tcpFlags&(packet.TCPFin|packet.TCPRst) != 0 {
		return StateClosing
	}
	return StateNew
}

// Next is the state after a client-to-server packet with tcpFlags arrives in
// state s (the package doc has the policy). StateOther never changes.
//
//	FIN or RST       -> closing
//	SYN              -> new (from established or closing: port reuse)
//	ACK (no SYN)     -> established from new, unchanged otherwise
func (s State) Next(tcpFlags uint8) State {
	if s == StateOther {
		return s
	}
	switch {
	case tcpFlags&(packet.TCPFin|packet.TCPRst) != 0:
		return StateClosing
	case tcpFlags&packet.TCPSyn != 0:
		return StateNew
	case tcpFlags&packet.TCPAck != 0 && s == StateNew:
		return StateEstablished
	}
	return s
}

// Entry is one tracked flow: exactly one 64-byte cache line, key included.
// The table hands out pointers to its entries so the dataplane reads the pin
// and updates the entry in place; a pointer is valid until the entry is
// removed (by Remove, Delete, Drop, Sweep, expiry or eviction), so use it
// within the burst that looked it up.
type Entry struct {
	key      flow.Tuple // 38 bytes: offset 0, the first thing compared
	vip      uint16     // VIP id
	backend  uint32     // backend id (see Backend)
	gen      uint32     // incarnation of the backend id (see Gen)
	lastSeen Time       // last packet, dataplane clock
	state    State
	flags    uint8  // entryChance: chance holds a second-chance backend id; entryReset: closing on an RST alone
	chance   uint16 // the second-chance backend's id (SetChance); in what was padding
	flowHash uint64 // the fleet flow hash, kept for the dataplane (SetFlowHash); at offset 56, ending the line
}

// entryChance marks an entry whose chance field is set.
const entryChance = 1

// entryReset marks a closing entry that an RST without FIN closed, which
// the client's next segment can show to be forged (Touch).
const entryReset = 2

// entryOnce marks an entry inserted as other (a UDP flow's first packet,
// Initial) that no second packet has touched yet: it ranks as new for
// eviction (rankOf), so one spoofed datagram never buys a slot that a SYN
// may not take back, nor one that outranks the handshakes in progress.
const entryOnce = 4

// entrySYN marks an entry whose flow this instance saw open with a SYN
// (Entry.MarkSYN at its insert, or a SYN since: TouchSegment), so that
// the ACK that establishes it completes a handshake measured here. A flow
// picked up mid-stream (ECMP moved it here) becomes established too, but
// the gap between its first two packets is no handshake.
const entrySYN = 8

// entryAcked and entryActive count the client's segments after its FIN
// that close nothing and carry no data (closeRule): acknowledgements of the
// server's data. A client that closes with the server done sends one, the
// ACK of the server's FIN; a second shows the server still sending, a
// half-closed connection in use (shutdown(SHUT_WR) clients: nc -N, whois,
// some RPC clients), and the entry ranks rankHalfClosed from then on.
const (
	entryAcked  = 16
	entryActive = 32
)

// entryRevived marks an entry that closeRule made established again by
// data after the FIN: a forged FIN, or a retransmission of data sent
// before the real FIN that reached the LB after it. It counts as in use
// only while its client sends (InUse), so a late retransmission does not
// hold a drain's flow count for the established timeout. An entry
// established again after an RST alone is not marked: a client that
// resets sends nothing more, so the RST was forged, and the connection
// counts as any established one (marked, a quiet connection, an SSH
// session or a pooled database connection, left the count 10 s after a
// forged RST, and a drain read 0 while it lived). A close or a SYN ends
// the mark.
const entryRevived = 64

// entryTried marks an entry whose handshake the dataplane counted as
// tried (Backend.SYNs: MarkSYN, TryHandshake) and has not seen complete
// (HandshakeDone). Passive health compares tried with completed
// handshakes; while the mark is set, a SYN that opens the entry again is
// not another try. A blind spoofer's FIN, SYN repeated on one 5-tuple
// (whose SYNs all reach one backend) counted a failed handshake each time.
const entryTried = 128

// MarkSYN records that the flow's first packet here was a SYN (the
// dataplane calls it on the entry Insert returned), a handshake counted
// as tried.
func (e *Entry) MarkSYN() { e.flags |= entrySYN | entryTried }

// TryHandshake reports whether a SYN that opens the entry again (a new
// connection on a reused tuple) is a handshake to count as tried: not
// while one counted before has not completed. It marks the entry tried.
func (e *Entry) TryHandshake() bool {
	fresh := e.flags&entryTried == 0
	e.flags |= entryTried
	return fresh
}

// HandshakeDone records that the entry's handshake completed (new to
// established after a SYN), so that the next SYN opening it is a try.
func (e *Entry) HandshakeDone() { e.flags &^= entryTried }

// SYNSeen reports whether this instance saw the flow open with a SYN: its
// first packet here (MarkSYN) or one since (TouchSegment). Only then is
// the step from new to established a handshake whose time means anything.
func (e *Entry) SYNSeen() bool { return e.flags&entrySYN != 0 }

// rankOf is the rank for eviction of e, idle for age: its state's, new's
// while it is a flow of one packet (entryOnce), rankHalfClosed for a
// closing entry still in use (entryActive, seen within HalfClosedIdle).
func rankOf(e *Entry, age int32) uint8 {
	switch {
	case e.flags&entryOnce != 0:
		return rank[StateNew]
	case e.flags&entryActive != 0 && e.state == StateClosing && age < halfClosedIdle:
		return rankHalfClosed
	}
	return rank[e.state&3]
}

// newcomerRank is the rank of an entry Insert is about to create in state
// st: a flow of one packet, so other ranks as new (entryOnce).
func newcomerRank(st State) uint8 {
	if st == StateOther {
		return rank[StateNew]
	}
	return rank[st]
}

// InUse reports whether e's connection may still carry traffic at now as
// far as the client's packets show: any state but closing, or a closing
// entry whose client has acknowledged twice since its FIN (entryActive:
// the server still sends to a client that shut down its side) and last
// sent within HalfClosedIdle; an entry established again after a close
// (entryRevived) only while its client sent within HalfClosedIdle. What a
// drain waits for (the dataplane's flow counts).
func (e *Entry) InUse(now Time) bool {
	switch {
	case e.state == StateClosing:
		return e.flags&entryActive != 0 && idle(e, now) < halfClosedIdle
	case e.flags&entryRevived != 0:
		return idle(e, now) < halfClosedIdle // established again after a close (entryRevived)
	}
	return true
}

// Key is the flow's 5-tuple.
func (e *Entry) Key() flow.Tuple { return e.key }

// Is reports whether e is the entry of the flow key.
func (e *Entry) Is(key *flow.Tuple) bool { return sameKey(&e.key, key) }

// VIP is the id of the VIP the flow is addressed to.
func (e *Entry) VIP() uint16 { return e.vip }

// Backend is the pinned backend's id. It is 32 bits because backend ids
// index one process-wide backend array shared by all VIPs (the same real
// serving many VIPs is one backend), and a fleet's VIP × backend pairs can
// pass 65535; the entry has room to spare, so nothing is saved by 16 bits.
func (e *Entry) Backend() uint32 { return e.backend }

// Gen is the incarnation of the Backend id the flow was pinned to: the
// control plane may hand a freed backend id to a new backend, with the next
// generation, and the dataplane compares Gen with the current holder's
// (dataplane.Backend.Gen) so that a flow of the removed backend is not sent
// to its successor. It says nothing about the Maglev table, whose changes
// leave pins alone.
func (e *Entry) Gen() uint32 { return e.gen }

// LastSeen is the time of the flow's last packet.
func (e *Entry) LastSeen() Time { return e.lastSeen }

// State is the flow's tracking state.
func (e *Entry) State() State { return e.state }

// Live reports whether the flow's connection may still be open as far as
// the LB can tell: established, or closed by an RST alone, which a blind
// spoofer can send (the LB sees no sequence numbers) and which the
// client's next segment undoes (Touch). A SYN on a live flow keeps its
// backend (package dataplane).
func (e *Entry) Live() bool {
	return e.state == StateEstablished || e.state == StateClosing && e.flags&entryReset != 0
}

// FlowHash is the value the dataplane stored with SetFlowHash (0 if none):
// the fleet flow hash (flow.Hasher) of the entry's tuple, which the
// encapsulation's entropy fields need. The table buckets by a cheaper
// local hash, so a hit that reads the stored value computes no SipHash.
func (e *Entry) FlowHash() uint64 { return e.flowHash }

// SetFlowHash stores h with the entry (see FlowHash). Insert clears it.
func (e *Entry) SetFlowHash(h uint64) { e.flowHash = h }

// Chance is the second-chance backend id the dataplane stored with
// SetChance, and whether there is one (docs/second-chance.md). Like
// Backend it names an id, not an incarnation: the dataplane checks that
// the id still belongs to a live backend of the flow's VIP.
func (e *Entry) Chance() (backend uint32, ok bool) {
	return uint32(e.chance), e.flags&entryChance != 0
}

// SetChance stores a second-chance backend id with the entry; ids above
// 65535 (MaxBackends - 1) cannot be stored and clear it. Insert clears it.
func (e *Entry) SetChance(backend uint32) {
	if backend >= MaxBackends {
		e.ClearChance()
		return
	}
	e.chance, e.flags = uint16(backend), e.flags|entryChance
}

// ClearChance removes the second chance (a SYN starts the flow afresh).
func (e *Entry) ClearChance() { e.chance, e.flags = 0, e.flags&^entryChance }

// repin points the flow at another backend id of incarnation gen. Only the
// table calls it: Table.Repin keeps the per-backend flow counts right.
func (e *Entry) repin(backend, gen uint32) {
	e.backend, e.gen = backend, gen
}

// closeRule is Touch's rule for closing entries, out of the common path.
// An RST without FIN closes the entry and marks it (entryReset). A later
// segment without FIN, RST or SYN shows that the close was not the
// client's, and the entry is established again, with its timeout and its
// eviction rank, instead of left to the closing timeout and a SYN flood:
// after an RST alone any such segment (a client that resets sends nothing
// more on the connection); after a FIN one that carries data (data: a
// client sends no new data after its FIN, only ACKs). A FIN, or a SYN
// (reopened), ends the mark. After a FIN, segments without data are
// counted (entryAcked, entryActive): the second shows the half-closed
// connection still in use.
//
// A retransmission of data sent before the client's real FIN that reaches
// the LB after it also makes the entry established again, and the entry
// then ends with the established timeout unless a FIN comes again: a slot
// held longer, never a connection broken.
func (e *Entry) closeRule(next State, tcpFlags uint8, data bool) State {
	const end = packet.TCPFin | packet.TCPRst | packet.TCPSyn
	if e.state != StateClosing {
		e.flags &^= entryAcked | entryActive | entryRevived // a close starts the count afresh
	}
	switch {
	case e.state == StateClosing && tcpFlags&end == 0 && (data || e.flags&entryReset != 0):
		next = StateEstablished
		if e.flags&entryReset == 0 {
			e.flags |= entryRevived // after a FIN (entryRevived)
		}
	case next == StateClosing && tcpFlags&(packet.TCPFin|packet.TCPRst) == packet.TCPRst && (e.state != StateClosing || e.flags&entryReset != 0):
		e.flags |= entryReset
		return next
	case e.state == StateClosing && next == StateClosing && tcpFlags&end == 0:
		// An acknowledgement after the FIN (entryAcked, entryActive).
		if e.flags&entryAcked != 0 {
			e.flags |= entryActive
		}
		e.flags |= entryAcked
	}
	e.flags &^= entryReset
	return next
}
