package dataplane

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
)

// Attacks on, and odd configurations of, the second chance
// (docs/second-chance.md).

// mixedChanceSpecs is chanceSpecs with be2 and be4 on IPv6 (a GRE VIP may
// mix families: the outer header follows each backend's).
func mixedChanceSpecs(n int, kind encap.Kind) []VIPSpec {
	s := chanceSpecs(n, kind, chanceWindow, nil)
	for i := range s[0].Backends {
		if i%2 == 1 {
			s[0].Backends[i].Addr = netip.MustParseAddr(fmt.Sprintf("2001:db8:9::%d", i+1))
		}
	}
	return s
}

// A flow whose previous choice is a backend its VIP's tunnel cannot name
// (GRE and an IPv6 backend: the key holds 32 bits) goes without, as
// docs/second-chance.md says; it is then not counted as a flow given a
// second chance and its conntrack entry stores none (every later packet,
// fused hits included, would otherwise look it up for nothing). A flow
// whose previous choice is an IPv4 backend of the same VIP is given one.
// GUE can name both.
func TestSecondChanceNotCarriedNotGiven(t *testing.T) {
	for _, kind := range []encap.Kind{encap.GRE, encap.GUE} {
		t.Run(kind.String(), func(t *testing.T) {
			r := newRig(t, testConfig)
			nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
			t0 := time.Unix(1_000_000, 0)
			s0, err := NewServicesAt(nil, r.enc, nh, mixedChanceSpecs(3, kind), t0)
			if err != nil {
				t.Fatal(err)
			}
			s1, err := NewServicesAt(s0, r.enc, nh, mixedChanceSpecs(4, kind), t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			r.shared.Services.Store(s1)
			moved, _, old, _ := chanceFlows(t, r.key, 64)
			var to6, to4 uint16 // a moved flow whose previous choice is be2 (IPv6), one whose is be1 or be3 (IPv4)
			for _, p := range moved {
				switch {
				case old[p] == "be2" && to6 == 0:
					to6 = p
				case old[p] != "be2" && to4 == 0:
					to4 = p
				}
			}
			if to6 == 0 || to4 == 0 {
				t.Fatalf("no moved flow from be2 (%d) or from be1/be3 (%d)", to6, to4)
			}
			entryChanceOf := func(port uint16) (has bool) {
				r.w.ct.ForEach(func(e *conntrack.Entry) {
					if e.Key().SrcPort == port {
						_, has = e.Chance()
					}
				})
				return has
			}
			carries := func(port uint16) int {
				before := r.w.c.SecondChance
				for range 3 { // a miss, then hits (the last fused)
					if _, v := r.run(frame(t, "198.51.100.9", chanceVIP, port, 80, layers.IPProtocolTCP, "A", 10, true)); v[0] != Tx {
						t.Fatalf("port %d: verdict %v", port, v[0])
					}
				}
				return int(r.w.c.SecondChance - before)
			}
			// From be2, an IPv6 backend.
			n6 := carries(to6)
			want6 := map[encap.Kind]int{encap.GRE: 0, encap.GUE: 3}[kind]
			if n6 != want6 || r.w.c.SecondChanceFlows != uint64(want6/3) || entryChanceOf(to6) != (want6 != 0) {
				t.Errorf("previous choice IPv6: %d packets carried it, SecondChanceFlows %d, entry has one %v; want %d, %d, %v",
					n6, r.w.c.SecondChanceFlows, entryChanceOf(to6), want6, want6/3, want6 != 0)
			}
			// From an IPv4 backend: given and carried either way.
			flows := r.w.c.SecondChanceFlows
			if n4 := carries(to4); n4 != 3 || r.w.c.SecondChanceFlows != flows+1 || !entryChanceOf(to4) {
				t.Errorf("previous choice IPv4: %d packets carried it, SecondChanceFlows +%d, entry has one %v; want 3, +1, true",
					n4, r.w.c.SecondChanceFlows-flows, entryChanceOf(to4))
			}
		})
	}
}

// A moved flow's IPv4 packet without DF that fits the MTU only without
// the second-chance field is forwarded without it (no ICMP can make its
// sender send less; a drop would lose every such packet of the flow) and
// is not counted as carrying one; with DF it is answered with the MTU
// that leaves room for the field, as before.
func TestSecondChanceNoDFTooBigGoesWithout(t *testing.T) {
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	s0, err := NewServicesAt(nil, r.enc, nh, chanceSpecs(3, encap.GRE, chanceWindow, nil), t0)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := NewServicesAt(s0, r.enc, nh, chanceSpecs(4, encap.GRE, chanceWindow, nil), t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(s1)
	moved, _, _, _ := chanceFlows(t, r.key, 64)
	if len(moved) < 2 {
		t.Fatalf("%d moved flows, want 2", len(moved))
	}
	mtu := r.enc.Config().MTU
	payload := mtu - encap.Overhead(encap.GRE, false) - 40 // IPv4 + TCP headers: fits exactly without the field
	c := &r.w.c
	for k, df := range []bool{false, true} {
		port := moved[k]
		before, fwd := c.SecondChance, c.Encap[encap.Forward]
		for range 3 { // a miss, then hits (the fused path hands them to the general one)
			_, v := r.run(frame(t, "198.51.100.9", chanceVIP, port, 80, layers.IPProtocolTCP, "A", payload, df))
			switch {
			case !df && v[0] != Tx:
				t.Fatalf("no DF: verdict %v, want tx", v[0])
			case df && v[0] != Tx: // the ICMP reply goes out too
				t.Fatalf("DF: verdict %v", v[0])
			}
		}
		if got := c.SecondChance - before; got != 0 {
			t.Errorf("df %v: %d packets counted as carrying a second chance, want 0", df, got)
		}
		if got, want := c.Encap[encap.Forward]-fwd, map[bool]uint64{false: 3, true: 0}[df]; got != want {
			t.Errorf("df %v: %d forwarded, want %d", df, got, want)
		}
	}
	wantBalance(t, r)
}
