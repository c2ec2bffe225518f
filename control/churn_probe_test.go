package control

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// churnConfig is the web VIP with be2..be4 (10.0.1.2..4) and one more
// backend, name at addr, drained or not, in a small table.
func churnConfig(name, addr string, drained bool, extraVIP bool) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
		VIP("web", configtest.Web, 80, "table_size = 251")
	keys := []string{}
	if drained {
		keys = append(keys, "drain = true")
	}
	b.Backend(name, addr, keys...)
	for i := 2; i <= 4; i++ {
		b.Backend(fmt.Sprintf("be%d", i), fmt.Sprintf("10.0.1.%d", i))
	}
	if extraVIP {
		b.VIP("other", "203.0.113.8", 80, "table_size = 251").Backend("o1", "10.0.2.1")
	}
	return b.String()
}

// establish opens n TCP flows (SYN, then ACK) from sport on and returns
// the backend each was sent to.
func establish(t *testing.T, f *fixture, sport uint16, n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		r := f.lc.send(syn(t, sport+uint16(i), "S"))
		if r.verdict != dataplane.Tx {
			t.Fatalf("SYN %d not forwarded: %v", i, r.verdict)
		}
		if a := f.lc.send(syn(t, sport+uint16(i), "A")); a.dst != r.dst {
			t.Fatalf("ACK %d went to %v, its SYN to %v", i, a.dst, r.dst)
		}
		out[i] = r.dst
	}
	return out
}

func idOf(t *testing.T, svc *dataplane.Services, name string) *dataplane.Backend {
	for _, b := range svc.Backends {
		if b != nil && b.Name == name {
			return b
		}
	}
	t.Fatalf("no backend %s", name)
	return nil
}

// A backend replaced twice (another address each time) gets back the id
// of its first incarnation two reloads later. The flows of the first
// incarnation still in conntrack are never forwarded to the new holder by
// its id (the generation tells them apart): they are placed by the table.
// But every count of "flows on this backend" is by id alone: the status
// API's Flows and the schedulers' Active load give the new incarnation
// the old one's flows.
func TestProbeReusedBackendIDInheritsFlowCounts(t *testing.T) {
	f := newFixture(t, churnConfig("be1", "10.0.1.1", false, false))
	first := idOf(t, f.shared.Services.Load(), "be1")
	dsts := establish(t, f, 1000, 400)
	old := 0
	for _, d := range dsts {
		if d == netip.MustParseAddr("10.0.1.1") {
			old++
		}
	}
	if old == 0 {
		t.Fatal("no flow on be1")
	}
	f.apply(churnConfig("be1", "10.0.9.1", false, false))
	f.apply(churnConfig("be1", "10.0.9.2", false, false))
	cur := idOf(t, f.shared.Services.Load(), "be1")
	if cur.ID != first.ID || cur.Gen == first.Gen {
		t.Logf("be1's id was not reused (first %d/%d, now %d/%d)", first.ID, first.Gen, cur.ID, cur.Gen)
	}
	// The new be1 has had no flow yet.
	if fl := f.backend("be1").Flows; fl != 0 {
		t.Errorf("status: the new be1 (id %d gen %d, never sent a packet) shows %d flows, the %d of its id's first incarnation", cur.ID, cur.Gen, fl, old)
	}
}

// The schedulers' Active load (from conntrack.Table.BackendFlows, counted
// by id alone) of a backend whose id an earlier incarnation held includes
// that incarnation's flows still in conntrack. The fix lies in conntrack
// (per-id counts that know the incarnation): this test fails until then.
func TestProbeReusedBackendIDInheritsActiveLoad(t *testing.T) {
	f := newFixture(t, churnConfig("be1", "10.0.1.1", false, false))
	old := 0
	for _, d := range establish(t, f, 1000, 400) {
		if d == netip.MustParseAddr("10.0.1.1") {
			old++
		}
	}
	f.apply(churnConfig("be1", "10.0.9.1", false, false))
	f.apply(churnConfig("be1", "10.0.9.2", false, false))
	cur := idOf(t, f.shared.Services.Load(), "be1")
	// One new flow reaches it; the schedulers' load of it is then that
	// one flow, not the old incarnation's too.
	sport := uint16(20000)
	for ; sport < 21000; sport++ {
		if r := f.lc.send(syn(t, sport, "S")); r.dst == netip.MustParseAddr("10.0.9.2") {
			break
		}
	}
	if sport == 21000 {
		t.Fatal("no new flow reached the new be1")
	}
	st := f.plane.Status(false)
	f.plane.mu.Lock()
	f.plane.foldSignals(st.Workers, f.plane.now())
	f.plane.mu.Unlock()
	if a := f.shared.Loads.Load().Active[cur.ID]; a != 1 {
		t.Errorf("schedulers' load of the new be1: %d active flows, want 1 (the old incarnation had %d)", a, old)
	}
}

// 70,000 reloads that each replace one backend with a new address (and a
// new name): ids are reused every other reload, generations only grow, no
// (id, generation) pair is ever given to two backends, and every 10,000
// reloads the flows pinned to a removed backend whose id another holds
// now are checked never to reach that holder (drained, so the table
// never chooses it).
func TestProbeBackendChurnNeverReusesAnIncarnation(t *testing.T) {
	n := 70000
	if testing.Short() {
		n = 4000
	}
	every := n / 7
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", 10+i>>16, i>>8&255, i&255|1) }
	f := newFixture(t, churnConfig("x0", addr(0), false, false))
	type inc struct{ id, gen uint32 }
	seen := map[inc]string{}
	maxGen := uint32(0)
	record := func() {
		svc := f.shared.Services.Load()
		for _, b := range svc.Backends {
			if b == nil {
				continue
			}
			k := inc{b.ID, b.Gen}
			who := b.Name + "@" + b.Addr.String()
			if w, ok := seen[k]; ok && w != who {
				t.Fatalf("id %d gen %d given to %s and to %s", b.ID, b.Gen, w, who)
			}
			seen[k] = who
			maxGen = max(maxGen, b.Gen)
		}
		if len(svc.Backends) > 8 {
			t.Fatalf("snapshot holds %d backend ids for 4 backends", len(svc.Backends))
		}
	}
	record()
	sport := uint16(1000)
	checks := 0
	for i := 1; i <= n; i++ {
		if i%every == 0 {
			// Flows on the live x(i-1), then two reloads to drained
			// successors: the second takes x(i-1)'s id.
			prev := idOf(t, f.shared.Services.Load(), fmt.Sprintf("x%d", i-1))
			dsts := establish(t, f, sport, 200)
			var mine []uint16
			for j, d := range dsts {
				if d == prev.Addr {
					mine = append(mine, sport+uint16(j))
				}
			}
			sport += 200
			f.apply(churnConfig(fmt.Sprintf("x%d", i), addr(i), true, false))
			i++
			f.apply(churnConfig(fmt.Sprintf("x%d", i), addr(i), true, false))
			record()
			holder := idOf(t, f.shared.Services.Load(), fmt.Sprintf("x%d", i))
			if holder.ID != prev.ID {
				t.Logf("round %d: id %d not reused (holder %d)", i, prev.ID, holder.ID)
			}
			for _, sp := range mine {
				if r := f.lc.send(syn(t, sp, "A")); r.dst == holder.Addr || r.verdict != dataplane.Tx {
					t.Fatalf("round %d: a flow of removed x%d (id %d gen %d) went to %v (verdict %v); the drained holder of its id is %v gen %d",
						i, i-2, prev.ID, prev.Gen, r.dst, r.verdict, holder.Addr, holder.Gen)
				}
			}
			checks += len(mine)
			continue
		}
		f.apply(churnConfig(fmt.Sprintf("x%d", i), addr(i), false, false))
		record()
	}
	svc := f.shared.Services.Load()
	t.Logf("%d reloads: %d incarnations, highest generation %d, %d backend ids in the snapshot, %d flows checked", n, len(seen), maxGen, svc.NumBackendIDs(), checks)
	if checks == 0 {
		t.Error("no flow checked")
	}
	if len(f.plane.backends) != 4 {
		t.Errorf("control plane holds %d backend states for 4 backends", len(f.plane.backends))
	}
}

// 10,000 reloads that remove and add a VIP at another address each time
// and replace a backend: nothing the control plane or the snapshot keeps
// grows with the number of VIPs and backends ever seen.
func TestProbeChurnKeepsStateBounded(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	cfg := func(i int) string {
		b := configtest.New().
			Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
			Section("conntrack", "capacity = 65536").
			VIP("web", configtest.Web, 80, "table_size = 251").
			Backend(fmt.Sprintf("x%d", i), fmt.Sprintf("10.%d.%d.1", 10+i>>8, i&255)).
			Backend("be2", "10.0.1.2")
		if i%2 == 0 {
			b.VIP(fmt.Sprintf("v%d", i), fmt.Sprintf("203.0.%d.%d", 114+i>>8&15, i&255), 80+i%1000, "table_size = 251").Backend("o1", "10.0.2.1")
		}
		return b.String()
	}
	f := newFixture(t, cfg(0))
	var announced int
	f.plane.SetAnnouncer(func(set []netip.Prefix) { announced = len(set) }, nil)
	for i := 1; i <= n; i++ {
		f.apply(cfg(i))
		if i%97 == 0 {
			f.lc.send(syn(t, uint16(i), "S"))
		}
	}
	svc := f.shared.Services.Load()
	nv := 0
	for _, v := range svc.VIPs {
		if v != nil {
			nv++
		}
	}
	st := f.plane.Status(true)
	w := f.lc.w.Local()
	t.Logf("after %d reloads: %d VIP ids (%d live), %d backend ids, %d backend states, %d panicked entries, %d announced-once, worker counters %d VIPs %d backends, status %d VIPs, announced %d",
		n, len(svc.VIPs), nv, svc.NumBackendIDs(), len(f.plane.backends), len(f.plane.panicked), len(f.plane.wasAnnounced), len(w.VIPs), len(w.Backends), len(st.VIPs), announced)
	if len(svc.VIPs) > 4 || svc.NumBackendIDs() > 8 || len(f.plane.backends) > 3 || len(f.plane.panicked) > 2 ||
		len(f.plane.wasAnnounced) > 2 || len(w.VIPs) > 4 || len(w.Backends) > 8 || len(st.VIPs) > 2 {
		t.Error("state grew with the churn")
	}
}
