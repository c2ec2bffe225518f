package control

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Fleet consistency of the snapshot at the limits: an instance that
// reaches a configuration through reloads must be able to build it, as an
// instance started on it does, or the two run different tables.

func fleetEnc(t *testing.T) *encap.Encapsulator {
	t.Helper()
	enc, err := encap.New(encap.Config{SrcV4: netip.MustParseAddr("192.0.2.10"), MTU: 1500, DF: encap.DFSet})
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// fleetSpecs is nv VIPs of nb backends each (table size m), VIP i at
// 203.0.(i>>8).(i&255):80 and its backend j at 10.i.j (two bytes), all of
// weight 1.
func fleetSpecs(nv, nb int, m uint64) []dataplane.VIPSpec {
	specs := make([]dataplane.VIPSpec, nv)
	for i := range specs {
		a := netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)})
		v := dataplane.VIPSpec{Key: flow.VIPKey{Addr: a, Port: 80, Proto: 6}, Name: fmt.Sprintf("v%d", i), Addr: a, Port: 80, Proto: 6,
			Encap: encap.GRE, Sched: sched.Maglev, TableSize: m}
		for j := range nb {
			ba := netip.AddrFrom4([4]byte{10, byte(i), byte(j >> 8), byte(j)})
			v.Backends = append(v.Backends, dataplane.BackendSpec{Name: ba.String(), Addr: ba, Config: 1, Eff: dataplane.Effective{Weight: 1}})
		}
		specs[i] = v
	}
	return specs
}

// sameChoices compares the backend address every slot of every VIP names
// in two snapshots, VIP by key.
func sameChoices(t *testing.T, a, b *dataplane.Services) {
	t.Helper()
	for _, va := range a.VIPs {
		if va == nil {
			continue
		}
		vb := b.LookupVIP(va.Addr, va.Port, va.Proto)
		if vb == nil || (va.Table == nil) != (vb.Table == nil) {
			t.Fatalf("vip %s: present/table differ", va.Name)
		}
		if va.Table == nil {
			continue
		}
		for s := range va.Table.Size() {
			x, y := a.Backends[va.Backends[va.Table.Slot(s)]].Addr, b.Backends[vb.Backends[vb.Table.Slot(s)]].Addr
			if x != y {
				t.Fatalf("vip %s slot %d: %v here, %v there", va.Name, s, x, y)
			}
		}
	}
}

// At the limit of backends in all (dataplane.MaxBackends), a reload that gives one
// backend a new address (a new server: a new id) must build, as the same
// configuration does on a fresh instance.
func TestReloadAtBackendLimitBuilds(t *testing.T) {
	enc := fleetEnc(t)
	const nv = 16
	specs := fleetSpecs(nv, dataplane.MaxBackends/nv, 4099)
	prev, err := dataplane.NewServices(nil, enc, dataplane.NextHop{}, specs)
	if err != nil {
		t.Fatal(err)
	}
	// The final configuration: one backend moved to another address, one
	// VIP's backends all renumbered.
	final := fleetSpecs(nv, dataplane.MaxBackends/nv, 4099)
	moved := netip.MustParseAddr("10.200.0.1")
	final[0].Backends[0].Addr = moved
	for j := range final[1].Backends {
		a := netip.AddrFrom4([4]byte{10, 201, byte(j >> 8), byte(j)})
		final[1].Backends[j].Name, final[1].Backends[j].Addr = a.String(), a
	}
	reloaded := freshAndReloaded(t, enc, prev, final)
	// A backend id handed to a new server is a new incarnation of it.
	for _, b := range reloaded.Backends {
		if b == nil || int(b.ID) >= len(prev.Backends) {
			continue
		}
		if old := prev.Backends[b.ID]; old != nil && old.Gen == b.Gen && (old.Addr != b.Addr || old.Name != b.Name || old.VIP != b.VIP) {
			t.Fatalf("backend id %d of %s is %s's with its generation %d: the old one's entries would follow it", b.ID, b.Addr, old.Addr, b.Gen)
		}
	}
}

// At the limit of VIPs (MaxVIPs), a reload that moves one VIP to another
// port (a new VIP key: a new id) must build, as on a fresh instance; a
// backend id the reload hands to a new server is a new incarnation.
func TestReloadAtVIPLimitBuilds(t *testing.T) {
	enc := fleetEnc(t)
	specs := fleetSpecs(dataplane.MaxVIPs, 1, 3)
	prev, err := dataplane.NewServices(nil, enc, dataplane.NextHop{}, specs)
	if err != nil {
		t.Fatal(err)
	}
	final := fleetSpecs(dataplane.MaxVIPs, 1, 3)
	final[7].Port, final[7].Key.Port = 8080, 8080
	freshAndReloaded(t, enc, prev, final)
}

// freshAndReloaded builds final as a fresh instance does and as one whose
// last snapshot is prev does, checks that both build and that every slot
// names the same backend address, and returns the reloaded snapshot.
func freshAndReloaded(t *testing.T, enc *encap.Encapsulator, prev *dataplane.Services, final []dataplane.VIPSpec) *dataplane.Services {
	t.Helper()
	fresh, err := dataplane.NewServices(nil, enc, dataplane.NextHop{}, final)
	if err != nil {
		t.Fatalf("fresh instance: %v", err)
	}
	reloaded, err := dataplane.NewServices(prev, enc, dataplane.NextHop{}, final)
	if err != nil {
		t.Fatalf("reloaded instance refuses the configuration a fresh one runs: %v", err)
	}
	sameChoices(t, fresh, reloaded)
	return reloaded
}
