package dataplane

import (
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/encap"
)

// TestChanceOffStopsCounting: a flow moved here after be4 joined is pinned
// to the table's choice Y and names its previous choice X; X counts it
// among its flows (the drain waits for it). A reload turns the second
// chance off: its packets go to Y alone from the next one
// (docs/second-chance.md, "Turning the second chance off ... stops every
// stored one at once"), so the flow no longer reaches X by any path. X's
// flow count (fulcrumctl backends, the drain's signal) must not go on
// counting it, nor a flush of X drop Y's flow.
func TestChanceOffStopsCounting(t *testing.T) {
	const client = "198.51.100.9"
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	s3, err := NewServicesAt(nil, r.enc, nh, chanceSpecs(3, encap.GRE, chanceWindow, nil), t0)
	if err != nil {
		t.Fatal(err)
	}
	s4, err := NewServicesAt(s3, r.enc, nh, chanceSpecs(4, encap.GRE, chanceWindow, nil), t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(s4)
	moved, _, old, cur := chanceFlows(t, r.key, 1)
	p := moved[0]
	x, y := old[p], cur[p]
	send := func() (string, string) {
		t.Helper()
		out, v := r.run(frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, "AP", 20, true))
		if v[0] != Tx {
			t.Fatalf("verdict %v", v[0])
		}
		d, ch := tunnelChance(t, out[0])
		return fmName(d), fmName(ch)
	}
	if d, ch := send(); d != y || ch != x {
		t.Fatalf("moved flow: to %s naming %s, want to %s naming %s", d, ch, y, x)
	}
	if n := flowsOf(t, r, x); n != 1 {
		t.Fatalf("with the chance on, %s counts %d flows, want 1", x, n)
	}
	// Reload: second chance off (same backends).
	off, err := NewServicesAt(s4, r.enc, nh, chanceSpecs(4, encap.GRE, 0, nil), t0.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(off)
	d, ch := send()
	if d != y || ch != "-" {
		t.Fatalf("chance off: to %s naming %s, want to %s naming nothing", d, ch, y)
	}
	nx, ny := flowsOf(t, r, x), flowsOf(t, r, y)
	t.Logf("chance off: packets to %s naming %s; flows counted: %s %d, %s %d", d, ch, x, nx, y, ny)
	if nx != 0 {
		t.Errorf("second chance off: the flow's packets go to %s alone, but %s still counts %d flows (a drain of %s waits for a flow that never reaches it)", y, x, nx, x)
	}
	// Nor list it among X's connections (fulcrumctl conns --backend).
	var xid uint32
	for _, be := range off.Backends {
		if be != nil && be.Name == x {
			xid = be.ID
		}
	}
	op := ListOp(0, 64, int64(off.VIPs[0].ID), int64(xid))
	op.OfGen(off.Backends[xid].Gen)
	if err := r.w.Post(op); err != nil {
		t.Fatal(err)
	}
	for n := 0; !op.done.Load(); n++ {
		r.w.serveOp(r.now)
		if n > r.w.ct.Buckets()+2 {
			t.Fatal("list does not finish")
		}
	}
	if len(op.Conns) != 0 {
		t.Errorf("second chance off: %s lists %d connections of %s", x, len(op.Conns), y)
	}
}

// TestChanceUncarriableStopsCounting: a GUE VIP gives a moved flow a
// second chance naming be2, an IPv6 backend; a reload moves the VIP to
// GRE, whose key cannot name an IPv6 backend, so the flow's packets go to
// its pin alone (chanceTarget). be2 must no longer count it among its
// flows, as a flow first seen under GRE is never counted for it.
func TestChanceUncarriableStopsCounting(t *testing.T) {
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	s0, err := NewServicesAt(nil, r.enc, nh, mixedChanceSpecs(3, encap.GUE), t0)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := NewServicesAt(s0, r.enc, nh, mixedChanceSpecs(4, encap.GUE), t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(s1)
	moved, _, old, _ := chanceFlows(t, r.key, 64)
	var p uint16
	for _, q := range moved {
		if old[q] == "be2" {
			p = q
			break
		}
	}
	if p == 0 {
		t.Fatal("no moved flow from be2")
	}
	send := func() {
		t.Helper()
		if _, v := r.run(frame(t, "198.51.100.9", chanceVIP, p, 80, layers.IPProtocolTCP, "AP", 20, true)); v[0] != Tx {
			t.Fatalf("verdict %v", v[0])
		}
	}
	send()
	if n := flowsOf(t, r, "be2"); n != 1 {
		t.Fatalf("GUE: be2 counts %d flows, want 1 (its second chance)", n)
	}
	s2, err := NewServicesAt(s1, r.enc, nh, mixedChanceSpecs(4, encap.GRE), t0.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(s2)
	send()
	if n := flowsOf(t, r, "be2"); n != 0 {
		t.Errorf("GRE now: the flow's packets cannot name be2 (IPv6), yet be2 counts %d flows", n)
	}
}
