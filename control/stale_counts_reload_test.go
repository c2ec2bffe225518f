package control

import (
	"slices"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestStaleWorkerKeepsVIPCountsAcrossReload: the metrics exporter
// reads the workers' counters into a StatusBuf it keeps from scrape to
// scrape, and a worker that does not answer (stopped or stuck) keeps the
// last scrape's values, "so no counter goes back"
// (fulcrum_workers_stale's help). That must hold for the per-VIP and
// per-backend counters too, also when a reload between the two scrapes
// added VIPs or backends: fulcrum_vip_packets_total and
// fulcrum_backend_packets_total are counters, and a fall reads to
// rate() as a reset (a spike of the whole count).
func TestStaleWorkerKeepsVIPCountsAcrossReload(t *testing.T) {
	f := newStallFixture(t, baseConfig)
	// The second worker forwards 20 new flows of web, then polls.
	const n = 20
	pkts := make([]dataplane.Pkt, n)
	for i := range pkts {
		fr := syn(t, uint16(3000+i), "S")
		buf := make([]byte, 128+len(fr)+64)
		copy(buf[128:], fr)
		pkts[i] = dataplane.Pkt{Buf: buf, Off: 128, Len: len(fr)}
	}
	f.stuck.Process(pkts, 1000)
	for i, v := range f.stuck.Verdicts[:n] {
		if v != dataplane.Tx {
			t.Fatalf("packet %d: verdict %v", i, v)
		}
	}
	f.resume()
	buf := &StatusBuf{}
	sums := func(st Status) (vip, backends uint64) {
		for _, v := range st.VIPs {
			if v.Name != "web" {
				continue
			}
			vip = v.Packets
			for _, b := range v.Backends {
				backends += b.Packets
			}
		}
		return
	}
	st := f.plane.StatusInto(false, buf)
	v0, b0 := sums(st)
	if v0 != n || b0 != n || len(st.Stale) != 0 {
		t.Fatalf("first read: web %d packets, its backends %d, stale %v; want %d, %d, none", v0, b0, st.Stale, n, n)
	}
	// The worker stops answering (stuck); a reload adds a VIP with more
	// backends than the snapshot had ids for.
	f.stop()
	f.apply(configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "10s"`, `drain_timeout = "0s"`).
		Web(4).
		VIP("api", "203.0.113.9", 443).
		Backend("a1", "10.0.3.1").Backend("a2", "10.0.3.2").Backend("a3", "10.0.3.3").Backend("a4", "10.0.3.4").
		String())
	st = f.plane.StatusInto(false, buf)
	if !slices.Equal(st.Stale, []int{1}) {
		t.Fatalf("stale %v, want [1]", st.Stale)
	}
	v1, b1 := sums(st)
	if st.Workers[1].RxPackets != n {
		t.Errorf("stale worker's rx %d, want the last reading's %d", st.Workers[1].RxPackets, n)
	}
	if v1 < v0 || b1 < b0 {
		t.Errorf("after a reload, with worker 1 stale: web's packets %d -> %d, its backends' %d -> %d (counters went back)", v0, v1, b0, b1)
	}
}
