package control

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// A connection's second chance (the backend its tunnel header names,
// docs/second-chance.md) is shown by name, as the operator needs it to
// tell where a moved or reopened flow's packets may end up; an id that is
// no longer a backend of the VIP shows as "?", and none as nothing.
func TestConnShowsSecondChance(t *testing.T) {
	f := newFixture(t, baseConfig)
	svc := f.shared.Services.Load()
	v := svc.VIPs[0]
	var ids []uint32
	for _, id := range v.Members {
		ids = append(ids, id)
	}
	if len(ids) < 2 {
		t.Fatalf("VIP %s has %d backends, want 2 or more", v.Name, len(ids))
	}
	pin, other := ids[0], ids[1]
	for _, tc := range []struct {
		name string
		e    dataplane.ConnEntry
		want string
	}{
		{"none", dataplane.ConnEntry{VIP: v.ID, Backend: pin, Gen: svc.Backends[pin].Gen}, ""},
		{"another backend of the VIP", dataplane.ConnEntry{VIP: v.ID, Backend: pin, Gen: svc.Backends[pin].Gen, Chance: other, HasChance: true}, svc.Backends[other].Name},
		{"an id past the backends", dataplane.ConnEntry{VIP: v.ID, Backend: pin, Gen: svc.Backends[pin].Gen, Chance: uint32(len(svc.Backends)) + 7, HasChance: true}, "?"},
	} {
		if got := connOf(svc, &tc.e, 0).SecondChance; got != tc.want {
			t.Errorf("%s: second chance %q, want %q", tc.name, got, tc.want)
		}
	}
}
