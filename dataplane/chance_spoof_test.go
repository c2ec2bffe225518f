package dataplane

// The second chance under a spoofer, a drain and a flapping backend:
// the client's close on an established entry, a forged SYN on a flow
// with a second chance, and a drained backend's flows that reach it
// through one.

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
)

// chanceTwin is a twin (fused and general workers) given chanceSpecs(3) at
// t0, with a connection opened on port p (placed on its 3-backend
// choice), then chanceSpecs(4) (be4 joins) at t0+10s.
func chanceTwin(t *testing.T, kind encap.Kind, window time.Duration) (tw *twin, p uint16, old, cur string) {
	tw = newTwin(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	s3, err := NewServicesAt(nil, tw.fast.enc, nh, chanceSpecs(3, kind, window, nil), t0)
	if err != nil {
		t.Fatal(err)
	}
	s4, err := NewServicesAt(s3, tw.fast.enc, nh, chanceSpecs(4, kind, window, nil), t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*rig{tw.fast, tw.slow} {
		r.shared.Services.Store(s3)
	}
	moved, _, o, c := chanceFlows(t, tw.fast.key, 1)
	p = moved[0]
	for k, fl := range []string{"S", "A", "AP"} {
		tw.burst(fmt.Sprintf("open %d", k), [][]byte{frame(t, "198.51.100.9", chanceVIP, p, 80, layers.IPProtocolTCP, fl, map[bool]int{true: 20}[fl == "AP"], true)})
		tw.fast.now += 10
		tw.slow.now += 10
	}
	tw.same("open")
	for _, r := range []*rig{tw.fast, tw.slow} {
		r.shared.Services.Store(s4)
	}
	return tw, p, o[p], c[p]
}

// TestChanceFINOnEstablishedSamePaths: a connection placed on X by the
// table before be4 joined (its slot now names Y), its entry established
// here. The client's FIN arrives: the fused path sends it to the pin X
// (fuse checks "closing" before TouchSegment makes the entry closing), the
// general path to the table's choice Y naming X (selectBackend touches
// first, then closingChance sees a closing entry). The two paths must
// give the same frame.
func TestChanceFINOnEstablishedSamePaths(t *testing.T) {
	for _, kind := range []encap.Kind{encap.GRE, encap.GUE} {
		for _, fl := range []string{"FA", "R", "RA", "FPA"} {
			t.Run(kind.String()+"/"+fl, func(t *testing.T) {
				tw, p, x, y := chanceTwin(t, kind, chanceWindow)
				f := frame(t, "198.51.100.9", chanceVIP, p, 80, layers.IPProtocolTCP, fl, 0, true)
				// What each path does with it, decoded.
				var got [2]string
				for k, r := range []*rig{tw.fast, tw.slow} {
					out, v := r.run(f)
					if v[0] != Tx {
						t.Fatalf("verdict %v", v[0])
					}
					d, ch := tunnelChance(t, out[0])
					got[k] = fmt.Sprintf("to %s naming %s", fmName(d), fmName(ch))
				}
				t.Logf("pin %s, table %s: fused %s, general %s", x, y, got[0], got[1])
				if got[0] != got[1] {
					t.Errorf("the client's %s on an established entry (pin %s, table %s): fused path %s, general path %s", fl, x, y, got[0], got[1])
				}
			})
		}
	}
}

// flowsOf is the worker's count of flows in use by backend name (the
// drain's signal: fulcrumctl backends' flows, CountFlowsOp).
func flowsOf(t *testing.T, r *rig, name string) uint32 {
	t.Helper()
	op := CountFlowsOp()
	if err := r.w.Post(op); err != nil {
		t.Fatal(err)
	}
	for n := 0; !op.done.Load(); n++ {
		r.w.serveOp(r.now)
		if n > r.w.ct.Buckets()+2 {
			t.Fatal("count does not finish")
		}
	}
	svc := r.shared.Services.Load()
	for _, be := range svc.Backends {
		if be != nil && be.Name == name {
			return op.Flows[be.ID]
		}
	}
	t.Fatalf("no backend %s", name)
	return 0
}

// TestChanceDrainCountsTheChance: a connection on X; X is
// drained (weight 0: no slot, its flows stay). A blind spoofer forges an
// RST alone (or a FIN) on its tuple, and the client, which knows nothing
// of it, sends its next data. The entry is established again (the close
// shown forged) and, since the table no longer names X (it never names a
// drained backend), reopened repins it to the table's choice Y with X as
// its second chance: its packets still reach X (Y's agent forwards
// them), but the drain's count (flows in use by pin) says X holds nothing
// while the connection is in active use, and "it is safe to stop when
// they reach 0" (README, Drain). Without the second chance the pin stays
// on X and it is counted there. The same with a client's real FIN and a
// late retransmission of data sent before it.
func TestChanceDrainCountsTheChance(t *testing.T) {
	const client = "198.51.100.9"
	for _, c := range []struct {
		name   string
		window time.Duration
		close  string // the close segment (forged or the client's)
	}{
		{"chance on, forged RST", chanceWindow, "R"},
		{"chance on, forged FIN", chanceWindow, "FA"},
		{"chance off, forged RST", 0, "R"},
		{"chance off, forged FIN", 0, "FA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testConfig)
			nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
			t0 := time.Unix(1_000_000, 0)
			s3, err := NewServicesAt(nil, r.enc, nh, chanceSpecs(3, encap.GRE, c.window, nil), t0)
			if err != nil {
				t.Fatal(err)
			}
			r.shared.Services.Store(s3)
			_, kept, old, _ := chanceFlows(t, r.key, 1)
			p := kept[0]
			x := old[p]
			send := func(fl string, data int) (string, string) {
				t.Helper()
				out, v := r.run(frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, fl, data, true))
				if v[0] != Tx {
					t.Fatalf("%s: verdict %v", fl, v[0])
				}
				d, ch := tunnelChance(t, out[0])
				return fmName(d), fmName(ch)
			}
			for _, s := range []struct {
				fl string
				n  int
			}{{"S", 0}, {"A", 0}, {"AP", 20}} {
				send(s.fl, s.n)
			}
			// X drained (weight 0, not down).
			s3d, err := NewServicesAt(s3, r.enc, nh, chanceSpecs(3, encap.GRE, c.window, map[string]Effective{x: {Weight: 0}}), t0.Add(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			r.shared.Services.Store(s3d)
			if d, _ := send("AP", 20); d != x {
				t.Fatalf("drained: data to %s, want its pin %s", d, x)
			}
			if n := flowsOf(t, r, x); n != 1 {
				t.Fatalf("drained %s counts %d flows, want 1", x, n)
			}
			send(c.close, 0) // forged
			// The client goes on: data, data, ACKs, within 10 s.
			var to, named string
			for k := range 5 {
				to, named = send("AP", 100)
				_ = k
			}
			got := flowsOf(t, r, x)
			t.Logf("pin %s drained; after the forged %s and the client's data: packets to %s naming %s, %s counts %d flows", x, c.close, to, named, x, got)
			if got != 1 {
				t.Errorf("the client's connection, in active use on drained %s (packets to %s naming %s), counts %d flows on %s: the drain reads 0 and the operator may stop it", x, to, named, got, x)
			}
		})
	}
}

// fleetScenario runs steps on a fresh fleet (second chance on unless window
// is 0), both instances on the fused path or both on the general path
// alone, and returns the breaks and the trace.
func fleetScenario(t *testing.T, base *rig, snaps *fmSnaps, window time.Duration, general bool, vers []*fmVersion, pick func([]string) bool, steps []fmStep) (breaks, trace []string, port uint16, choices []string) {
	t.Helper()
	port, choices = fmPort(t, base.key, vers, pick)
	f := newFleet(t, base, snaps, encap.GRE, window, vers, port, choices)
	for _, r := range f.lbs {
		r.w.generalOnly = general
	}
	for _, st := range steps {
		f.step(st)
	}
	return f.breaks, f.trace, port, choices
}

// TestChanceFlapReuseFIN: be4 holds the tuple's slot; C0 runs on be4 through
// A and ends (server TIME_WAIT, 60 s on Linux). be4 leaves the table
// (health down, or removed) and the client reuses the tuple for C1
// within the TIME_WAIT: A's closing entry takes C1's SYN to the table's
// choice X. be4 comes back 10 s later: the table names be4 again. C1's
// FIN (a client that shuts down its side to end its request, then reads
// the answer) arrives on A's established entry pinned to X. No instance
// moved, no packet was lost.
//
// The general path sends the FIN to the table's choice, be4, naming X
// (closingChance: TouchSegment has made the entry closing); be4's agent
// finds C0's TIME_WAIT, which owns FIN and RST segments, and delivers it
// there: C1's FIN never reaches X (its TIME_WAIT answers with its own
// ACK), and every retransmission of it goes the same way. The fused path
// sends the first FIN to X (fuse looks at the state before the touch), so
// whether C1 closes depends on which path the burst took; its
// retransmission (the first FIN's ACK lost), on a closing entry, takes
// the general path on both and is swallowed too. Without the second
// chance the FIN goes to X on both paths and C1 survives.
func TestChanceFlapReuseFIN(t *testing.T) {
	base := newRig(t, testConfig)
	snaps := &fmSnaps{enc: base.enc, m: map[string]*Services{}}
	vers := []*fmVersion{fmV4, fmV3, fmV4}
	pick := func(c []string) bool { return c[0] == "be4" && c[2] == "be4" }
	c0 := []fmStep{fmTx(lbA, 0, "S"), fmTx(lbA, 0, "A"), fmTx(lbA, 0, "AP:20"), fmTx(lbA, 0, "FA"), fmTx(lbA, 0, "A"), fmSrvEnd(0, true)}
	c1 := []fmStep{fmPub(1, 10*time.Second), fmTx(lbA, 1, "S"), fmTx(lbA, 1, "A"), fmTx(lbA, 1, "AP:40"), fmPub(2, 20*time.Second), fmTx(lbA, 1, "AP:40")}
	for _, c := range []struct {
		name    string
		window  time.Duration
		general bool
		end     []fmStep
		want    bool // survives
	}{
		{"on, fused, FIN", chanceWindow, false, []fmStep{fmTx(lbA, 1, "FA"), fmTx(lbA, 1, "A")}, true},
		{"on, general, FIN", chanceWindow, true, []fmStep{fmTx(lbA, 1, "FA"), fmTx(lbA, 1, "A")}, true},
		// A retransmission of the FIN (its ACK lost) finds the entry
		// closing, pinned to X while the table names be4: it goes to be4
		// naming X, and be4's agent gives it to C0's TIME_WAIT, which
		// owns FIN segments. Documented (docs/second-chance.md, "What it
		// does not do"): the agent cannot tell C0's last FIN from C1's.
		{"on, fused, FIN retransmitted", chanceWindow, false, []fmStep{fmTx(lbA, 1, "FA"), fmTx(lbA, 1, "FA"), fmTx(lbA, 1, "A")}, false},
		{"on, fused, FIN with data retransmitted", chanceWindow, false, []fmStep{fmTx(lbA, 1, "FPA:10"), fmTx(lbA, 1, "FPA:10")}, false},
		{"on, fused, FIN with data", chanceWindow, false, []fmStep{fmTx(lbA, 1, "FPA:10"), fmTx(lbA, 1, "A")}, true},
		{"off, general, FIN retransmitted", 0, true, []fmStep{fmTx(lbA, 1, "FA"), fmTx(lbA, 1, "FA"), fmTx(lbA, 1, "A")}, true},
		{"off, fused, FIN retransmitted", 0, false, []fmStep{fmTx(lbA, 1, "FA"), fmTx(lbA, 1, "FA"), fmTx(lbA, 1, "A")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			breaks, trace, port, choices := fleetScenario(t, base, snaps, c.window, c.general, vers, pick, seq(c0, c1, c.end))
			if (len(breaks) == 0) != c.want {
				t.Errorf("port %d choices %v: broken:\n  %s\ntrace:\n%s", port, choices, joinLines(breaks), joinLines(trace))
			} else {
				t.Logf("port %d choices %v: trace:\n%s", port, choices, joinLines(trace))
			}
		})
	}
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += l + "\n"
	}
	return out
}

// forgedSYN sends a blind spoofer's SYN on the fleet's tuple through
// instance lb and applies what the backend's stack does with it, which
// the fleet model leaves out (it takes every forged segment to be
// ignored): a SYN tunnelled to a backend with no socket for the tuple
// reaches its listener, which opens a half-open connection (SYN_RECV, a
// request socket in the established hash) and answers with a SYN-ACK to
// the client. fulcrum-decap counts SYN_RECV as an owner
// (cmd/fulcrum-decap/sockdiag_linux.go: anything but LISTEN, CLOSE and a
// TIME_WAIT for a non-closing segment), so until the request socket
// expires (the SYN-ACK's retries: about 63 s; the spoofer sends again)
// the client's segments tunnelled there are delivered to it instead of
// forwarded to the backend named in the tunnel; the model counts that as
// another connection's socket (conn -1). It returns the backend the SYN
// went to.
func forgedSYN(f *fmFleet, lb int) string {
	f.t.Helper()
	r := f.lbs[lb]
	out, v := r.run(frame(f.t, fmClient, chanceVIP, f.port, 80, layers.IPProtocolTCP, "S", 0, true))
	if v[0] != Tx {
		f.trace = append(f.trace, fmt.Sprintf("  forged S via %s: verdict %v", fmLBName[lb], v[0]))
		return "-"
	}
	dst, ch := tunnelChance(f.t, out[0])
	what := "an established socket's challenge ACK (ignored)"
	if k := f.socks[dst]; k != nil && k.st == fmNone {
		*k = fmSock{st: fmEst, conn: -1}
		what = "no socket: the listener opens a half-open connection (SYN_RECV) on the tuple"
	}
	f.trace = append(f.trace, fmt.Sprintf("  forged S     via %s -> %s chance %s: %s", fmLBName[lb], fmName(dst), fmName(ch), what))
	return fmName(dst)
}

// TestChanceForgedSYNKeptOnTheChance: a SYN on a live entry keeps the
// entry's pin (README: "spoofed SYNs cannot move it, however many";
// docs/second-chance.md: "a SYN on an established flow leaves it (the
// flow keeps its pin: the SYN may be spoofed, and the connection lives
// on)"). That is safe when the pin holds the connection, whose socket
// answers a SYN with a challenge ACK. But an entry with a second chance
// is pinned to the backend that does NOT hold the connection (the
// table's choice; the connection is on the chance, reached through the
// pin's agent). One forged SYN, kept on that pin, reaches its listener,
// which opens a half-open connection on the tuple; the agent then finds
// an owner (SYN_RECV) for every later segment of the real connection and
// delivers them there instead of forwarding them to the chance: the
// connection stalls (each is answered by the request socket, out of
// window) for as long as the request socket lives, and for good if the
// spoofer repeats the SYN. The same SYN on an entry without a second
// chance (control, "no chance") is harmless.
func TestChanceForgedSYNKeptOnTheChance(t *testing.T) {
	base := newRig(t, testConfig)
	snaps := &fmSnaps{enc: base.enc, m: map[string]*Services{}}
	vAdd := []*fmVersion{fmV3, fmV4}
	open := []fmStep{fmTx(lbA, 0, "S"), fmTx(lbA, 0, "A"), fmTx(lbA, 0, "AP:20")}
	change := fmPub(1, fmChange)
	for _, c := range []struct {
		name   string
		pick   func([]string) bool
		before []fmStep // up to the forged SYN
		lb     int      // the SYN's instance
		after  []fmStep
	}{
		// The flow moved to B after be4 joined: B pins it to be4 (or
		// whichever the new table names) with the old backend as its
		// second chance.
		{"moved to B with its chance", fmMoved, seq(open, change, fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A")), lbB,
			[]fmStep{fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A")}},
		// The flow stays on A; a forged RST alone, then the client's
		// next segment: reopened repins A's entry to the table's choice
		// with the old pin as the chance.
		{"on A, forged RST reopened", fmMoved, seq(open, change, fmForge(lbA, "R"), fmTx(lbA, 0, "AP:30")), lbA,
			[]fmStep{fmTx(lbA, 0, "AP:30"), fmTx(lbA, 0, "A")}},
		// The same with a forged FIN.
		{"on A, forged FIN reopened", fmMoved, seq(open, change, fmForge(lbA, "FA"), fmTx(lbA, 0, "AP:30")), lbA,
			[]fmStep{fmTx(lbA, 0, "AP:30"), fmTx(lbA, 0, "A")}},
		// Control: the flow on A after the change, no chance: the SYN
		// goes to the pin, which holds the connection.
		{"no chance (control)", fmMoved, seq(open, change, fmTx(lbA, 0, "AP:30")), lbA,
			[]fmStep{fmTx(lbA, 0, "AP:30"), fmTx(lbA, 0, "A")}},
	} {
		for _, general := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/general=%v", c.name, general), func(t *testing.T) {
				port, choices := fmPort(t, base.key, vAdd, c.pick)
				f := newFleet(t, base, snaps, encap.GRE, chanceWindow, vAdd, port, choices)
				for _, r := range f.lbs {
					r.w.generalOnly = general
				}
				for _, st := range c.before {
					f.step(st)
				}
				if len(f.breaks) > 0 {
					t.Fatalf("broken before the SYN:\n%s", joinLines(f.trace))
				}
				kept := f.lbs[c.lb].w.c.SYNKept
				to := forgedSYN(f, c.lb)
				if f.lbs[c.lb].w.c.SYNKept != kept+1 {
					t.Fatalf("the forged SYN was not kept on the pin (to %s)", to)
				}
				for _, st := range c.after {
					f.step(st)
				}
				if len(f.breaks) > 0 {
					t.Errorf("port %d choices %v: one forged SYN broke the connection:\n  %s\ntrace:\n%s", port, choices, joinLines(f.breaks), joinLines(f.trace))
				}
			})
		}
	}
}

// TestChanceFlowsCountedWhenStored: a moved flow whose conntrack insert
// failed gets its second chance decided again at every packet; it is a
// flow given one only once stored in an entry (second_chance_flows), not
// once a packet.
func TestChanceFlowsCountedWhenStored(t *testing.T) {
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
	tp, _ := flow.TupleFrom(netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr(chanceVIP), moved[0], 80, 6)
	r.w.hashes[0] = flow.NewHasher(r.key).Hash(&tp)
	var v *VIP
	for _, x := range s4.VIPs {
		if x != nil {
			v = x
		}
	}
	byName := map[string]*Backend{}
	for _, b := range s4.Backends {
		if b != nil {
			byName[b.Name] = b
		}
	}
	if v == nil || v.Prev == nil || byName[cur[moved[0]]] == nil {
		t.Fatal("no VIP with a previous table, or no current backend")
	}
	for range 3 {
		r.w.chance[0] = nil
		r.w.firstChance(s4, v, 0, byName[cur[moved[0]]], nil) // the insert failed
		if r.w.chance[0] != byName[old[moved[0]]] {
			t.Fatalf("untracked packet: chance %v, want %s", r.w.chance[0], old[moved[0]])
		}
	}
	if n := r.w.c.SecondChanceFlows; n != 0 {
		t.Fatalf("three packets of one untracked flow: second_chance_flows %d, want 0", n)
	}
	k := tp
	e := r.w.ct.Insert(r.w.local.Hash(&k), &k, conntrack.StateEstablished, v.ID, byName[cur[moved[0]]].ID, byName[cur[moved[0]]].Gen, 0)
	if e == nil {
		t.Fatal("insert failed")
	}
	r.w.firstChance(s4, v, 0, byName[cur[moved[0]]], e)
	if id, ok := e.Chance(); !ok || id != byName[old[moved[0]]].ID {
		t.Fatalf("stored chance %d %v, want %d", id, ok, byName[old[moved[0]]].ID)
	}
	if n := r.w.c.SecondChanceFlows; n != 1 {
		t.Fatalf("the flow stored: second_chance_flows %d, want 1", n)
	}
}

// TestChancePrevTableUnderItsHash: a reload that changes a VIP's hash
// fields moves flows as a table change does, so the outgoing table becomes
// the previous one; it is looked up under the hash fields it was used
// with (a flow's second chance names the backend the fleet's old mapping
// chose), not the VIP's new ones.
func TestChancePrevTableUnderItsHash(t *testing.T) {
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	specs := chanceSpecs(4, encap.GRE, chanceWindow, nil)
	s1, err := NewServicesAt(nil, r.enc, nh, specs, t0)
	if err != nil {
		t.Fatal(err)
	}
	specs2 := chanceSpecs(4, encap.GRE, chanceWindow, nil)
	specs2[0].Hash = flow.Fields{Mode: flow.SrcIP}
	s2, err := NewServicesAt(s1, r.enc, nh, specs2, t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var v *VIP
	for _, x := range s2.VIPs {
		if x != nil {
			v = x
		}
	}
	if v == nil || v.Prev == nil {
		t.Fatal("a hash change kept no previous table")
	}
	if v.Prev.Hash != (flow.Fields{}) || v.Hash == v.Prev.Hash {
		t.Fatalf("previous table's hash fields %v, VIP's %v: want 5-tuple and src-ip", v.Prev.Hash, v.Hash)
	}
	r.shared.Services.Store(s2)
	h5, hs := flow.NewHasher(r.key), flow.NewHasher(r.key)
	t4 := chanceTable(t, 4)
	byName := map[string]*Backend{}
	for _, b := range s2.Backends {
		if b != nil {
			byName[b.Name] = b
		}
	}
	tested := 0
	for p := uint16(30000); p < 30400; p++ {
		tp, _ := flow.TupleFrom(netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr(chanceVIP), p, 80, 6)
		old := t4.Backend(t4.Lookup(h5.Hash(&tp))).Key                       // the fleet's choice before the change
		cur := byName[t4.Backend(t4.Lookup(hs.HashFields(&tp, v.Hash))).Key] // after it
		r.w.parsed[0].Tuple, r.w.hashes[0], r.w.chance[0] = tp, hs.HashFields(&tp, v.Hash), nil
		r.w.firstChance(s2, v, 0, cur, nil)
		want := byName[old]
		if want == cur {
			want = nil
		}
		if r.w.chance[0] != want {
			t.Fatalf("port %d: chance %v, want the 5-tuple mapping's %v (current %s)", p, r.w.chance[0], want, cur.Name)
		}
		if want != nil {
			tested++
		}
	}
	if tested < 100 {
		t.Fatalf("only %d of 400 flows moved", tested)
	}
}
