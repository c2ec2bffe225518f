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

// TestReusedTupleAfterClose: a connection C0 ended here (its client's FIN
// or RST seen, the entry closing, pinned to X by an older table); the
// client reuses the tuple for a new connection C1 whose SYN the routers
// sent to another instance, which placed it by the fleet's current table
// on Y; then ECMP moves the tuple here (that instance died). C1's segments
// find C0's closing entry: its ACKs (a download sends nothing else) leave
// it closing, and its first data makes it established again (conntrack: a
// segment after a FIN with data, any after an RST alone, shows a forged
// close). Sent to X they stall C1 for good: X holds C0 in TIME_WAIT, which
// answers with ACKs of its own (the fleet lab lost 1-4 of 200 connections
// so). With the second chance on, they go to the table's choice Y naming
// X, and the first data repins the entry there: Y delivers C1, and a
// connection whose close was forged is forwarded by Y's agent to X, which
// has it. The same when all of C1's segments arrive in one receive burst.
// Without the second chance, or where the tunnel cannot name X (IPIP),
// the pin stays.
func TestReusedTupleAfterClose(t *testing.T) {
	const client = "198.51.100.9"
	for _, tc := range []struct {
		name   string
		kind   encap.Kind
		window time.Duration
		close  string // C0's last segment seen here
		moved  bool   // the pin and the table disagree
	}{
		{"gre fin", encap.GRE, chanceWindow, "FA", true},
		{"gue rst alone", encap.GUE, chanceWindow, "R", true},
		{"gre same backend", encap.GRE, chanceWindow, "FA", false},
		{"gre no second chance", encap.GRE, 0, "FA", true},
		{"ipip", encap.IPIP, chanceWindow, "FA", true},
	} {
		for _, burst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s burst=%v", tc.name, burst), func(t *testing.T) {
				r := newRig(t, testConfig)
				nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
				t0 := time.Unix(1_000_000, 0)
				s3, err := NewServicesAt(nil, r.enc, nh, chanceSpecs(3, tc.kind, tc.window, nil), t0)
				if err != nil {
					t.Fatal(err)
				}
				r.shared.Services.Store(s3)
				moved, kept, old, cur := chanceFlows(t, r.key, 1)
				p := kept[0]
				if tc.moved {
					p = moved[0]
				}
				x, y := old[p], cur[p]
				send := func(what, flags string, data int) (dst, chance netip.Addr) {
					t.Helper()
					out, v := r.run(frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, flags, data, true))
					if v[0] != Tx {
						t.Fatalf("%s: verdict %v", what, v[0])
					}
					if tc.kind == encap.IPIP {
						d, _, _ := decodeTunnel(t, out[0])
						return d, netip.Addr{}
					}
					return tunnelChance(t, out[0])
				}
				// C0, placed by the three-backend table on x, ends here.
				for _, seg := range []struct {
					flags string
					data  int
				}{{"S", 0}, {"A", 0}, {"AP", 20}, {tc.close, 0}} {
					if d, _ := send("C0 "+seg.flags, seg.flags, seg.data); d != beAddr(x) {
						t.Fatalf("C0 %s: to %v, want %s", seg.flags, d, x)
					}
				}
				// be4 joins: the fleet's table now places the tuple on y.
				s4, err := NewServicesAt(s3, r.enc, nh, chanceSpecs(4, tc.kind, tc.window, nil), t0.Add(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				r.shared.Services.Store(s4)
				wantTo, wantChance := beAddr(x), netip.Addr{}
				if tc.moved && tc.window > 0 && tc.kind != encap.IPIP {
					wantTo, wantChance = beAddr(y), beAddr(x)
				}
				if !tc.moved {
					wantTo = beAddr(y) // x == y
				}
				before := r.w.c.SecondChanceFlows
				// C1's segments, here for the first time: ACKs of the
				// server's data first (a download sends nothing else; after a
				// FIN they leave the entry closing), then data (which makes
				// it established again), then hits (the fused path); one by
				// one, or all in one receive burst.
				c1 := []struct {
					flags string
					data  int
				}{{"A", 0}, {"A", 0}, {"AP", 40}, {"AP", 40}, {"A", 0}}
				if burst {
					var frames [][]byte
					for _, seg := range c1 {
						frames = append(frames, frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, seg.flags, seg.data, true))
					}
					out, v := r.run(frames...)
					for k, seg := range c1 {
						if v[k] != Tx {
							t.Fatalf("C1 segment %d %s in one burst: verdict %v", k, seg.flags, v[k])
						}
						d, ch := tunnelChance(t, out[k])
						if tc.kind == encap.IPIP {
							d, _, _ = decodeTunnel(t, out[k])
						}
						if d != wantTo || ch != wantChance {
							t.Fatalf("C1 segment %d %s in one burst (pin %s, table %s): to %v chance %v, want to %v chance %v", k, seg.flags, x, y, d, ch, wantTo, wantChance)
						}
					}
				} else {
					for k, seg := range c1 {
						if d, ch := send(fmt.Sprintf("C1 segment %d", k), seg.flags, seg.data); d != wantTo || ch != wantChance {
							t.Fatalf("C1 segment %d %s (pin %s, table %s): to %v chance %v, want to %v chance %v", k, seg.flags, x, y, d, ch, wantTo, wantChance)
						}
					}
				}
				if got, want := r.w.c.SecondChanceFlows-before, uint64(0); wantChance.IsValid() {
					if got != 1 {
						t.Errorf("second_chance_flows counted %d, want 1", got)
					}
				} else if got != want {
					t.Errorf("second_chance_flows counted %d, want 0", got)
				}
			})
		}
	}
}

// TestClosedFlowKeepsItsSecondChance: a flow that moved here after a table
// change has a second chance stored (the previous table's choice, which
// has the connection); a forged FIN, then its data, leave the pin and
// that chance alone however the table has changed since: the entry can
// name one other backend only, and it must stay the one that has the
// connection (a probe of two instances broke it by renaming the chance).
func TestClosedFlowKeepsItsSecondChance(t *testing.T) {
	const client = "198.51.100.9"
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	heavy := map[string]Effective{"be1": {Weight: 3}}
	var mb []maglev.Backend
	for i := 1; i <= 4; i++ {
		mb = append(mb, maglev.Backend{Key: fmt.Sprintf("be%d", i), Weight: map[bool]uint32{true: 3, false: 1}[i == 1]})
	}
	t5, err := maglev.Build(mb, maglev.DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	moved, _, old, cur := chanceFlows(t, r.key, 400)
	h := flow.NewHasher(r.key)
	p := uint16(0)
	for _, q := range moved {
		tp, _ := flow.TupleFrom(netip.MustParseAddr(client), netip.MustParseAddr(chanceVIP), q, 80, 6)
		if z := t5.Backend(t5.Lookup(h.Hash(&tp))).Key; z != cur[q] && z != old[q] {
			p = q
			break
		}
	}
	if p == 0 {
		t.Fatal("no port whose three tables all differ")
	}
	var prev *Services
	for k, spec := range [][]VIPSpec{chanceSpecs(3, encap.GRE, chanceWindow, nil), chanceSpecs(4, encap.GRE, chanceWindow, nil)} {
		s, err := NewServicesAt(prev, r.enc, nh, spec, t0.Add(time.Duration(k)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		r.shared.Services.Store(s)
		prev = s
	}
	send := func(what, flags string, data int) {
		t.Helper()
		out, v := r.run(frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, flags, data, true))
		if v[0] != Tx {
			t.Fatalf("%s: verdict %v", what, v[0])
		}
		if d, ch := tunnelChance(t, out[0]); d != beAddr(cur[p]) || ch != beAddr(old[p]) {
			t.Fatalf("%s: to %v chance %v, want to %s chance %s (the flow's pin and stored chance)", what, d, ch, cur[p], old[p])
		}
	}
	send("a mid-connection segment after be4 joined", "AP", 30)
	s5, err := NewServicesAt(prev, r.enc, nh, chanceSpecs(4, encap.GRE, chanceWindow, heavy), t0.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(s5)
	send("after be1's weight rose", "AP", 30)
	send("a forged FIN", "FA", 0)
	send("an ACK after it", "A", 0)
	send("data after it", "AP", 30)
	send("data again (a hit)", "AP", 30)
}
