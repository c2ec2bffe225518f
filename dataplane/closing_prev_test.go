package dataplane

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// closingPrevRig is a rig whose VIP's table changed here first: the
// four-backend table F (the fleet's) at t0, then F with be3 made over
// (drained, or down by its checks) at t0+10s, so F is the previous
// table. ports are two client ports whose slot F gives be3, x their
// backend in the table without be3. publish builds a later snapshot.
type closingPrevRig struct {
	*rig
	ports   []uint16
	x       map[uint16]string
	publish func(over map[string]Effective, at time.Time)
	t0      time.Time
}

const closingPrevClient = "198.51.100.9"

func newClosingPrevRig(t *testing.T, be3 Effective) *closingPrevRig {
	t.Helper()
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	c := &closingPrevRig{rig: r, x: map[uint16]string{}, t0: time.Unix(1_000_000, 0)}
	var mb []maglev.Backend
	for _, n := range []string{"be1", "be2", "be4"} {
		mb = append(mb, maglev.Backend{Key: n, Weight: 1})
	}
	tE, err := maglev.Build(mb, maglev.DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	tF := chanceTable(t, 4)
	h := flow.NewHasher(r.key)
	for p := uint16(20000); len(c.ports) < 2; p++ {
		tp, _ := flow.TupleFrom(netip.MustParseAddr(closingPrevClient), netip.MustParseAddr(chanceVIP), p, 80, 6)
		hs := h.Hash(&tp)
		if tF.Backend(tF.Lookup(hs)).Key == "be3" {
			c.ports = append(c.ports, p)
			c.x[p] = tE.Backend(tE.Lookup(hs)).Key
		}
	}
	c.publish = func(over map[string]Effective, at time.Time) {
		t.Helper()
		s, err := NewServicesAt(r.shared.Services.Load(), r.enc, nh, chanceSpecs(4, encap.GRE, chanceWindow, over), at)
		if err != nil {
			t.Fatal(err)
		}
		r.shared.Services.Store(s)
	}
	c.publish(nil, c.t0)                                                  // the fleet's table F
	c.publish(map[string]Effective{"be3": be3}, c.t0.Add(10*time.Second)) // be3 made over here first: F is the previous table
	return c
}

// TestClosingEntryPrevChance: this instance changed its table before the
// fleet did (be3 drained here first), so its previous
// table is the one the other instances still use. A connection C1 placed
// here by the new table on X ended here (closing entry pinned to X, X holds
// C1 in TIME_WAIT). The client reuses the tuple for C2, whose SYN the
// routers sent to the other instance, which placed it by the fleet's table
// on be3; that instance dies and C2's segments come here. They went to the
// pin X (the table names it too) naming nothing, and the first data settled
// the entry on X for good: C2 stalled on X's TIME_WAIT, also after the
// table was back to the fleet's. They must go to be3 naming X (as a closing
// entry whose pin the table does not name goes to the table's choice), for
// the connection's life, its FIN included (sent to X, the FIN would find
// C1's TIME_WAIT, which owns FIN segments). A live connection's forged
// close moves it to be3 too, naming X, whose agent forwards it there: it
// breaks nothing.
func TestClosingEntryPrevChance(t *testing.T) {
	const client = closingPrevClient
	c := newClosingPrevRig(t, Effective{Weight: 0}) // drained here first (an ejection would leave it Unhealthy: never a target)
	r, ports, x, publish, t0 := c.rig, c.ports, c.x, c.publish, c.t0
	send := func(p uint16, what, flags string, data int, wantTo, wantChance netip.Addr) {
		t.Helper()
		out, v := r.run(frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, flags, data, true))
		if v[0] != Tx {
			t.Fatalf("port %d %s: verdict %v", p, what, v[0])
		}
		if d, ch := tunnelChance(t, out[0]); d != wantTo || ch != wantChance {
			t.Fatalf("port %d %s: to %v chance %v, want to %v chance %v", p, what, d, ch, wantTo, wantChance)
		}
	}
	none := netip.Addr{}
	reused, forged := ports[0], ports[1]
	for _, p := range ports {
		for _, seg := range []struct {
			flags string
			data  int
		}{{"S", 0}, {"A", 0}, {"AP", 20}} {
			send(p, "C1 "+seg.flags, seg.flags, seg.data, beAddr(x[p]), none)
		}
	}
	// C1 on the reused port ends here; C2's segments (the fleet placed it
	// on be3) arrive: ACKs, then data, then more.
	send(reused, "C1's FIN", "FA", 0, beAddr(x[reused]), none)
	before := r.w.c.SecondChanceFlows
	for k, seg := range []struct {
		flags string
		data  int
	}{{"A", 0}, {"AP", 40}, {"A", 0}, {"AP", 40}} {
		send(reused, fmt.Sprintf("C2 segment %d %s", k, seg.flags), seg.flags, seg.data, beAddr("be3"), beAddr(x[reused]))
	}
	if got := r.w.c.SecondChanceFlows - before; got != 1 {
		t.Errorf("second_chance_flows counted %d, want 1", got)
	}
	// A forged FIN on the live connection of the other port goes to its
	// pin (the segment that closes an established entry is its
	// connection's); its data after it reopens the entry on be3 naming X.
	send(forged, "a forged FIN", "FA", 0, beAddr(x[forged]), none)
	send(forged, "data after it", "AP", 30, beAddr("be3"), beAddr(x[forged]))
	// The drain ends: this instance's table is the fleet's again. The
	// reopened entries keep their pin and chance, and C2's FIN goes to be3.
	publish(nil, t0.Add(20*time.Second))
	send(reused, "C2 after the table is back", "AP", 40, beAddr("be3"), beAddr(x[reused]))
	send(forged, "the live connection after the table is back", "AP", 30, beAddr("be3"), beAddr(x[forged]))
	send(reused, "C2's FIN", "FA", 0, beAddr("be3"), beAddr(x[reused]))
	send(reused, "C2's last ACK", "A", 0, beAddr("be3"), beAddr(x[reused]))
}
