package dataplane

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/sched"
)

// floodSYN is the i-th spoofed SYN of a flood at web (a source of its own).
func floodSYN(i int) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:], uint16(1024+i%50000))
	binary.BigEndian.PutUint16(h[2:], 80)
	h[12], h[13] = 5<<4, lpS
	binary.BigEndian.PutUint16(h[14:], 65535)
	x := uint32(i)*2654435761 + 7
	return raw4(fmt.Sprintf("11.%d.%d.%d", byte(x>>16), byte(x>>8), byte(x)), configtest.Web, 6, uint16(i), 0x4000, h)
}

// A SYN flood that fills the conntrack table evicts handshakes in
// progress (new entries evict each other). A connection a load-based
// scheduler placed, whose entry goes before the client's ACK comes, had
// that ACK placed by the Maglev table, most likely elsewhere, and reset
// (8-12 of 32 in the audit's run). While the table evicts handshakes, a
// load-based VIP's SYNs are placed by the table, whose answer the ACK
// gets with or without the entry: handshakes begun during the flood all
// complete on their backend. Once a tcp_syn timeout passes without such
// an eviction, the scheduler places SYNs again.
func TestHandshakesDuringFloodKeepTheirBackend(t *testing.T) {
	const capacity = 1024
	lpEvery(t, capacity, func(t *testing.T, k sched.Kind, r *rig) {
		flood := 0
		burst := func() {
			fr := make([][]byte, 32)
			for i := range fr {
				fr[i] = floodSYN(flood)
				flood++
			}
			r.run(fr...)
		}
		now := conntrack.Time(2000)
		r.now = now
		for range capacity / 32 * 2 { // the table full, new entries evicting each other
			burst()
		}
		if r.w.ct.EvictedLive(conntrack.StateNew) == 0 {
			t.Fatal("the flood evicted no handshake: the test does not test")
		}
		byTable := r.w.c.SYNsByTable
		cs := lpRange(0, 32)
		be := lpAt(t, r, r.now+1, lpEach(cs, func(c int) []byte { return lpSeg(c, lpS, 0, nil) })...)
		n := r.w.c.SYNsByTable - byTable
		for range capacity / 32 {
			burst()
		}
		got := lpAt(t, r, r.now+20, lpEach(cs, func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...)
		if m := lpMoved(be, got); m != 0 {
			t.Errorf("%v: %d of 32 handshakes begun during the flood split", k, m)
		}
		picker := k != sched.Maglev
		if picker && n != 32 || !picker && n != 0 {
			t.Errorf("%v: %d SYNs counted as placed by the table, want %d", k, n, map[bool]int{true: 32}[picker])
		}
		if !picker {
			return
		}
		// A tcp_syn timeout later, with no eviction since, the scheduler
		// places SYNs again.
		later := r.now + r.w.ct.Timeout(conntrack.StateNew) + 1
		byTable = r.w.c.SYNsByTable
		lpAt(t, r, later, lpEach(lpRange(100, 8), func(c int) []byte { return lpSeg(c, lpS, 0, nil) })...)
		if n := r.w.c.SYNsByTable - byTable; n != 0 {
			t.Errorf("%v: a tcp_syn timeout after the flood, %d of 8 SYNs still placed by the table", k, n)
		}
	})
}
