package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// TestClosingPrevChoiceUnhealthy: be3 died; every instance's checks
// eject it (on_down "keep", the default: Unhealthy, weight 0, not Down),
// so for the whole window the previous table names the dead be3 where the
// current one names X. A connection placed on X after the ejection is
// live on X. A blind attacker's forged FIN (the 5-tuple is enough), then
// the connection's own next data: the data reopens the entry, and it must
// stay on X (a forged close never breaks a connection). A client's
// half-closed download (its real FIN, then its ACKs of the server's data)
// must reach X too. Neither may be sent to a backend the checks call down.
func TestClosingPrevChoiceUnhealthy(t *testing.T) {
	const client = "198.51.100.9"
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	dead := map[string]Effective{"be3": {Weight: 0, Unhealthy: true}}
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
	var ports []uint16
	x := map[uint16]string{}
	for p := uint16(20000); len(ports) < 2; p++ {
		tp, _ := flow.TupleFrom(netip.MustParseAddr(client), netip.MustParseAddr(chanceVIP), p, 80, 6)
		hs := h.Hash(&tp)
		if tF.Backend(tF.Lookup(hs)).Key == "be3" {
			ports = append(ports, p)
			x[p] = tE.Backend(tE.Lookup(hs)).Key
		}
	}
	for _, at := range []struct {
		over map[string]Effective
		t    time.Time
	}{{nil, t0}, {dead, t0.Add(10 * time.Second)}} {
		s, err := NewServicesAt(r.shared.Services.Load(), r.enc, nh, chanceSpecs(4, encap.GRE, chanceWindow, at.over), at.t)
		if err != nil {
			t.Fatal(err)
		}
		r.shared.Services.Store(s)
	}
	none := netip.Addr{}
	send := func(p uint16, what, flags string, data int) {
		t.Helper()
		out, v := r.run(frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, flags, data, true))
		if v[0] != Tx {
			t.Fatalf("port %d %s: verdict %v", p, what, v[0])
		}
		if d, ch := tunnelChance(t, out[0]); d != beAddr(x[p]) || ch != none {
			t.Errorf("port %d %s: to %v chance %v, want to %v (the connection's backend) chance none", p, what, d, ch, beAddr(x[p]))
		}
	}
	forged, halfClosed := ports[0], ports[1]
	for _, p := range ports {
		send(p, "SYN", "S", 0)
		send(p, "ACK", "A", 0)
		send(p, "data", "AP", 20)
	}
	send(forged, "a forged FIN", "FA", 0)
	send(forged, "the connection's data after the forged FIN", "AP", 30)
	send(forged, "the connection's next data", "AP", 30)
	send(halfClosed, "the client's FIN (half-close)", "FA", 0)
	for k := 0; k < 3; k++ {
		send(halfClosed, "the client's ACK of the download", "A", 0)
	}
}
