package control

import (
	"net/netip"
	"strings"
	"testing"
)

// For a VIP whose scheduler is not Maglev, the table slot does not decide
// a new flow: Lookup says which scheduler picks at connection time and
// lists the candidates with their weights and loads; a tracked flow names
// its pinned backend (finding 6).
func TestLookupFollowsTheScheduler(t *testing.T) {
	f := newFixture(t, strings.Replace(baseConfig, "port = 80\n", "port = 80\nscheduler = \"p2c\"\n", 1))
	f.plane.SetWeight("web", "be3", 0)
	client, vip := netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("203.0.113.7")
	res, err := f.plane.Lookup(client, vip, 4343, 80, 6)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != "scheduler" || res.Scheduler != "p2c" || res.Backend != "" || res.Slot != -1 {
		t.Fatalf("new flow of a p2c VIP: %+v", res)
	}
	if len(res.Candidates) != 4 {
		t.Fatalf("candidates %+v, want the 4 backends", res.Candidates)
	}
	for _, c := range res.Candidates {
		want := WeightScale
		if c.Backend == "be3" {
			want = 0
		}
		if c.Weight != want || c.Address == "" {
			t.Errorf("candidate %+v, want weight %d", c, want)
		}
	}
	got := f.lc.send(syn(t, 4343, "S")).dst.String()
	res, err = f.plane.Lookup(client, vip, 4343, 80, 6)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != "conntrack" || res.Address != got || res.Scheduler != "p2c" {
		t.Fatalf("tracked flow: %+v, went to %s", res, got)
	}
	// Maglev VIPs still answer with the table slot.
	g := newFixture(t, baseConfig)
	res, err = g.plane.Lookup(client, vip, 4343, 80, 6)
	if err != nil || res.Reason != "table" || res.Scheduler != "maglev" || res.Backend == "" || res.Slot < 0 {
		t.Fatalf("maglev: %+v %v", res, err)
	}
}
