package control

import (
	"fmt"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// Every rebuild (one health verdict, one drain, each second of a
// slow start) built the Maglev table of every VIP again, under the
// plane's lock, though only the changed VIP's backends or weights
// differ. At the documented limit (4096 VIPs at 65537 slots, 537 MB of
// tables) one rebuild took 20 s on the 2-vCPU VM, and health verdicts,
// drains, status and the admin API waited on the lock meanwhile; a
// slow start re-ran it every second. A VIP whose table inputs did not
// change must keep its table (Maglev is deterministic: same keys, weights
// and size give the same table).
func TestRebuildKeepsUnchangedVIPTables(t *testing.T) {
	const nv = 32
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `drain_timeout = "0s"`)
	for i := range nv {
		b.VIP(fmt.Sprintf("v%d", i), fmt.Sprintf("203.0.113.%d", i+1), 80)
		for j := range 4 {
			b.Backend(fmt.Sprintf("b%d", j), fmt.Sprintf("10.%d.0.%d", i, j+1))
		}
	}
	f := newFixture(t, b.String())
	before := map[string]*maglev.Table{}
	for _, v := range f.shared.Services.Load().VIPs {
		if v != nil {
			before[v.Name] = v.Table
		}
	}
	if err := f.plane.Drain("v0", "b1"); err != nil {
		t.Fatal(err)
	}
	rebuilt := 0
	for _, v := range f.shared.Services.Load().VIPs {
		if v == nil || v.Name == "v0" {
			continue
		}
		if v.Table != before[v.Name] {
			rebuilt++
		}
	}
	if v0 := findVIPByName(f.shared.Services.Load(), "v0"); v0.Table == before["v0"] {
		t.Fatal("v0's table was not rebuilt after its backend's drain")
	}
	if rebuilt != 0 {
		t.Fatalf("draining one backend of v0 rebuilt the tables of %d of the %d other VIPs (expected 0)", rebuilt, nv-1)
	}
}

// The reuse must not change any slot: a reused table equals a fresh build.
func TestReusedTablesMatchFreshBuild(t *testing.T) {
	enc := fleetEnc(t)
	specs := fleetSpecs(64, 5, 251)
	prev, err := dataplane.NewServices(nil, enc, dataplane.NextHop{}, specs)
	if err != nil {
		t.Fatal(err)
	}
	next := fleetSpecs(64, 5, 251)
	next[3].Backends[2].Eff.Weight = 0
	next[5].Backends[1].Eff.Weight = 7
	next[9].Backends = next[9].Backends[:4]
	next[11].TableSize = 257
	reloaded := freshAndReloaded(t, enc, prev, next)
	for _, i := range []int{3, 5, 9, 11} {
		v := reloaded.LookupVIP(specs[i].Addr, 80, 6)
		if v.Table == prev.LookupVIP(specs[i].Addr, 80, 6).Table {
			t.Fatalf("vip %d changed but kept its table", i)
		}
	}
}
