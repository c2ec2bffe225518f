package dataplane

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/encap"
)

// fmOutcome is what a scenario is expected to do to its connections: survive,
// or break in one of the ways docs/second-chance.md and the README document.
type fmOutcome int

const (
	fmSurvives fmOutcome = iota

	// The second chance off (window 0), a table change, then a move: the
	// instance that never saw the flow places it by its table alone, on a
	// backend without its socket, and a closing entry keeps its pin (so
	// that a forged close never moves a connection) even when the client
	// reused the tuple for a connection that the other instance placed by
	// the new table. This is the loss the second chance exists for
	// (docs/second-chance.md's introduction, README "Two changes at
	// once").
	fmNoChance
	// Only one previous table ("What it does not do"): a flow placed two
	// changes ago is given the table before the last change as its second
	// chance, which names a backend that has no socket for it either.
	fmOnePrev
	// The previous table is dropped second_chance_window after the
	// change: a flow that moves later is given no second chance.
	fmAfterWindow
	// "What it does not do", stale established entries: an instance that
	// never saw a connection end (the server reset it, or the routers
	// moved its close elsewhere) keeps its entry established, pinned by
	// the older table. The client reuses the tuple for a connection that
	// the other instance placed by the new table; moved here, its
	// segments hit the established entry and go to the old pin without a
	// second chance (only closing entries look at the table: doing it for
	// established ones would cost a table lookup on every packet, and a
	// socket lookup on the backend for each), where a reset or the old
	// connection's TIME_WAIT answers them.
	fmStaleEstablished
	// "What it does not do", a moved SYN retransmission: the first SYN
	// reached a backend by the old table; the retransmission, moved to
	// the other instance just after the change, is placed there by the
	// new table (a SYN never carries a second chance, and the agent never
	// forwards one), and the handshake completes with the first backend
	// while the rest of the connection goes to the second.
	fmMovedSYN
	// README Limitations: a blind spoofer who knows the tuple moves a
	// connection with a forged FIN followed by a forged SYN (after a FIN
	// a SYN is a new connection, placed by the current table, and clears
	// the entry's second chance). It moves only where the table changed
	// since the connection was placed.
	fmForgedFinSyn

	fmOutcomes
)

var fmOutcomeName = [fmOutcomes]string{"survives", "second chance off", "one previous table", "after the window",
	"stale established entry", "moved SYN retransmission", "forged FIN then SYN"}

type fmScenario struct {
	name  string
	vers  []*fmVersion        // the backend sets the scenario publishes, by index
	pick  func([]string) bool // the client port: its tables' choices, one per version
	steps []fmStep
	on    fmOutcome // with the second chance (window 5m)
	off   fmOutcome // without (window 0)
}

// The backend sets.
var (
	fmV3     = fmVer("v3", "be1", "be2", "be3")
	fmV4     = fmVer("v4", "be1", "be2", "be3", "be4")
	fmV3w    = fmVer("v3-be1x3", "be1*3", "be2", "be3")
	fmV4w    = fmVer("v4-be1x3", "be1*3", "be2", "be3", "be4")
	fmV4NoB3 = fmVer("v4-without-be3", "be1", "be2", "be4")
)

var (
	fmAnyPort = func(c []string) bool { return true }
	// The port's slot names another backend after the change.
	fmMoved = func(c []string) bool { return c[0] != c[1] }
	// The same, and the old backend is not the one removed (whose
	// connections are lost anyway).
	fmMovedKept = func(c []string) bool { return c[0] != c[1] && c[0] != "be3" }
	// Three tables, three different backends.
	fmMoved3 = func(c []string) bool { return c[0] != c[1] && c[1] != c[2] && c[0] != c[2] }
)

// fmChange is when the scenarios' table changes (the first table has been
// in force for more than PrevMinAge, so it becomes the previous table).
const fmChange = 10 * time.Second

// seq joins steps (each argument a step or a []fmStep) into a new slice.
func seq(parts ...any) []fmStep {
	var out []fmStep
	for _, p := range parts {
		switch p := p.(type) {
		case fmStep:
			out = append(out, p)
		case []fmStep:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("seq: %T", p))
		}
	}
	return out
}

func fmScenarios() []fmScenario {
	var sc []fmScenario
	add := func(name string, vers []*fmVersion, pick func([]string) bool, on, off fmOutcome, steps ...any) {
		sc = append(sc, fmScenario{name, vers, pick, seq(steps...), on, off})
	}
	vAdd := []*fmVersion{fmV3, fmV4}
	vTwo := []*fmVersion{fmV3, fmV4, fmV4w}
	change := fmPub(1, fmChange)
	// C0 opened on A: handshake and data.
	open := []fmStep{fmTx(lbA, 0, "S"), fmTx(lbA, 0, "A"), fmTx(lbA, 0, "AP:20")}
	// withChange is a scenario's tables, the port it picks and the step
	// between its connections: one table throughout, or be4 added (a
	// port whose slot moved).
	withChange := func(chg bool) ([]*fmVersion, func([]string) bool, []fmStep) {
		if chg {
			return vAdd, fmMoved, []fmStep{change}
		}
		return []*fmVersion{fmV3}, fmAnyPort, nil
	}

	// 1. A connection moved mid-stream, with no change, then after one
	// (a backend added, one removed, a weight raised): its first
	// segment on B data, or its FIN.
	add("1 move A->B, no change", vAdd, fmAnyPort, fmSurvives, fmSurvives,
		open, fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A"), fmTx(lbB, 0, "AP:30"), fmTx(lbA, 0, "AP:5"))
	for _, c := range []struct {
		name string
		vers []*fmVersion
		pick func([]string) bool
	}{{"add be4", vAdd, fmMoved}, {"remove be3", []*fmVersion{fmV4, fmV4NoB3}, fmMovedKept}, {"weight be1 1->3", []*fmVersion{fmV3, fmV3w}, fmMoved}} {
		add("1 move A->B after change: "+c.name, c.vers, c.pick, fmSurvives, fmNoChance,
			open, change, fmTx(lbA, 0, "AP:10"), fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A"), fmTx(lbB, 0, "AP:30", "A"),
			fmTx(lbA, 0, "AP:5"), fmTx(lbB, 0, "FA"), fmTx(lbA, 0, "A"))
		add("1 move A->B after change, first segment a FIN: "+c.name, c.vers, c.pick, fmSurvives, fmNoChance,
			open, change, fmTx(lbB, 0, "FA"), fmTx(lbB, 0, "A"))
	}

	// 2. Tuple reuse: C0 ends on one instance (the client's FIN and last
	// ACK, or its RST; the server's socket in TIME_WAIT or gone), the
	// client opens C1 on the same tuple through the other instance, and
	// C1 moves to the first, where C0's entry is closing: its first
	// segment there data, or an ACK (a download's, which leaves the entry
	// closing). Both directions, with and without a change between.
	for _, chg := range []bool{false, true} {
		for _, cl := range []struct {
			name string
			pkts []string
		}{{"client FIN+last ACK", []string{"FA", "A"}}, {"client RST", []string{"R"}}} {
			for _, tw := range []bool{true, false} {
				for _, first := range []string{"AP:40", "A"} {
					for _, dir := range [][2]int{{lbA, lbB}, {lbB, lbA}} {
						x, y := dir[0], dir[1]
						vers, pick, mid := withChange(chg)
						off := fmSurvives
						if chg {
							off = fmNoChance
						}
						srv := map[bool]string{true: "server TIME_WAIT", false: "server no socket"}[tw]
						add(fmt.Sprintf("2 reuse C0 on %s (%s, %s), C1 SYN on %s then on %s first %q, change=%v", fmLBName[x], cl.name, srv, fmLBName[y], fmLBName[x], first, chg),
							vers, pick, fmSurvives, off,
							fmTx(x, 0, "S"), fmTx(x, 0, "A"), fmTx(x, 0, "AP:20"), fmTx(x, 0, cl.pkts...), fmSrvEnd(0, tw), mid,
							fmTx(y, 1, "S"), fmTx(y, 1, "A"), fmTx(x, 1, first), fmTx(x, 1, "AP:40"), fmTx(x, 1, "AP:40", "A"), fmTx(y, 1, "AP:10"))
					}
				}
			}
		}
	}
	// 2b. The same after a change, C1's handshake ACK the first of its
	// segments on A.
	for _, cl := range [][]string{{"FA", "A"}, {"R"}} {
		for _, tw := range []bool{true, false} {
			add(fmt.Sprintf("2b reuse C0 on A (%v, server TIME_WAIT=%v), change, C1 SYN on B, handshake ACK on A", cl, tw), vAdd, fmMoved, fmSurvives, fmNoChance,
				open, fmTx(lbA, 0, cl...), fmSrvEnd(0, tw), change,
				fmTx(lbB, 1, "S"), fmTx(lbA, 1, "A"), fmTx(lbA, 1, "AP:40"), fmTx(lbA, 1, "AP:40"))
		}
	}

	// 3. C0 ends where A does not see it (the server resets it, or its
	// close goes through B), and C1 reuses the tuple.
	for _, chg := range []bool{false, true} {
		vers, pick, mid := withChange(chg)
		off, stale := fmSurvives, fmSurvives
		if chg {
			off, stale = fmNoChance, fmStaleEstablished
		}
		// 3a: C1's SYN on A (A's established entry keeps it on C0's
		// backend, whose socket is gone), then C1 moves to B.
		add(fmt.Sprintf("3a server reset C0 (A saw no close), C1 SYN on A (kept), moves to B, change=%v", chg), vers, pick, fmSurvives, off,
			open, mid, fmSrvEnd(0, false),
			fmTx(lbA, 1, "S"), fmTx(lbA, 1, "A"), fmTx(lbA, 1, "AP:40"), fmTx(lbB, 1, "AP:40"), fmTx(lbB, 1, "A"), fmTx(lbA, 1, "AP:1"))
		// 3b: C1's SYN on B, then C1 moves to A, whose entry is still
		// established for C0.
		add(fmt.Sprintf("3b server reset C0 (A saw no close), C1 SYN on B, moves to A, change=%v", chg), vers, pick, stale, off,
			open, mid, fmSrvEnd(0, false),
			fmTx(lbB, 1, "S"), fmTx(lbB, 1, "A"), fmTx(lbB, 1, "AP:40"), fmTx(lbA, 1, "AP:40"), fmTx(lbA, 1, "A"))
		// 3c: C0 opened on A, moved to B, closed on B (server TIME_WAIT):
		// A never saw the close. C1's SYN on B, then C1 moves to A.
		c0AB := seq(open, fmTx(lbB, 0, "AP:20"), fmTx(lbB, 0, "FA"), fmTx(lbB, 0, "A"), fmSrvEnd(0, true), mid)
		add(fmt.Sprintf("3c C0 A->B, closes on B (server TIME_WAIT), C1 SYN on B, moves to A, change=%v", chg), vers, pick, stale, off,
			c0AB, fmTx(lbB, 1, "S"), fmTx(lbB, 1, "A"), fmTx(lbB, 1, "AP:40"), fmTx(lbA, 1, "AP:40"), fmTx(lbA, 1, "A"))
		// 3d: the same, C1's SYN on A (kept on C0's backend by A's
		// established entry: the TIME_WAIT accepts it), then C1 moves to
		// B, whose closing entry has the same pin. Nothing looks at the
		// table, so it survives the change even without the second
		// chance.
		add(fmt.Sprintf("3d C0 A->B, closes on B (server TIME_WAIT), C1 SYN on A (kept), moves to B, change=%v", chg), vers, pick, fmSurvives, fmSurvives,
			c0AB, fmTx(lbA, 1, "S"), fmTx(lbA, 1, "A"), fmTx(lbA, 1, "AP:40"), fmTx(lbB, 1, "AP:40"), fmTx(lbB, 1, "A"))
	}

	// 4. A forged close (FIN, RST, RST+ACK) on A: the connection goes on
	// on A, or moves to B, at once or after data on A. A forged FIN then
	// a forged SYN.
	for _, chg := range []bool{false, true} {
		vers, pick, mid := withChange(chg)
		moveOff, finSyn := fmSurvives, fmSurvives
		if chg {
			moveOff, finSyn = fmNoChance, fmForgedFinSyn
		}
		for _, forged := range []string{"FA", "R", "RA"} {
			add(fmt.Sprintf("4 forged %s on A, continues on A, change=%v", forged, chg), vers, pick, fmSurvives, fmSurvives,
				open, mid, fmForge(lbA, forged), fmTx(lbA, 0, "A"), fmTx(lbA, 0, "AP:30"), fmTx(lbA, 0, "AP:30"), fmTx(lbA, 0, "A"))
			add(fmt.Sprintf("4 forged %s on A, continues on A then moves to B, change=%v", forged, chg), vers, pick, fmSurvives, moveOff,
				open, mid, fmForge(lbA, forged), fmTx(lbA, 0, "AP:30"), fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A"), fmTx(lbA, 0, "AP:3"))
			add(fmt.Sprintf("4 forged %s on A, moves to B at once, back to A, change=%v", forged, chg), vers, pick, fmSurvives, moveOff,
				open, mid, fmForge(lbA, forged), fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A"), fmTx(lbA, 0, "AP:3"), fmTx(lbA, 0, "AP:3"))
		}
		add(fmt.Sprintf("4 forged FIN then forged SYN on A, change=%v", chg), vers, pick, finSyn, finSyn,
			open, mid, fmForge(lbA, "FA"), fmForge(lbA, "S"), fmTx(lbA, 0, "AP:30"), fmTx(lbA, 0, "A"))
	}
	// 4c. A flow moved to B after a change, with its second chance; a
	// second change; a forged close on B: it keeps its pin and chance.
	for _, forged := range []string{"FA", "R"} {
		add(fmt.Sprintf("4c moved to B with its chance, second change, forged %s on B, continues on B", forged), vTwo, fmMoved3, fmSurvives, fmNoChance,
			open, change, fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A"), fmPub(2, 2*fmChange),
			fmTx(lbB, 0, "AP:30"), fmForge(lbB, forged), fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A"), fmTx(lbB, 0, "AP:1"))
	}
	// 4d. The same with a real half-close: the client's FIN on B, a
	// retransmission of data sent before it, the download going on (the
	// client's ACKs).
	add("4d moved to B with its chance, second change, client half-close + retransmitted data on B", vTwo, fmMoved3, fmSurvives, fmNoChance,
		open, change, fmTx(lbB, 0, "AP:30"), fmPub(2, 2*fmChange),
		fmTx(lbB, 0, "FA"), fmTx(lbB, 0, "A"), fmTx(lbB, 0, "AP:30"), fmTx(lbB, 0, "A"), fmTx(lbB, 0, "A"))

	// 5. Extras.
	add("5a SYN on A, change, SYN retransmission on B, rest on B", vAdd, fmMoved, fmMovedSYN, fmNoChance,
		fmTx(lbA, 0, "S"), change, fmTx(lbB, 0, "S"), fmTx(lbB, 0, "A"), fmTx(lbB, 0, "AP:10"))
	add("5b SYN on A, change, handshake ACK on B", vAdd, fmMoved, fmSurvives, fmNoChance,
		fmTx(lbA, 0, "S"), change, fmTx(lbB, 0, "A"), fmTx(lbB, 0, "AP:10"), fmTx(lbA, 0, "AP:10"))
	add("5c one burst on B: C0's data, FIN and last ACK after C0 opened on A and a change; C1 opens on B, moves to A", vAdd, fmMoved, fmStaleEstablished, fmNoChance,
		fmTx(lbA, 0, "S"), fmTx(lbA, 0, "A"), change, fmTx(lbB, 0, "AP:10", "FA", "A"), fmSrvEnd(0, true),
		fmTx(lbB, 1, "S", "A", "AP:10"), fmTx(lbA, 1, "AP:10", "A"))
	add("5d move after the window (5m) passed", vAdd, fmMoved, fmAfterWindow, fmNoChance,
		open, change, fmPub(1, fmChange+6*time.Minute), fmTx(lbB, 0, "AP:10"))
	add("5e two changes, then move", vTwo, fmMoved3, fmOnePrev, fmNoChance,
		open, change, fmPub(2, 2*fmChange), fmTx(lbB, 0, "AP:10"))
	add("5f moved to B (chance), back to A, ends on B (server TIME_WAIT), C1 SYN on B, moves to A", vAdd, fmMoved, fmStaleEstablished, fmNoChance,
		open, change, fmTx(lbB, 0, "AP:10"), fmTx(lbA, 0, "AP:10"), fmTx(lbB, 0, "FA"), fmTx(lbB, 0, "A"), fmSrvEnd(0, true),
		fmTx(lbB, 1, "S"), fmTx(lbB, 1, "A"), fmTx(lbA, 1, "AP:10"), fmTx(lbA, 1, "A"))
	add("5g moved to B (chance), ends on B (server TIME_WAIT), C1 SYN on A (kept), moves to B", vAdd, fmMoved, fmSurvives, fmNoChance,
		open, change, fmTx(lbB, 0, "AP:10"), fmTx(lbB, 0, "FA"), fmTx(lbB, 0, "A"), fmSrvEnd(0, true),
		fmTx(lbA, 1, "S"), fmTx(lbA, 1, "A"), fmTx(lbB, 1, "AP:10"), fmTx(lbB, 1, "A"), fmTx(lbB, 1, "AP:10"))
	add("5h moved to B (chance), ends on B (FIN, server no socket), C1 SYN on B, moves to A", vAdd, fmMoved, fmStaleEstablished, fmNoChance,
		open, change, fmTx(lbB, 0, "AP:10"), fmTx(lbB, 0, "FA"), fmTx(lbB, 0, "A"), fmSrvEnd(0, false),
		fmTx(lbB, 1, "S"), fmTx(lbB, 1, "A"), fmTx(lbA, 1, "AP:10"), fmTx(lbA, 1, "A"))
	return sc
}

// TestFleetMove: a model of two LB instances, A and B, in front of one
// Maglev VIP (GRE) whose backends run fulcrum-decap, drives a client's
// connections on one tuple through scenarios where the routers split a
// connection's packets between the instances: moves mid-stream around
// table changes (1), a reused tuple whose old connection ended on one
// instance and whose new one was placed by the other, both directions,
// data or a download's ACKs first, or the handshake's ACK (2), an old
// connection that ended where one instance did not see it (3), forged
// FIN, RST and RST+ACK (4), and more (5). Each scenario runs with the
// second chance on (window 5m) and off (window 0). The model's rules:
//
//   - Each instance is a Worker with its own conntrack; both are given
//     the same snapshots at the same moments, as the control plane of
//     each builds them. A scenario's client port is chosen by its
//     tables' choices (the slot moved, or not) from Maglev tables built
//     once, and checked against the snapshots.
//   - Each backend has one socket for the tuple: none, ESTABLISHED or
//     TIME_WAIT, of connection C0 or C1; the server ending a connection
//     puts its socket in TIME_WAIT or removes it (a reset).
//   - A SYN is delivered where it is tunnelled (the agent never forwards
//     one): over no socket or a TIME_WAIT (RFC 6191) it opens the
//     connection; it breaks it if the connection lives on another backend
//     or the socket is another live connection's.
//   - Any other segment is the agent's: owned by an ESTABLISHED socket,
//     or by a TIME_WAIT if it is a FIN or RST, it is delivered there;
//     otherwise, if the tunnel names a second chance, it is forwarded
//     there and delivered whatever. Delivered to its own connection's
//     socket it is fine; to another connection's (a challenge ACK or
//     reset; a TIME_WAIT's ACK stalls the new connection for good), to
//     no socket (a reset), or dropped by the LB, the connection breaks.
//   - A forged segment (a blind attacker's, out of window) is ignored by
//     any stack: it matters only for what it does to conntrack.
//
// A scenario the docs say survives fails the test with its packet trace.
// The breaks the docs list as limitations (fmOutcome says why each
// breaks) are not failures, but they are counted and the counts checked
// exactly, with the survivors': a change either way must be seen and the
// expectations updated.
func TestFleetMove(t *testing.T) {
	base := newRig(t, testConfig)
	snaps := &fmSnaps{enc: base.enc, m: map[string]*Services{}}
	scs := fmScenarios()
	var got [fmOutcomes]int
	var unbitten []string // limitations that did not break
	ran := 0
	for _, s := range scs {
		port, choices := fmPort(t, base.key, s.vers, s.pick)
		for _, mode := range []struct {
			name   string
			window time.Duration
			want   fmOutcome
		}{{"on", chanceWindow, s.on}, {"off", 0, s.off}} {
			t.Run(mode.name+"/"+s.name, func(t *testing.T) {
				ran++
				f := newFleet(t, base, snaps, encap.GRE, mode.window, s.vers, port, choices)
				for _, st := range s.steps {
					f.step(st)
				}
				head := fmt.Sprintf("second chance %s, client port %d, the tables' choices %v", mode.name, port, choices)
				switch {
				case len(f.breaks) == 0:
					got[fmSurvives]++
					if mode.want != fmSurvives {
						unbitten = append(unbitten, t.Name())
						t.Logf("%s: expected to break (%s), survived", head, fmOutcomeName[mode.want])
					}
				case mode.want == fmSurvives:
					t.Errorf("%s: broken:\n  %s\ntrace:\n%s", head, strings.Join(f.breaks, "\n  "), strings.Join(f.trace, "\n"))
				default:
					got[mode.want]++
					t.Logf("%s: broken, documented (%s): %s", head, fmOutcomeName[mode.want], f.breaks[0])
				}
			})
		}
	}
	if ran != 2*len(scs) {
		t.Logf("%d of %d runs: the counts are not checked", ran, 2*len(scs))
		return
	}
	// Today's counts. A survivor more (a limitation that no longer bites)
	// or a break more (a survivor that broke also fails its run) means
	// the behaviour changed: update the scenario's expectation.
	want := [fmOutcomes]int{
		fmSurvives:         108,
		fmNoChance:         46,
		fmOnePrev:          1,
		fmAfterWindow:      1,
		fmStaleEstablished: 5,
		fmMovedSYN:         1,
		fmForgedFinSyn:     2,
	}
	if got != want {
		var b strings.Builder
		for o := range fmOutcomes {
			fmt.Fprintf(&b, "\n  %-24s %3d, want %3d", fmOutcomeName[o], got[o], want[o])
		}
		if len(unbitten) > 0 {
			fmt.Fprintf(&b, "\nexpected to break, survived:\n  %s", strings.Join(unbitten, "\n  "))
		}
		t.Errorf("outcomes of %d runs:%s", ran, b.String())
	}
}
