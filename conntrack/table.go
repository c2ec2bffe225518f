package conntrack

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/internal/prefetch"
	"github.com/fulcrumlb/fulcrum/packet"
)

// bucketSlots is the number of entries per bucket: 8 one-byte signatures
// fill one 64-bit word, so one SWAR pass compares them all.
const bucketSlots = 8

// BucketSlots is the number of entries per bucket: at most the lines an
// insert touches (Table.InsertLines).
const BucketSlots = bucketSlots

// pageSize is the stride New uses to fault the table's pages in.
const pageSize = 4096

// SWAR constants for 8 lanes of 8 bits in a uint64.
const (
	laneOnes = 0x0101010101010101
	laneLow  = 0x7f7f7f7f7f7f7f7f
	laneHigh = 0x8080808080808080
)

// The key compare below reads flow.Tuple as 38 padding-free bytes: fail to
// compile if flow changes its layout.
var _ = [1]struct{}{}[unsafe.Sizeof(flow.Tuple{})-38]

// Counters are the table's event counts. They are plain fields owned by the
// lcore; Counters() copies them for publication between bursts.
type Counters struct {
	Hits         uint64            // lookups that found a live entry
	Misses       uint64            // lookups that did not (expired entries count here too)
	Inserts      uint64            // entries created
	InsertFailed uint64            // inserts refused: the bucket held only entries the new one may not evict
	Evicted      [NumStates]uint64 // live entries evicted to make room, by their State
	Expired      uint64            // entries removed because idle past their timeout
	Deleted      uint64            // entries removed by Remove or Delete
	Dropped      uint64            // entries removed by Drop
	Reopened     uint64            // SYNs on established or closing entries (port reuse)
}

// Table is one lcore's flow table. Create it with New; it is not safe for
// concurrent use (see the package doc).
type Table struct {
	// sigs holds one word per bucket: the 8-bit signatures of its 8 slots,
	// slot i in byte i (bits 8i..8i+7). 0 = free slot.
	sigs    []uint64
	entries []Entry
	mask    uint64           // buckets - 1
	timeout [numStates]int32 // idle timeout per State, in Time units
	live    int              // occupied slots
	per     []perBackend     // live entries per backend id (Config.Backends), of its newest incarnation
	sweep   int              // Sweep's next bucket
	// SweepPaced's schedule: a full pass every pass (Time units, half the
	// shortest timeout); owed is the buckets due, times pass; pacedAt is
	// the clock of the last call.
	pass, owed uint64
	pacedAt    Time
	paced      bool
	c          Counters
	cs         candidates // lookupBurst's and ProbeBurst's per-burst scratch
	evicts     uint64     // live entries evicted, of every state (Evictions)

	external bool // entries and sigs came from Config.Memory
}

// New allocates a table for cfg. All memory is allocated and faulted in
// here; nothing the table does afterwards allocates.
func New(cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	nb := buckets(cfg.Capacity)
	t := &Table{
		mask:    uint64(nb - 1),
		timeout: cfg.timeouts(),
	}
	t.pass = uint64(max(slices.Min(t.timeout[:])/2, 1))
	if cfg.Backends > 0 {
		t.per = make([]perBackend, cfg.Backends)
	}
	if cfg.Memory != nil {
		// Memory the caller owns (DPDK hugepages): already zeroed and
		// resident, on huge pages by construction.
		pe, err := cfg.Memory(uintptr(nb*bucketSlots) * unsafe.Sizeof(Entry{}))
		if err != nil {
			return nil, fmt.Errorf("conntrack: %d entries: %w", nb*bucketSlots, err)
		}
		ps, err := cfg.Memory(uintptr(nb) * 8)
		if err != nil {
			return nil, fmt.Errorf("conntrack: %d signature words: %w", nb, err)
		}
		t.entries = unsafe.Slice((*Entry)(pe), nb*bucketSlots)
		t.sigs = unsafe.Slice((*uint64)(ps), nb)
		t.external = true
		return t, nil
	}
	t.sigs = make([]uint64, nb)
	t.entries = make([]Entry, nb*bucketSlots)
	// Random access over hundreds of MiB misses the TLB on 4 KiB pages:
	// ask for transparent huge pages before the first touch (measured at
	// 4M entries: a hit from 108 to 72 ns, a miss from 19 to 12 ns).
	adviseHugePages(unsafe.Pointer(&t.entries[0]), uintptr(len(t.entries))*unsafe.Sizeof(Entry{}))
	adviseHugePages(unsafe.Pointer(&t.sigs[0]), uintptr(len(t.sigs))*8)
	// Fresh large allocations are untouched zero pages: write to each page
	// now so the first inserts do not take page faults.
	for i := 0; i < len(t.entries); i += pageSize / int(unsafe.Sizeof(Entry{})) {
		t.entries[i].state = 0
	}
	for i := 0; i < len(t.sigs); i += pageSize / 8 {
		t.sigs[i] = 0
	}
	return t, nil
}

// buckets is the number of buckets a table of capacity entries has: a
// power of two.
func buckets(capacity int) int {
	return 1 << bits.Len(uint((capacity+bucketSlots-1)/bucketSlots-1))
}

// TableBytes is the memory a table of capacity entries takes (what Bytes
// will say of it): for sizing the memory it is given.
func TableBytes(capacity int) int {
	nb := buckets(capacity)
	return nb*bucketSlots*int(unsafe.Sizeof(Entry{})) + nb*8
}

// Slots is the number of entries the table holds when full (Capacity
// rounded up to whole power-of-two buckets).
func (t *Table) Slots() int { return len(t.entries) }

// Buckets is the number of buckets, the unit of Sweep, Drop and Scan budgets.
func (t *Table) Buckets() int { return int(t.mask) + 1 }

// Bytes is the table's memory: entries and signatures.
func (t *Table) Bytes() int {
	return len(t.entries)*int(unsafe.Sizeof(Entry{})) + len(t.sigs)*8
}

// ExternalMemory reports whether the table lives in memory from
// Config.Memory (the EAL's hugepages) rather than on the Go heap.
func (t *Table) ExternalMemory() bool { return t.external }

// Len is the number of occupied slots, including expired entries that no
// lookup, insert or sweep has reclaimed yet.
func (t *Table) Len() int { return t.live }

// Counters returns a copy of the event counts.
func (t *Table) Counters() Counters { return t.c }

// EvictedLive is Counters().Evicted[s] without the copy: live entries of
// state s evicted to make room.
func (t *Table) EvictedLive(s State) uint64 { return t.c.Evicted[s&3] }

// Timeout is the idle timeout of state s, in Time units.
func (t *Table) Timeout(s State) Time { return Time(t.timeout[s&3]) }

// Expired reports whether e has been idle longer than its state's timeout
// at now. Expired entries are never returned by Lookup.
func (t *Table) Expired(e *Entry, now Time) bool {
	return idle(e, now) > t.timeout[e.state&3]
}

// idle is how long e has been idle at now. It is computed in wrapping
// arithmetic, so it is exact across the clock's wrap; a now behind the
// entry's last-seen time (a stale clock read) gives a negative idle time,
// which never expires anything.
func idle(e *Entry, now Time) int32 { return int32(now - e.lastSeen) }

// signature is the top 8 bits of the flow hash, never 0 (0 marks a free
// slot). The bucket index uses the low bits, which never reach bit 56.
func signature(hash uint64) uint64 {
	s := hash >> 56
	if s == 0 {
		s = 1
	}
	return s
}

// match returns the lanes of w equal to sig, as the top bit of each 8-bit
// lane (bit 8i+7 for slot i). The test is exact: adding 0x7f to a lane's low
// 7 bits carries into its top bit iff they are non-zero, and never into the
// next lane.
func match(w, sig uint64) uint64 {
	x := w ^ sig*laneOnes
	return ^((x&laneLow + laneLow) | x) & laneHigh
}

// lane is the slot (0-7) of the lowest lane set in a match mask.
func lane(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// occupied is the match mask of the used slots of bucket b.
func (t *Table) occupied(b uint64) uint64 { return match(t.sigs[b], 0) ^ laneHigh }

func (t *Table) setSig(slot int, sig uint64) {
	shift := uint(slot&7) * 8
	w := &t.sigs[slot>>3]
	*w = *w&^(0xff<<shift) | sig<<shift
}

// used reports whether slot holds an entry.
func (t *Table) used(slot int) bool { return t.sigs[slot>>3]>>(uint(slot&7)*8)&0xff != 0 }

// free empties slot.
func (t *Table) free(slot int) {
	t.setSig(slot, 0)
	t.live--
	t.uncount(&t.entries[slot])
}

// perBackend counts the entries of one backend id's newest incarnation
// the table has seen. A backend id outlives its backend: a reload that
// removes one frees its id for the next new backend, while the removed
// one's entries stay until they expire or their flows repin. Counting by
// id alone gave the newcomer the old flows (the load-based schedulers then
// kept new flows off it); the generation tells the two apart.
type perBackend struct {
	n       int32
	closing int32 // of n, those in StateClosing: not in use for the schedulers (BackendActive)
	gen     uint32
}

// count adds an entry of backend id incarnation gen in state st. A newer incarnation
// starts the id's count again (the older one's entries are no longer
// counted anywhere); an older one is not counted. An id starts at
// generation 0, so a first generation of 2^31 or more reads as older and
// is not counted: the dataplane numbers generations from 1, one a reuse
// of the id.
func (t *Table) count(backend, gen uint32, st State) {
	if int(backend) >= len(t.per) {
		return
	}
	p := &t.per[backend]
	if gen != p.gen {
		if int32(gen-p.gen) < 0 { // older (generations only grow, and wrap after 2^31 of them)
			return
		}
		p.n, p.closing, p.gen = 0, 0, gen
	}
	p.n++
	if st == StateClosing {
		p.closing++
	}
}

// counted is the count of backend id incarnation gen, or nil when the
// table counts another incarnation of the id (or none: an id beyond
// Config.Backends).
func (t *Table) counted(backend, gen uint32) *perBackend {
	if int(backend) < len(t.per) && t.per[backend].gen == gen {
		return &t.per[backend]
	}
	return nil
}

// uncount removes the entry e from its backend's counts.
func (t *Table) uncount(e *Entry) {
	if p := t.counted(e.backend, e.gen); p != nil {
		p.n--
		if e.state == StateClosing {
			p.closing--
		}
	}
}

// closed moves e, counted, into StateClosing (in) or out of it, in its
// backend's count of closing entries.
func (t *Table) closed(e *Entry, in bool) {
	if p := t.counted(e.backend, e.gen); p != nil {
		if in {
			p.closing++
		} else {
			p.closing--
		}
	}
}

// BackendFlows is the number of entries pinned to incarnation gen of a
// backend id (expired ones not yet reclaimed included), or 0 without
// Config.Backends. Entries of the id's earlier incarnations are not
// counted once it has an entry of gen, nor of gen before it has one.
func (t *Table) BackendFlows(backend, gen uint32) int32 {
	if p := t.counted(backend, gen); p != nil {
		return p.n
	}
	return 0
}

// BackendActive is BackendFlows without the entries in StateClosing (a
// FIN or RST seen): the connections in progress, which the load-based
// schedulers compare. Counting closed ones made least-conn balance the
// connections opened over the closing timeout (120 s), not those open.
func (t *Table) BackendActive(backend, gen uint32) int32 {
	if p := t.counted(backend, gen); p != nil {
		return p.n - p.closing
	}
	return 0
}

// Repin points e's flow at another backend id of incarnation gen (its old
// one left, or a new connection reused the tuple), keeping the per-backend
// counts right.
func (t *Table) Repin(e *Entry, backend, gen uint32) {
	t.uncount(e)
	e.repin(backend, gen)
	t.count(backend, gen, e.state)
}

// sameKey is a == b, as five 8-byte loads a side and no branch (the
// compiler turns a 38-byte struct compare into a runtime.memequal call).
// The last load overlaps the fourth, covering bytes 30-37.
func sameKey(a, b *flow.Tuple) bool {
	x := (*[38]byte)(unsafe.Pointer(a))
	y := (*[38]byte)(unsafe.Pointer(b))
	d := le64(x[0:]) ^ le64(y[0:])
	d |= le64(x[8:]) ^ le64(y[8:])
	d |= le64(x[16:]) ^ le64(y[16:])
	d |= le64(x[24:]) ^ le64(y[24:])
	d |= le64(x[30:]) ^ le64(y[30:])
	return d == 0
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// alt is the second bucket of a flow of this hash, where it lives when
// its own bucket (hash&mask) had no free slot on insert: one of 4 other
// buckets whose signature words share the own bucket's 64-byte line (the
// own index xor 1, 3, 5 or 7, as bits 49-50 of the hash say), so that a
// lookup still reads one signature line. In a table of one bucket it is
// that bucket: a second look there finds nothing the first did not.
func (t *Table) alt(hash uint64) uint64 {
	return (hash ^ (hash>>48&6 | 1)) & t.mask
}

// both merges the match masks of a flow's own bucket (m) and its second
// (m2) into one mask of up to 16 candidates: the own bucket's slot i at bit
// 8i+7 (odd), the second's at bit 8i+6 (even). Walking one mask keeps the
// branches of a lookup the same wherever the flow lives.
func both(m, m2 uint64) uint64 { return m | m2>>1 }

// candidate is the slot of the lowest candidate of a mask from both, given
// the first slots of the own bucket and the second.
func candidate(own, second int32, m uint64) int {
	p := bits.TrailingZeros64(m)
	first := second
	if p&1 != 0 {
		first = own
	}
	return int(first) + p>>3
}

// twoBuckets reads the two buckets of a flow of this hash: the first
// slots of its own bucket and its second (alt), their signature words, and
// the flow's signature. Every search, insert and prefetch of a flow starts
// here. Results, not a struct: an inlined struct literal is built on the
// stack and read back in 16-byte loads that wait for its stores (measured:
// twice the time of LookupBurst).
func (t *Table) twoBuckets(hash uint64) (own, second int32, wOwn, wSecond, sig uint64) {
	b, a := hash&t.mask, t.alt(hash)
	return int32(b) * bucketSlots, int32(a) * bucketSlots, t.sigs[b], t.sigs[a], signature(hash)
}

// matches is the mask (from both) of the slots of a flow's two buckets
// (signature words wOwn and wSecond) whose signature is sig.
func matches(wOwn, wSecond, sig uint64) uint64 { return both(match(wOwn, sig), match(wSecond, sig)) }

// freeIn is a free slot of a flow's two buckets (first slots own and
// second, signature words wOwn and wSecond), in the one with more free
// slots (the own one on a tie: two choices keep the buckets' loads even),
// or -1 when both are full.
func freeIn(own, second int32, wOwn, wSecond uint64) int {
	mb, ma := match(wOwn, 0), match(wSecond, 0)
	if mb|ma == 0 { // both full: the common case under a SYN flood
		return -1
	}
	if bits.OnesCount64(ma) > bits.OnesCount64(mb) {
		own, mb = second, ma
	}
	return int(own) + lane(mb)
}

// at is slot s's entry, without a bounds check: s must come from the
// table's own masks (a bucket's first slot plus a lane below 8).
func (t *Table) at(s int) *Entry {
	return (*Entry)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.entries)), uintptr(s)*unsafe.Sizeof(Entry{})))
}

// line is the address of slot s's entry line, to prefetch (as for at).
func (t *Table) line(s int) uintptr { return uintptr(unsafe.Pointer(t.at(s))) }

// findIn returns the slot of key among the candidates m (a mask from both)
// of the buckets whose first slots are own and second, or -1.
func (t *Table) findIn(own, second int32, m uint64, key *flow.Tuple) int {
	for ; m != 0; m &= m - 1 {
		s := candidate(own, second, m)
		if sameKey(&t.at(s).key, key) {
			return s
		}
	}
	return -1
}

// find returns the slot of key (of this hash), in its own bucket or its
// second, or -1. It does not look at time.
func (t *Table) find(hash uint64, key *flow.Tuple) int {
	own, second, wOwn, wSecond, sig := t.twoBuckets(hash)
	return t.findIn(own, second, matches(wOwn, wSecond, sig), key)
}

// Lookup returns the live entry of the flow with this hash and key, or nil.
// An expired entry found on the way is removed and counted, and the lookup
// is a miss. The entry is not touched: call Touch for the packet.
func (t *Table) Lookup(hash uint64, key *flow.Tuple, now Time) *Entry {
	if s := t.find(hash, key); s >= 0 {
		e := &t.entries[s]
		if idle(e, now) <= t.timeout[e.state&3] {
			t.c.Hits++
			return e
		}
		t.free(s)
		t.c.Expired++
	}
	t.c.Misses++
	return nil
}

// Evictions counts the live entries evicted so far to make room for
// inserts. A caller holding entries from a lookup (a burst's, made before
// its inserts) needs to check them again (Entry.Is, Stale) only when it
// has changed since: an eviction is the one way an insert can give a live
// entry's slot to another flow.
func (t *Table) Evictions() uint64 { return t.evicts }

// Stale reports whether e, found for key by a LookupBurst earlier in the
// burst, now holds another flow: an insert since evicted it (Evictions
// changed). Its lookup then counts as a miss instead of a hit, as if it
// had been made now.
func (t *Table) Stale(e *Entry, key *flow.Tuple) bool {
	if e.Is(key) {
		return false
	}
	t.c.Hits--
	t.c.Misses++
	return true
}

// LookupAgain looks up again a flow whose LookupBurst (or Lookup) missed
// earlier in the same burst, because an insert since may have created it
// (a burst with a flow's first packets): a hit turns the counted miss into
// a hit, so that each packet counts once, as the lookup that decided it;
// a miss counts nothing more.
func (t *Table) LookupAgain(hash uint64, key *flow.Tuple, now Time) *Entry {
	e := t.Lookup(hash, key, now) // a hit or a miss more
	t.c.Misses--                  // less the miss counted before
	return e
}

// LookupBurst looks up a burst: out[i] is Lookup(hashes[i], keys[i], now).
// It handles min(len(hashes), len(keys), len(out)) packets and returns the
// number of hits.
//
// The burst is resolved in passes whose loads do not depend on each other,
// each started by a prefetch of what the next pass reads: first every
// bucket's signature word is prefetched, then the signatures are compared
// and each packet's first candidate entry line is prefetched, then the keys
// are compared. A packet's two cache misses (signature word, entry line)
// thus overlap with every other packet's instead of queueing behind them
// (measured at 4M entries: 61-66 ns a hit without prefetch; see
// docs/benchmarks.md, "Fast path (round 3)").
func (t *Table) LookupBurst(hashes []uint64, keys []*flow.Tuple, now Time, out []*Entry) (hits int) {
	n := min(len(hashes), len(keys), len(out))
	for off := 0; off < n; off += MaxBurst {
		end := min(off+MaxBurst, n)
		hits += t.lookupBurst(hashes[off:end], keys[off:end], now, out[off:end])
	}
	return hits
}

// BucketLine is the address of hash's signature word, whose 64-byte line
// also holds its second bucket's (alt). A caller that
// prefetches it (prefetch.Lines, gathered over a burst: the call costs
// more than the instruction) before a lookup or insert of that hash issued
// a little later, after other work on the burst, does not wait for
// memory.
func (t *Table) BucketLine(hash uint64) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(t.sigs))) + uintptr(hash&t.mask)*8
}

// candidates is a burst's signature matches, per packet: the first slot
// of its own bucket (first[0]) and of its second (first[1]), and the
// candidates there (m, from both). It lives in the Table, which is per
// lcore: nothing to zero per burst.
type candidates struct {
	first [2][MaxBurst]int32
	m     [MaxBurst]uint64
	lines [MaxBurst]uintptr
}

// find is the slot of key among packet i's candidates, or -1.
func (c *candidates) find(t *Table, i int, key *flow.Tuple) int {
	i &= MaxBurst - 1
	return t.findIn(c.first[0][i], c.first[1][i], c.m[i], key)
}

// candidates is lookupBurst's and ProbeBurst's pass 1: each packet's
// buckets and signature matches (t.cs), and the load of the first
// candidate entry line of each, started eight at a time (a prefetch is
// started soon after its signature line is read, at an eighth of the
// calls). Both buckets' words share a line, prefetched by pass 0.
func (t *Table) candidates(hashes []uint64) {
	c := &t.cs
	n, sent := 0, 0
	for i, h := range hashes {
		own, second, wOwn, wSecond, sig := t.twoBuckets(h)
		m := matches(wOwn, wSecond, sig)
		j := i & (MaxBurst - 1)
		c.first[0][j], c.first[1][j], c.m[j] = own, second, m
		if m == 0 {
			continue
		}
		c.lines[n&(MaxBurst-1)] = t.line(candidate(own, second, m))
		n++
		sent = prefetch.Eights(c.lines[:], sent, n)
	}
	if n > sent {
		prefetch.Lines(c.lines[sent:n])
	}
}

// lookupBurst handles at most MaxBurst packets; all slices have one length.
func (t *Table) lookupBurst(hashes []uint64, keys []*flow.Tuple, now Time, out []*Entry) (hits int) {
	keys = keys[:len(hashes)]
	out = out[:len(hashes)]

	// Pass 0: start every signature word's load, in one call.
	var lines [MaxBurst]uintptr
	for i, h := range hashes {
		lines[i&(MaxBurst-1)] = t.BucketLine(h)
	}
	prefetch.Lines(lines[:len(hashes)])
	// Passes 1 and 2: bucket indices and signature compares, with the
	// load of each packet's first candidate entry line, then the key
	// compares on those lines; expired entries reclaimed.
	hits = t.ProbeBurst(hashes, keys, now, out)
	t.c.Hits += uint64(hits)
	t.c.Misses += uint64(len(hashes) - hits)
	return hits
}

// Touch is TouchSegment for a segment without data.
func (t *Table) Touch(e *Entry, now Time, tcpFlags uint8) (reopened bool) {
	return t.TouchSegment(e, now, tcpFlags, false)
}

// TouchSegment records a packet of e's flow at now: it refreshes the
// last-seen time and advances the state with the packet's TCP flags
// (ignored for StateOther entries, and for a SYN with ACK, FIN or RST,
// which no client sends) and whether it carries data (which shows a
// closing entry's FIN to be forged, closeRule). It reports port reuse, a
// SYN on an established or closing entry (package doc): the entry keeps
// its backend and the caller may Repin.
func (t *Table) TouchSegment(e *Entry, now Time, tcpFlags uint8, data bool) (reopened bool) {
	e.lastSeen = now
	e.flags &^= entryOnce // a second packet (entryOnce)
	if tcpFlags&packet.TCPSyn != 0 && tcpFlags&(packet.TCPAck|packet.TCPFin|packet.TCPRst) != 0 {
		// SYN with ACK, FIN or RST: no client sends it on a connection
		// to a server (a SYN-ACK is the server's, and simultaneous open
		// does not reach a listener), so it changes nothing. Otherwise a
		// forged SYN-ACK would reopen a live entry (state new) for a
		// second forged SYN to move, and a SYN-FIN would close it.
		return false
	}
	if tcpFlags&(packet.TCPSyn|packet.TCPAck) == packet.TCPSyn {
		e.flags |= entrySYN // a (new) connection opening: MarkSYN
	}
	next := e.state.Next(tcpFlags)
	if next == StateClosing || e.flags&entryReset != 0 {
		next = e.closeRule(next, tcpFlags, data) // entry.go: a forged FIN or RST, and what shows it
		if next != StateNew && (next == StateClosing) != (e.state == StateClosing) {
			t.closed(e, next == StateClosing) // closed, or established again
		}
	}
	if next == StateNew && e.state != StateNew {
		reopened = true
		t.c.Reopened++
		e.flags &^= entryRevived // a new connection (entry.go)
		if e.state == StateClosing {
			t.closed(e, false)
		}
	}
	e.state = next
	return reopened
}

// Keep records a packet of e's flow at now and leaves its state alone:
// for a SYN the dataplane keeps on a live flow (Entry.Live) instead of
// taking it as a new connection. Touch would reopen the entry (state new),
// and a second SYN, forged like the first, would then look like the
// retransmission of a new connection's SYN.
func (t *Table) Keep(e *Entry, now Time) { e.lastSeen = now }

// Insert starts tracking a flow whose first packet arrived at now, in state
// st (Initial), pinned to backend id of incarnation gen (Entry.Gen).
// It returns the new entry, or nil when the bucket is full of entries the
// new one may not evict (package doc; counted in InsertFailed): the caller
// then forwards by Maglev alone. If the flow is already tracked (a lookup the
// caller skipped), the existing entry is returned unchanged and its pin
// wins: read the backend from the returned entry.
func (t *Table) Insert(hash uint64, key *flow.Tuple, st State, vip uint16, backend, gen uint32, now Time) *Entry {
	if st >= numStates {
		st = StateOther
	}
	// The two signature words are read once, for the search and for the
	// free slots: under a SYN flood every packet inserts.
	own, second, wOwn, wSecond, sig := t.twoBuckets(hash)
	s := t.findIn(own, second, matches(wOwn, wSecond, sig), key)
	if s >= 0 {
		e := &t.entries[s]
		if idle(e, now) <= t.timeout[e.state&3] {
			return e
		}
		t.c.Expired++ // reused in place below
		t.uncount(e)
	} else {
		if s = freeIn(own, second, wOwn, wSecond); s < 0 {
			s = t.evict(int(own), st, now)
		}
		if s < 0 {
			t.c.InsertFailed++
			return nil
		}
		t.setSig(s, sig)
		t.live++
	}
	t.c.Inserts++
	e := &t.entries[s]
	// Field by field, every field: a composite literal is built in a
	// stack temporary with stores of 1 to 8 bytes, then copied in 16-byte
	// loads that wait for those stores (a store-forwarding stall on
	// every insert). TestInsertOverwritesEveryField keeps the list whole.
	e.key = *key
	e.vip, e.backend, e.gen, e.lastSeen, e.state = vip, backend, gen, now, st
	e.flags, e.chance, e.flowHash = 0, 0, 0
	if st == StateOther {
		e.flags = entryOnce // new's rank until a second packet (entryOnce)
	}
	t.count(backend, gen, st)
	return e
}

// evict makes room in the bucket whose first slot is first, full, for an
// entry of state st by the eviction policy, and returns the freed slot, or
// -1 when the policy allows no room. A slot it returns is free (signature
// 0, not counted in live).
func (t *Table) evict(first int, st State, now Time) int {
	// Reclaim every expired entry of the bucket; failing that, choose the
	// least valuable class the newcomer may evict, then the least recently
	// seen within it.
	freed, victim := -1, -1
	var victimRank uint8
	var victimAge int32
	own := newcomerRank(st)
	for s := first; s < first+bucketSlots; s++ {
		e := &t.entries[s]
		age := idle(e, now)
		if age > t.timeout[e.state&3] {
			t.free(s)
			t.c.Expired++
			if freed < 0 {
				freed = s
			}
			continue
		}
		r := rankOf(e, age)
		if r > own {
			continue
		}
		if victim < 0 || r < victimRank || (r == victimRank && age > victimAge) {
			victim, victimRank, victimAge = s, r, age
		}
	}
	if freed >= 0 {
		return freed
	}
	if victim >= 0 {
		t.c.Evicted[t.entries[victim].state]++
		t.evicts++
		t.free(victim)
	}
	return victim
}

// slotOf is the slot index of e, or -1 if e is not one of t's occupied
// entries.
func (t *Table) slotOf(e *Entry) int {
	if e == nil || len(t.entries) == 0 {
		return -1
	}
	p := uintptr(unsafe.Pointer(e))
	base := uintptr(unsafe.Pointer(&t.entries[0]))
	size := unsafe.Sizeof(Entry{})
	if p < base || p >= base+uintptr(len(t.entries))*size || (p-base)%size != 0 {
		return -1
	}
	s := int((p - base) / size)
	if !t.used(s) {
		return -1
	}
	return s
}

// Remove stops tracking e, an entry returned by this table (for example
// when the dataplane decides a closing flow is done). It reports whether e
// was a tracked entry.
func (t *Table) Remove(e *Entry) bool {
	s := t.slotOf(e)
	if s < 0 {
		return false
	}
	t.free(s)
	t.c.Deleted++
	return true
}

// Delete stops tracking the flow with this hash and key, live or expired,
// and reports whether it was tracked.
func (t *Table) Delete(hash uint64, key *flow.Tuple) bool {
	s := t.find(hash, key)
	if s < 0 {
		return false
	}
	t.free(s)
	t.c.Deleted++
	return true
}

// Sweep removes the expired entries of the next budget buckets (it keeps its
// own cursor and wraps around) and returns how many it removed. The lcore
// calls it when idle, and SweepPaced between bursts: the work is bounded
// by budget buckets, each one signature word and one entry line per
// occupied slot. Visiting every bucket
// at least once per shortest timeout (10 s by default: Buckets()/10 buckets
// a second) keeps expired entries from holding slots long.
func (t *Table) Sweep(now Time, budget int) (expired int) {
	nb := t.Buckets()
	budget = min(budget, nb)
	for ; budget > 0; budget-- {
		b := t.sweep
		if t.sweep++; t.sweep == nb {
			t.sweep = 0
		}
		first := b * bucketSlots
		for m := t.occupied(uint64(b)); m != 0; m &= m - 1 {
			s := first + lane(m)
			e := &t.entries[s]
			if idle(e, now) > t.timeout[e.state&3] {
				t.free(s)
				expired++
			}
		}
	}
	t.c.Expired += uint64(expired)
	return expired
}

// maxPacedBuckets bounds the buckets one SweepPaced call visits, so that no
// burst's sweep is long; what is left is done by the next calls.
const maxPacedBuckets = 8

// SweepPaced is Sweep at the pace the timeouts need, for a forwarding loop
// to call after every burst: over time it visits every bucket once per
// half of the shortest timeout (5 s with the default 10 s), at most
// maxPacedBuckets a call, and nothing when no bucket is due yet. A
// per-burst Sweep(now, 1) visited buckets as fast as bursts came: at 5.5M
// packets a second, 172,000 buckets a second where a table of 262,144
// buckets needs 52,000, and at 1M flows each visit reads entry lines that
// are misses (3% of a forwarding core's samples; docs/benchmarks.md, round
// 12). An expired entry it has not reached yet is no risk: lookups treat it
// as a miss and inserts reclaim it (evict); it only holds its slot, and
// Len counts it, for at most that half timeout longer. Calls between which
// the clock went back or jumped by more than a pass count as one pass.
func (t *Table) SweepPaced(now Time) (expired int) {
	nb := uint64(t.Buckets())
	if !t.paced {
		t.paced, t.pacedAt = true, now
		return 0
	}
	dt := uint64(min(uint32(now-t.pacedAt), uint32(t.pass)))
	t.pacedAt = now
	t.owed = min(t.owed+dt*nb, nb*t.pass)
	due := min(t.owed/t.pass, maxPacedBuckets)
	if due == 0 {
		return 0
	}
	t.owed -= due * t.pass
	return t.Sweep(now, int(due))
}

// Selector picks the entries Drop removes.
type Selector struct {
	byBackend bool
	exact     bool // byBackend: only the incarnation gen, of VIP vip
	id        uint32
	gen       uint32
	vip       uint16
	chance    bool // byBackend and exact: also the VIP's entries whose second chance names id
}

// ByVIP selects every entry of one VIP (the VIP was removed).
func ByVIP(vip uint16) Selector { return Selector{id: uint32(vip)} }

// ByBackend selects every entry pinned to one backend (the backend was
// removed, or is to be moved by force).
func ByBackend(backend uint32) Selector { return Selector{byBackend: true, id: backend} }

// ByIncarnation selects the entries of one incarnation (Entry.Gen) of a
// backend id, of one VIP: a backend that is there now, whose id may have
// served another backend before (a removed one's entries stay until they
// expire or their flows repin), even of another VIP.
func ByIncarnation(backend, gen uint32, vip uint16) Selector {
	return Selector{byBackend: true, exact: true, id: backend, gen: gen, vip: vip}
}

// AndChances widens an incarnation's Selector to the entries of its VIP
// whose second chance names the backend (Entry.Chance): their connections
// may be on it, reached through the pin's agent (docs/second-chance.md).
// A chance holds no incarnation, so one naming a removed backend whose id
// the backend took is selected too.
func (sel Selector) AndChances() Selector {
	sel.chance = sel.byBackend && sel.exact
	return sel
}

func (sel Selector) matches(e *Entry) bool {
	if sel.byBackend {
		if sel.chance && e.vip == sel.vip {
			if ch, ok := e.Chance(); ok && ch == sel.id {
				return true
			}
		}
		return e.backend == sel.id && (!sel.exact || e.gen == sel.gen && e.vip == sel.vip)
	}
	return uint32(e.vip) == sel.id
}

// Drop removes the entries sel matches from up to budget buckets starting at
// bucket from, and returns the bucket to start from next time; done is true
// when the last bucket was visited. A full drop is a loop, one step between
// bursts, from 0 until done: flows inserted meanwhile into buckets already
// visited survive, so the control plane stops the inserts (removes the
// backend from the Maglev table) before it asks for the drop.
func (t *Table) Drop(sel Selector, from, budget int) (next int, done bool) {
	return t.scan(from, budget, func(s int, e *Entry) {
		if sel.matches(e) {
			t.free(s)
			t.c.Dropped++
		}
	})
}

// DropIf is Drop for the entries drop reports true for (drop must not
// insert or remove entries).
func (t *Table) DropIf(drop func(e *Entry) bool, from, budget int) (next int, done bool) {
	return t.scan(from, budget, func(s int, e *Entry) {
		if drop(e) {
			t.free(s)
			t.c.Dropped++
		}
	})
}

// Scan calls fn for every occupied entry (expired ones included: see
// Expired) of up to budget buckets starting at bucket from, and returns the
// bucket to continue from; done is true when the last bucket was visited.
// It must run on the owning lcore, like every method; fn must not insert or
// remove entries. Counting flows per backend for the control plane is a
// series of Scans between bursts.
func (t *Table) Scan(from, budget int, fn func(e *Entry)) (next int, done bool) {
	return t.scan(from, budget, func(_ int, e *Entry) { fn(e) })
}

// ForEach calls fn for every occupied entry of the table in one go. It
// stalls the lcore for the whole table (tens of milliseconds at millions of
// entries): tests and tools use it, the dataplane uses Scan.
func (t *Table) ForEach(fn func(e *Entry)) {
	t.Scan(0, t.Buckets(), fn)
}

func (t *Table) scan(from, budget int, fn func(slot int, e *Entry)) (next int, done bool) {
	nb := t.Buckets()
	if from < 0 || from >= nb {
		return nb, true
	}
	end := from + min(max(budget, 0), nb-from) // no overflow for a budget near MaxInt
	for b := from; b < end; b++ {
		first := b * bucketSlots
		for m := t.occupied(uint64(b)); m != 0; m &= m - 1 {
			s := first + lane(m)
			fn(s, &t.entries[s])
		}
	}
	return end, end == nb
}
