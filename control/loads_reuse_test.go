package control

import (
	"fmt"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// leastConnWeb is an unchecked least-conn "web" VIP with the named
// backends (be<i> at 10.0.1.<i>).
func leastConnWeb(ids ...int) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		VIP("web", configtest.Web, 80, `scheduler = "least-conn"`)
	for _, i := range ids {
		b.Backend(fmt.Sprintf("be%d", i), fmt.Sprintf("10.0.1.%d", i))
	}
	return b.String()
}

// The schedulers' loads are published by backend id once a second
// (foldSignals). A reload that removes be3 and one that adds be4 within
// that second give be4 be3's id (NewServices hands out the lowest id the
// previous snapshot left unused), and be4, a fresh backend with no
// connection, is ranked by be3's 30 connections until the next fold:
// least-conn sends it nothing. be1, be2 and be4 hold no flow
// at all, so least-conn must give each a third of the new flows.
func TestReusedBackendIDStartsWithoutLoad(t *testing.T) {
	f := newFixture(t, leastConnWeb(1, 2, 3))
	f.rebuild()
	// be3 takes 30 connections (be1 and be2 take none: weight 0 for now).
	if err := f.plane.SetWeight("web", "be1", 0); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.SetWeight("web", "be2", 0); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		for _, fl := range []string{"S", "A"} {
			if r := f.lc.send(syn(t, uint16(40000+i), fl)); r.verdict != dataplane.Tx || r.dst != f.addr("be3") {
				t.Fatalf("conn %d %s: %v to %v, want be3", i, fl, r.verdict, r.dst)
			}
		}
	}
	// The fold publishes be3's 30 active connections.
	counters := make([]dataplane.Counters, 1)
	f.plane.signalStep(counters)
	old := f.shared.Services.Load()
	var id3 uint32
	for _, id := range f.vipByName("web").Members {
		if old.Backends[id].Name == "be3" {
			id3 = id
		}
	}
	if l := f.shared.Loads.Load(); l == nil || l.Active[id3] != 30 {
		t.Fatalf("published loads %+v, want be3 (id %d) at 30", l, id3)
	}
	// Within the same second: a reload removes be3 (and ends the
	// overrides: be1 and be2 at their configured weight), another adds be4.
	f.apply(leastConnWeb(1, 2))
	f.plane.SetWeight("web", "be1", 1)
	f.plane.SetWeight("web", "be2", 1)
	f.apply(leastConnWeb(1, 2, 4))
	svc := f.shared.Services.Load()
	var id4 uint32
	for _, id := range f.vipByName("web").Members {
		if svc.Backends[id].Name == "be4" {
			id4 = id
		}
	}
	if id4 != id3 {
		t.Skipf("be4 got id %d, be3 had %d: no reuse", id4, id3)
	}
	got := map[string]int{}
	for i := range 30 {
		r := f.lc.send(syn(t, uint16(50000+i), "S"))
		if r.verdict != dataplane.Tx {
			t.Fatalf("new flow %d: %v", i, r.verdict)
		}
		got[r.dst.String()]++
	}
	if got["10.0.1.4"] != 10 {
		t.Errorf("30 new flows over be1, be2 and the new be4, all without a connection: %v; want 10 each (be4 has id %d, gen %d, and was ranked by be3's 30 connections)",
			got, id4, svc.Backends[id4].Gen)
	}
}
