package dataplane

import (
	"encoding/binary"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
)

// The handshake-eviction window (handshakesEvicted) runs a tcp_syn timeout
// from the last eviction of a handshake in progress. The general path
// dates an eviction at its insert (noteEvictions after Insert); the fused
// path's inserts (fuseNew, a Maglev VIP's SYNs) do not, so the fused
// worker dates a flood's evictions only when something next reads the
// count: here the first SYN of a load-based VIP after the flood, a tcp_syn
// timeout and a half later. The general worker's window has ended, and
// the scheduler places that SYN; the fused worker's starts then, and
// places it by the table and counts it in SYNsByTable. Fused and general
// paths must give the same backend and the same counters.
func TestFloodWindowDatedAlikeFusedAndGeneral(t *testing.T) {
	cfg := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Section("conntrack", "capacity = 256").
		Web(4).
		VIP("lc", configtest.Web, 81, `scheduler = "least-conn"`).
		Backend("l1", "10.0.3.1").Backend("l2", "10.0.3.2").Backend("l3", "10.0.3.3").
		String()
	var byTable [2]uint64
	var evicted [2]uint64
	for k, general := range []bool{false, true} {
		r := newRig(t, cfg)
		r.w.generalOnly = general
		r.now = 2000
		flood := 0
		for range 256 / 32 * 3 { // a SYN flood at web (Maglev) fills the table
			fr := make([][]byte, 32)
			for i := range fr {
				fr[i] = floodSYN(flood)
				flood++
			}
			r.run(fr...)
		}
		evicted[k] = r.w.ct.EvictedLive(conntrack.StateNew)
		// A client of lc, a tcp_syn timeout and a half after the flood.
		h := make([]byte, 20)
		binary.BigEndian.PutUint16(h[0:], 40001)
		binary.BigEndian.PutUint16(h[2:], 81)
		h[12], h[13] = 5<<4, lpS
		binary.BigEndian.PutUint16(h[14:], 65535)
		r.now += r.w.ct.Timeout(conntrack.StateNew) + 500
		r.run(raw4("198.51.100.1", configtest.Web, 6, 1, 0x4000, h))
		byTable[k] = r.w.c.SYNsByTable
	}
	t.Logf("handshakes evicted: fused %d, general %d", evicted[0], evicted[1])
	if evicted[0] == 0 || evicted[1] == 0 {
		t.Fatal("the flood evicted no handshake: the test does not test")
	}
	if byTable[0] != byTable[1] {
		t.Errorf("SYNsByTable: fused %d, general %d: the fused path's evictions are dated when next read, not when they happened, "+
			"so its window outlasts the general path's", byTable[0], byTable[1])
	}
}
