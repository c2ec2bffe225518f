package dataplane

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// A model of a small fleet for TestFleetMove: two LB instances (two
// workers, each its own conntrack, given the same snapshots at the same
// moments) in front of be1..be4, each backend with one socket for the
// client's tuple and fulcrum-decap's second-chance rule. The rules are
// listed on TestFleetMove.

const fmClient = "198.51.100.9"

// The two LB instances.
const (
	lbA = 0
	lbB = 1
)

var fmLBName = [2]string{"A", "B"}

// fmVersion is a backend set of the VIP: its backends, with weights.
type fmVersion struct {
	name     string
	backends []maglev.Backend // Key: the backend's name

	once sync.Once
	tb   *maglev.Table
}

// fmVer is a version of backends given as "be1" (weight 1) or "be1*3".
func fmVer(name string, backends ...string) *fmVersion {
	v := &fmVersion{name: name}
	for _, b := range backends {
		w := uint32(1)
		if n, m, ok := strings.Cut(b, "*"); ok {
			k, err := strconv.Atoi(m)
			if err != nil {
				panic(b)
			}
			b, w = n, uint32(k)
		}
		v.backends = append(v.backends, maglev.Backend{Key: b, Weight: w})
	}
	return v
}

// specs is the version's VIP (chanceVIP:80, TCP, tunnelled with kind,
// the second chance's window w).
func (v *fmVersion) specs(kind encap.Kind, w time.Duration) []VIPSpec {
	s := chanceSpecs(0, kind, w, nil)
	for _, b := range v.backends {
		s[0].Backends = append(s[0].Backends, BackendSpec{Name: b.Key, Addr: beAddr(b.Key), Config: 1, Eff: Effective{Weight: int(b.Weight)}})
	}
	return s
}

// choice is the backend the version's Maglev table names for hash, from a
// table built once, independently of the snapshots (fleet.publish checks
// that the two agree), so that choosing a scenario's port builds no
// snapshot.
func (v *fmVersion) choice(t testing.TB, hash uint64) string {
	v.once.Do(func() {
		tb, err := maglev.Build(v.backends, maglev.DefaultSize)
		if err != nil {
			t.Fatal(err)
		}
		v.tb = tb
	})
	return v.tb.Backend(v.tb.Lookup(hash)).Key
}

// fmHash is the hash of the client's tuple from port to chanceVIP:80.
func fmHash(h *flow.Hasher, port uint16) uint64 {
	tp, _ := flow.TupleFrom(netip.MustParseAddr(fmClient), netip.MustParseAddr(chanceVIP), port, 80, 6)
	return h.Hash(&tp)
}

// fmPort is the first client port from 20000 whose choices under vers
// (one name per version) pick accepts, and those choices.
func fmPort(t testing.TB, key flow.Key, vers []*fmVersion, pick func(c []string) bool) (uint16, []string) {
	h := flow.NewHasher(key)
	for p := uint16(20000); p < 60000; p++ {
		hs := fmHash(&h, p)
		c := make([]string, len(vers))
		for i, v := range vers {
			c[i] = v.choice(t, hs)
		}
		if pick(c) {
			return p, c
		}
	}
	t.Fatalf("no client port fits %v", vers)
	return 0, nil
}

// fmSnaps builds the snapshots, once for all the scenarios: a snapshot is
// immutable and depends only on the one before it, the specs and the
// time, so a chain of publishes (the same versions at the same times, the
// same window) is the same snapshots in every scenario, and both
// instances (which build the same from the same inputs) can share it.
type fmSnaps struct {
	enc *encap.Encapsulator
	m   map[string]*Services
}

var fmNH = NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}

var fmT0 = time.Unix(1_000_000, 0)

func (s *fmSnaps) get(t *testing.T, prev *Services, chain string, v *fmVersion, kind encap.Kind, w time.Duration, at time.Duration) (*Services, string) {
	chain += fmt.Sprintf("|%s@%v", v.name, at)
	if got, ok := s.m[chain]; ok {
		return got, chain
	}
	got, err := NewServicesAt(prev, s.enc, fmNH, v.specs(kind, w), fmT0.Add(at))
	if err != nil {
		t.Fatal(err)
	}
	s.m[chain] = got
	return got, chain
}

// The backend's socket for the client's tuple.
type fmSockState int

const (
	fmNone fmSockState = iota
	fmEst
	fmTW
)

type fmSock struct {
	st   fmSockState
	conn int // the connection it belongs to (C0, C1)
}

// A scenario's steps.
type fmStepKind int

const (
	fmkSend      fmStepKind = iota // a burst of the client's segments of connection conn
	fmkForged                      // a burst of a blind attacker's segments on the tuple
	fmkPublish                     // version ver published on both instances at t0+at
	fmkServerEnd                   // the server ends conn: its socket goes to TIME_WAIT or away
)

type fmStep struct {
	kind fmStepKind
	lb   int      // lbA, lbB
	conn int      // send, server end
	pkts []string // "FLAGS[:data bytes]", one burst
	ver  int      // publish: index in the scenario's versions
	at   time.Duration
	tw   bool // server end: TIME_WAIT (else no socket: closed by a reset)
}

func fmTx(lb, conn int, pkts ...string) fmStep {
	return fmStep{kind: fmkSend, lb: lb, conn: conn, pkts: pkts}
}

func fmForge(lb int, pkts ...string) fmStep { return fmStep{kind: fmkForged, lb: lb, pkts: pkts} }

func fmPub(ver int, at time.Duration) fmStep { return fmStep{kind: fmkPublish, ver: ver, at: at} }

func fmSrvEnd(conn int, tw bool) fmStep { return fmStep{kind: fmkServerEnd, conn: conn, tw: tw} }

// fmFleet is one run of a scenario: the two instances, the backends'
// sockets, the packet trace and the segments of real connections that
// broke.
type fmFleet struct {
	t       *testing.T
	kind    encap.Kind
	window  time.Duration
	vers    []*fmVersion
	choices []string // the tables' choice for port, per version
	port    uint16
	hash    uint64
	snaps   *fmSnaps
	chain   string // the snapshots published so far (fmSnaps' key)
	svc     *Services
	lbs     [2]*rig
	socks   map[netip.Addr]*fmSock
	trace   []string
	breaks  []string
}

// newFleet is two fresh instances (empty conntrack) with version 0
// published, and no sockets.
func newFleet(t *testing.T, base *rig, snaps *fmSnaps, kind encap.Kind, window time.Duration, vers []*fmVersion, port uint16, choices []string) *fmFleet {
	h := flow.NewHasher(base.key)
	f := &fmFleet{t: t, kind: kind, window: window, vers: vers, choices: choices, port: port, hash: fmHash(&h, port),
		snaps: snaps, chain: fmt.Sprintf("%v/%v", kind, window), socks: map[netip.Addr]*fmSock{}}
	for i := range f.lbs {
		ctc := conntrack.DefaultConfig()
		ctc.Capacity = base.cfg.Conntrack.Capacity
		sh := &Shared{}
		w, err := NewWorker(i, sh, ctc, base.key, portMAC)
		if err != nil {
			t.Fatal(err)
		}
		f.lbs[i] = &rig{t: t, cfg: base.cfg, enc: base.enc, shared: sh, w: w, key: base.key, now: 1000}
	}
	for i := 1; i <= 4; i++ {
		f.socks[beAddr(fmt.Sprintf("be%d", i))] = &fmSock{}
	}
	f.publish(0, 0)
	return f
}

func (f *fmFleet) publish(ver int, at time.Duration) {
	f.svc, f.chain = f.snaps.get(f.t, f.svc, f.chain, f.vers[ver], f.kind, f.window, at)
	for _, r := range f.lbs {
		r.shared.Services.Store(f.svc)
	}
	// The model's tables (which chose the port) must be the snapshot's.
	v := f.svc.VIPs[0]
	if got := f.svc.Backends[v.Backends[v.Table.Lookup(f.hash)]].Name; got != f.choices[ver] {
		f.t.Fatalf("port %d: the snapshot of %s chooses %s, the model's table %s", f.port, f.vers[ver].name, got, f.choices[ver])
	}
	f.trace = append(f.trace, fmt.Sprintf("  publish %s at +%v on A and B", f.vers[ver].name, at))
}

func fmName(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	if b := a.As4(); a.Is4() && b[0] == 10 && b[1] == 0 && b[2] == 9 {
		return fmt.Sprintf("be%d", b[3])
	}
	return a.String()
}

func fmParse(s string) (flags string, data int) {
	flags, d, ok := strings.Cut(s, ":")
	if ok {
		data, _ = strconv.Atoi(d)
	}
	return flags, data
}

func (f *fmFleet) step(s fmStep) {
	switch s.kind {
	case fmkPublish:
		f.publish(s.ver, s.at)
	case fmkServerEnd:
		for a, k := range f.socks {
			if k.st == fmEst && k.conn == s.conn {
				*k = fmSock{}
				what := "none (closed by a reset)"
				if s.tw {
					*k, what = fmSock{st: fmTW, conn: s.conn}, "TIME_WAIT"
				}
				f.trace = append(f.trace, fmt.Sprintf("  server of C%d on %s -> %s", s.conn, fmName(a), what))
			}
		}
	case fmkSend, fmkForged:
		r := f.lbs[s.lb]
		frames := make([][]byte, len(s.pkts))
		for i, p := range s.pkts {
			fl, d := fmParse(p)
			frames[i] = frame(f.t, fmClient, chanceVIP, f.port, 80, layers.IPProtocolTCP, fl, d, true)
		}
		out, v := r.run(frames...)
		forged := s.kind == fmkForged
		who := fmt.Sprintf("C%d", s.conn)
		if forged {
			who = "forged"
		}
		for i, p := range s.pkts {
			if v[i] != Tx {
				line := fmt.Sprintf("%s %s via %s: verdict %v", who, p, fmLBName[s.lb], v[i])
				f.trace = append(f.trace, "  "+line)
				if !forged {
					f.breaks = append(f.breaks, line)
				}
				continue
			}
			dst, ch := tunnelChance(f.t, out[i])
			fl, _ := fmParse(p)
			res, ok := f.deliver(forged, s.conn, fl, dst, ch)
			line := fmt.Sprintf("%s %-5s via %s -> %s chance %s: %s", who, p, fmLBName[s.lb], fmName(dst), fmName(ch), res)
			f.trace = append(f.trace, "  "+line)
			if !ok {
				f.breaks = append(f.breaks, line)
			}
		}
	}
}

// deliver is what becomes of a segment tunnelled to dst naming the second
// chance ch (invalid: none): the agent's rule, then the stack of the
// backend that gets it. It reports whether the connection survives it.
func (f *fmFleet) deliver(forged bool, conn int, flags string, dst, ch netip.Addr) (string, bool) {
	k, known := f.socks[dst]
	if !known {
		return "outer destination is no backend", false
	}
	if forged {
		// A blind attacker's segment is out of window wherever it lands:
		// the stack ignores it. It matters for what it does to conntrack.
		return "forged (ignored by the stack)", true
	}
	syn := strings.Contains(flags, "S") && !strings.Contains(flags, "A")
	closing := strings.ContainsAny(flags, "FR")
	if syn {
		// A SYN is delivered where it is tunnelled (the agent never
		// forwards one).
		for a, o := range f.socks {
			if a != dst && o.st == fmEst && o.conn == conn {
				return fmt.Sprintf("SYN placed on %s while C%d lives on %s", fmName(dst), conn, fmName(a)), false
			}
		}
		switch {
		case k.st == fmEst && k.conn != conn:
			return fmt.Sprintf("SYN hits C%d's socket (challenge ACK)", k.conn), false
		case k.st == fmEst:
			return "SYN retransmission at its socket", true
		case k.st == fmTW:
			*k = fmSock{st: fmEst, conn: conn}
			return fmt.Sprintf("SYN accepted over TIME_WAIT (RFC 6191): C%d established", conn), true
		}
		*k = fmSock{st: fmEst, conn: conn}
		return fmt.Sprintf("SYN: C%d established", conn), true
	}
	// The agent: a local socket owns the segment if it is established,
	// or in TIME_WAIT and the segment a FIN or RST; otherwise a named
	// second chance gets it, forwarded once and delivered whatever.
	owned := k.st == fmEst || k.st == fmTW && closing
	at, path := dst, "local"
	if o, ok := f.socks[ch]; ok && !owned && ch != dst {
		k, at, path = o, ch, "forwarded to "+fmName(ch)
	}
	switch {
	case k.st == fmEst && k.conn == conn:
		return path + ": ok", true
	case k.st == fmTW && k.conn == conn && closing:
		return path + ": ok (TIME_WAIT of its own connection)", true
	case k.st == fmEst:
		return fmt.Sprintf("%s: BREAK at %s, C%d's socket (challenge ACK, RST)", path, fmName(at), k.conn), false
	case k.st == fmTW:
		return fmt.Sprintf("%s: BREAK at %s, C%d's TIME_WAIT answers with its ACK (stall)", path, fmName(at), k.conn), false
	}
	return fmt.Sprintf("%s: BREAK at %s, no socket (RST)", path, fmName(at)), false
}
