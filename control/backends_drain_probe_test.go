package control

// Probe of drain, weights and slow start (README "Drain, weights and slow
// start"), from an operator's and an attacker's side. The tests
// headed "was a defect" failed before their fix; the others record what held.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/sched"
)

// drainProbeConfig is the web VIP with 4 backends under scheduler, with
// active TCP checks when checked, on_down onDown ("" for the default),
// slow_start ss and drain_timeout dt.
func drainProbeConfig(scheduler string, checked bool, onDown, ss, dt string, extra ...string) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", append([]string{`slow_start = "` + ss + `"`, `drain_timeout = "` + dt + `"`}, extra...)...)
	if checked {
		b.Section("health", `kind = "tcp"`)
	}
	keys := []string{`scheduler = "` + scheduler + `"`}
	if onDown != "" {
		keys = append(keys, `on_down = "`+onDown+`"`)
	}
	return b.Web(4, keys...).String()
}

// openOn opens flows (SYN then ACK) from sport on until want of them are
// on backend dst, trying at most 4000 ports; it returns their ports.
func openOn(t *testing.T, f *fixture, sport uint16, dst netip.Addr, want int) []uint16 {
	t.Helper()
	var out []uint16
	for p := sport; len(out) < want && p < sport+4000; p++ {
		r := f.lc.send(syn(t, p, "S"))
		if r.verdict != dataplane.Tx {
			t.Fatalf("SYN from %d: %v", p, r.verdict)
		}
		if a := f.lc.send(syn(t, p, "A")); a.dst != r.dst {
			t.Fatalf("ACK from %d went to %v, its SYN to %v", p, a.dst, r.dst)
		}
		if r.dst == dst {
			out = append(out, p)
		}
	}
	if len(out) < want {
		t.Fatalf("only %d flows landed on %v", len(out), dst)
	}
	return out
}

func (f *fixture) dpAllUp(names ...string) {
	f.t.Helper()
	for _, n := range names {
		if err := f.plane.SetHealth("web", n, true, "ok"); err != nil {
			f.t.Fatal(err)
		}
	}
	f.rebuild()
}

// Was a defect (fixed; the test guards it): a drained backend whose health checks then fail is not treated
// as down. effective() takes the "drained" case first, so the backend is
// published with Down false and Unhealthy false: under on_down = "move"
// its tracked flows stay on the dead server (until drain_timeout, or
// forever with the default drain_timeout 0), where an undrained dead
// backend's flows are moved at once.
func TestDrainProbeDrainedThenDownOnDownMove(t *testing.T) {
	for _, order := range []string{"drain-then-down", "down-then-drain"} {
		t.Run(order, func(t *testing.T) {
			f := newFixture(t, drainProbeConfig("maglev", true, "move", "0s", "0s"))
			f.dpAllUp("be1", "be2", "be3", "be4")
			be2 := f.addr("be2")
			ports := openOn(t, f, 10000, be2, 40)
			// Half of them send nothing between the two changes.
			if order == "drain-then-down" {
				if err := f.plane.Drain("web", "be2"); err != nil {
					t.Fatal(err)
				}
				f.setHealth("be2", false)
			} else {
				f.setHealth("be2", false)
				for _, p := range ports[:20] {
					f.lc.send(syn(t, p, "A")) // moved while down (move)
				}
				if err := f.plane.Drain("web", "be2"); err != nil {
					t.Fatal(err)
				}
			}
			b := pubBackend(t, f.shared, "web", "be2")
			if !b.Down || !b.Unhealthy {
				t.Errorf("be2 drained and failing its checks, on_down move: published down %v unhealthy %v; want both true",
					b.Down, b.Unhealthy)
			}
			stayed := 0
			for _, p := range ports[20:] {
				if f.lc.send(syn(t, p, "PA")).dst == be2 {
					stayed++
				}
			}
			if stayed != 0 {
				t.Errorf("%d of 20 tracked flows still forwarded to be2, which is down with on_down = move (and drained); want 0", stayed)
			}
		})
	}
}

// Was a defect (fixed; the test guards it): the same, under on_down = "keep" (the default): a drained
// backend whose checks fail loses its Unhealthy mark, so a SYN on a live
// tuple pinned to it follows the pin to the dead server (the guard in
// selectBackend, TestSYNDoesNotFollowAPinToAnUnhealthyBackend, looks at
// Unhealthy). Undrained, the same SYN goes elsewhere.
func TestDrainProbeDrainedDeadBackendTakesReusedSYN(t *testing.T) {
	for _, drain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drained=%v", drain), func(t *testing.T) {
			f := newFixture(t, drainProbeConfig("maglev", true, "", "0s", "0s"))
			f.dpAllUp("be1", "be2", "be3", "be4")
			be2 := f.addr("be2")
			ports := openOn(t, f, 12000, be2, 20)
			if drain {
				if err := f.plane.Drain("web", "be2"); err != nil {
					t.Fatal(err)
				}
			}
			f.setHealth("be2", false)
			toDead := 0
			for _, p := range ports {
				if f.lc.send(syn(t, p, "S")).dst == be2 {
					toDead++
				}
			}
			if toDead != 0 {
				t.Errorf("drained %v: %d of %d new connections (SYN on a reused tuple) sent to be2, whose checks fail; want 0",
					drain, toDead, len(ports))
			}
		})
	}
}

// Was a defect (fixed; the test guards it): README: "fulcrumctl backends web shows the flows it still holds;
// it is safe to stop when they reach 0". The count leaves out closing
// entries (dataplane opCountFlows), but a client's FIN closes only its
// half: its ACKs of a download the server still sends keep going to the
// drained backend for up to tcp_closing (120 s). The count reads 0 while
// the LB still forwards those flows' packets to it.
func TestDrainProbeFlowsZeroWhileHalfClosedFlowsForwarded(t *testing.T) {
	f := newFixture(t, drainProbeConfig("maglev", false, "", "0s", "0s"))
	be2 := f.addr("be2")
	ports := openOn(t, f, 14000, be2, 10)
	if err := f.plane.Drain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	if n := f.backend("be2").Flows; n != uint64(len(ports)) {
		t.Fatalf("be2 drained with %d established flows: Flows %d", len(ports), n)
	}
	// Each client half-closes (shutdown(SHUT_WR)); the server still sends.
	for _, p := range ports {
		if d := f.lc.send(syn(t, p, "FA")).dst; d != be2 {
			t.Fatalf("FIN of %d went to %v", p, d)
		}
	}
	// The downloads go on: the clients' ACKs still reach be2. From the
	// second ACK after its FIN a connection shows as in use again (one
	// ACK is how a client's close ends: the ACK of the server's FIN).
	for round := range 2 {
		still := 0
		for _, p := range ports {
			if f.lc.send(syn(t, p, "A")).dst == be2 {
				still++
			}
		}
		if still != len(ports) {
			t.Fatalf("ACK %d: %d of %d half-closed flows still forwarded to be2", round, still, len(ports))
		}
	}
	if flows := f.backend("be2").Flows; flows != uint64(len(ports)) {
		t.Errorf("drained be2 shows Flows %d (0 reads \"safe to stop\") while the LB forwards %d half-closed downloads to it", flows, len(ports))
	}
}

// Was a defect (fixed; the test guards it): under a load-based scheduler, a retransmitted SYN (the entry
// still new: no SYN-ACK reached the client) keeps its first choice even
// when that backend's checks now fail (on_down keep, the default): the
// connection attempt retries against the dead server until the entry
// idles out (tcp_syn, 10 s: Linux's retries at 1, 3, 7 and 15 s all go
// there). Under Maglev the retransmission takes the table's current
// choice, and a SYN on a live tuple is kept only off an unhealthy backend.
func TestDrainProbeRetransmittedSYNFollowsPinToDeadBackend(t *testing.T) {
	for _, k := range sched.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			f := newFixture(t, drainProbeConfig(k.String(), true, "", "0s", "0s"))
			f.dpAllUp("be1", "be2", "be3", "be4")
			be2 := f.addr("be2")
			var ports []uint16
			for p := uint16(16000); len(ports) < 10 && p < 18000; p++ {
				if f.lc.send(syn(t, p, "S")).dst == be2 { // SYN only: no handshake yet
					ports = append(ports, p)
				}
			}
			if len(ports) < 10 {
				t.Fatalf("only %d SYNs on be2", len(ports))
			}
			f.setHealth("be2", false)
			toDead := 0
			for _, p := range ports {
				if f.lc.send(syn(t, p, "S")).dst == be2 {
					toDead++
				}
			}
			if toDead != 0 {
				t.Errorf("%s: %d of %d retransmitted SYNs sent to be2 after its checks failed; want 0", k, toDead, len(ports))
			}
		})
	}
}

// Was a defect (fixed; the test guards it): draining every backend of a VIP withdraws it: the snapshot has
// no table, and announceLocked announces only VIPs with a table. The
// README promises a drained backend's "established flows keep going to it
// until they end", but once the routers withdraw the VIP they no longer
// reach this instance (with drain = true in the fleet's config, no
// instance announces it: every established connection is cut at once).
func TestDrainProbeDrainAllWithdrawsVIP(t *testing.T) {
	f := newFixture(t, drainProbeConfig("maglev", false, "", "0s", "0s"))
	var last []netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { last = append([]netip.Prefix(nil), set...) }, nil)
	if len(last) != 1 {
		t.Fatalf("announced %v at start", last)
	}
	ports := openOn(t, f, 19000, f.addr("be1"), 5)
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		if err := f.plane.Drain("web", b); err != nil {
			t.Fatal(err)
		}
	}
	// Locally the established flows are still forwarded...
	for _, p := range ports {
		if d := f.lc.send(syn(t, p, "PA")).dst; d != f.addr("be1") {
			t.Fatalf("flow %d on drained be1 went to %v", p, d)
		}
	}
	if n := f.backend("be1").Flows; n != uint64(len(ports)) {
		t.Fatalf("be1 holds %d flows, want %d", n, len(ports))
	}
	// ...but the VIP is withdrawn, so they stop arriving.
	if len(last) != 1 {
		t.Errorf("every backend drained, be1 still holding %d established flows: announced %v; want the VIP kept announced until they end",
			len(ports), last)
	}
}

// A VIP whose backends are all drained stays announced only while a
// drained backend can still take its flows: once the drain timeout has
// sent them all down it is withdrawn, and undrained it comes back. A fresh
// instance, which holds no flows, does not announce a VIP configured with
// every backend drained.
func TestDrainAllThenTimeoutWithdraws(t *testing.T) {
	f := newFixture(t, drainProbeConfig("maglev", false, "", "0s", "30s"))
	var last []netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { last = append([]netip.Prefix(nil), set...) }, nil)
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		if err := f.plane.Drain("web", b); err != nil {
			t.Fatal(err)
		}
	}
	if len(last) != 1 {
		t.Fatalf("every backend drained: announced %v, want kept", last)
	}
	f.advance(30 * time.Second)
	f.rebuild()
	if len(last) != 0 {
		t.Errorf("every drain timed out (backends down): announced %v, want withdrawn", last)
	}
	if err := f.plane.Undrain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	if len(last) != 1 {
		t.Errorf("be2 undrained: announced %v", last)
	}

	all := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		VIP("web", configtest.Web, 80).
		Backend("be1", "10.0.1.1", "drain = true").Backend("be2", "10.0.1.2", "drain = true").String()
	g := newFixture(t, all)
	var got []netip.Prefix
	called := false
	g.plane.SetAnnouncer(func(set []netip.Prefix) { got, called = set, true }, nil)
	if !called || len(got) != 0 {
		t.Errorf("fresh instance, every backend drained by its configuration: called %v, announced %v; want nothing announced", called, got)
	}
}

// Was a defect (fixed; the test guards it): the control plane keys backend state by VIP name, the dataplane
// by the VIP's address, port and protocol (a renamed VIP keeps its id and
// its backends theirs: backendIdent). A reload that only renames a VIP
// therefore forgets every operator drain and weight override of it, and
// its checked backends start down "not checked yet", as if added.
func TestDrainProbeVIPRenameForgetsDrainAndHealth(t *testing.T) {
	cfg := drainProbeConfig("maglev", true, "", "0s", "0s", "panic_threshold = 0")
	f := newFixture(t, cfg)
	f.dpAllUp("be1", "be2", "be3", "be4")
	if err := f.plane.Drain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.SetWeight("web", "be3", 0); err != nil {
		t.Fatal(err)
	}
	be1 := f.addr("be1")
	ports := openOn(t, f, 21000, be1, 5)
	f.apply(strings.Replace(cfg, `name = "web"`, `name = "www"`, 1))
	st := f.plane.Status(false)
	if len(st.VIPs) != 1 {
		t.Fatalf("%d VIPs", len(st.VIPs))
	}
	v := st.VIPs[0]
	var problems []string
	if !v.Serving {
		problems = append(problems, "the renamed VIP serves no new flow (every backend down, 'not checked yet')")
	}
	for _, b := range v.Backends {
		switch {
		case b.Name == "be2" && !b.Drained:
			problems = append(problems, "be2's drain is gone")
		case b.Name == "be3" && b.Weight != 0:
			problems = append(problems, fmt.Sprintf("be3's weight override 0 is gone (weight %d)", b.Weight))
		case b.Health == "down":
			problems = append(problems, b.Name+" is down: "+b.Reason)
		}
	}
	// The dataplane kept the flows (same ids).
	for _, p := range ports {
		if d := f.lc.send(syn(t, p, "PA")).dst; d != be1 {
			t.Fatalf("flow %d left be1 for %v on a rename", p, d)
		}
	}
	if len(problems) > 0 {
		t.Errorf("a reload that only renamed the VIP web -> www: %s", strings.Join(problems, "; "))
	}
}

// Held: under every scheduler a drained backend keeps its established
// flows and takes no new ones (including TCP segments of flows this
// instance does not know, placed by the table, and UDP), and Flows counts
// them down as they close.
func TestDrainProbeEverySchedulerKeepsAndStops(t *testing.T) {
	for _, k := range sched.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			f := newFixture(t, drainProbeConfig(k.String(), false, "", "0s", "0s"))
			be2 := f.addr("be2")
			ports := openOn(t, f, 23000, be2, 20)
			if err := f.plane.Drain("web", "be2"); err != nil {
				t.Fatal(err)
			}
			for _, p := range ports {
				if d := f.lc.send(syn(t, p, "PA")).dst; d != be2 {
					t.Fatalf("established flow %d left drained be2 for %v", p, d)
				}
			}
			for p := uint16(30000); p < 30400; p++ {
				if d := f.lc.send(syn(t, p, "S")).dst; d == be2 {
					t.Fatalf("new flow %d went to drained be2", p)
				}
				if d := f.lc.send(syn(t, p+1000, "PA")).dst; d == be2 { // mid-stream, unknown
					t.Fatalf("unknown mid-stream flow %d went to drained be2", p+1000)
				}
			}
			if n := f.backend("be2").Flows; n != uint64(len(ports)) {
				t.Errorf("drained be2: Flows %d, want %d", n, len(ports))
			}
			for _, p := range ports[:5] {
				f.lc.send(syn(t, p, "R"))
			}
			if n := f.backend("be2").Flows; n != uint64(len(ports)-5) {
				t.Errorf("after 5 RSTs: Flows %d, want %d", n, len(ports)-5)
			}
			if b := f.backend("be2"); !b.Drained || b.Effective != 0 || b.Slots != 0 || b.SlowStart {
				t.Errorf("drained be2 status: %+v", b)
			}
		})
	}
}

// Held: a drain made through the API survives a reload whose config does
// not mention it (even one that changes the backend's weight), and the
// drain timeout runs from the drain, not from the reload.
func TestDrainProbeAPIDrainSurvivesReload(t *testing.T) {
	cfg := drainProbeConfig("maglev", false, "", "0s", "30s")
	f := newFixture(t, cfg)
	if err := f.plane.Drain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	f.advance(20 * time.Second)
	f.apply(strings.Replace(cfg, `address = "10.0.1.2"`, `address = "10.0.1.2"`+"\n  weight = 3", 1))
	if b := f.backend("be2"); !b.Drained || b.Effective != 0 || b.Down {
		t.Fatalf("after a reload that changed its weight: %+v", b)
	}
	f.advance(11 * time.Second)
	f.rebuild()
	if b := f.backend("be2"); !b.Down {
		t.Errorf("31 s after the drain (30 s timeout, reload at 20 s): down %v", b.Down)
	}
}

// Held: undrain mid-drain ramps from slow_start_min; a health flap in the
// ramp restarts it; a weight override mid-ramp ramps the new weight.
func TestDrainProbeUndrainRampAndFlap(t *testing.T) {
	f := newFixture(t, drainProbeConfig("maglev", true, "", "10s", "0s"))
	f.dpAllUp("be1", "be2", "be3", "be4")
	if err := f.plane.Drain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	f.advance(3 * time.Second)
	if err := f.plane.Undrain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	if w, _ := f.published("be2"); w != 10 {
		t.Errorf("just undrained: weight %d, want 10 (10%% of 100)", w)
	}
	f.advance(5 * time.Second)
	f.rebuild()
	if w, _ := f.published("be2"); w != 50 {
		t.Errorf("5 s into a 10 s ramp: weight %d, want 50", w)
	}
	f.setHealth("be2", false)
	f.setHealth("be2", true)
	if w, _ := f.published("be2"); w != 10 {
		t.Errorf("flapped mid-ramp: weight %d, want 10 (ramp restarted)", w)
	}
	if err := f.plane.SetWeight("web", "be2", 4); err != nil {
		t.Fatal(err)
	}
	f.advance(5 * time.Second)
	f.rebuild()
	if w, _ := f.published("be2"); w != 200 {
		t.Errorf("weight 4, 5 s into the ramp: weight %d, want 200", w)
	}
	f.advance(5 * time.Second)
	f.rebuild()
	if b := f.backend("be2"); b.Effective != 400 || b.SlowStart {
		t.Errorf("ramp over: %+v", b)
	}
}

// Was a defect (fixed; the test guards it): a backend set to weight 0
// (README: "0 stops new flows like a drain") and set back, by the API or a
// reload, took its full share at once; it slow-starts, as an undrained one.
func TestDrainProbeWeightZeroBackNoRamp(t *testing.T) {
	f := newFixture(t, drainProbeConfig("maglev", false, "", "10s", "0s"))
	if err := f.plane.SetWeight("web", "be2", 0); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Minute)
	if err := f.plane.SetWeight("web", "be2", 1); err != nil {
		t.Fatal(err)
	}
	if w, _ := f.published("be2"); w != WeightScale/10 {
		t.Errorf("weight 0 for a minute, then 1 (slow_start 10s): published %d at once, want the ramp's start %d", w, WeightScale/10)
	}
	f.advance(10 * time.Second)
	f.rebuild()
	if w, _ := f.published("be2"); w != WeightScale {
		t.Errorf("after the ramp: %d, want %d", w, WeightScale)
	}
	// The same through a reload: configured weight 0, then 1.
	g := newFixture(t, strings.Replace(drainProbeConfig("maglev", false, "", "10s", "0s"), `address = "10.0.1.2"`, `address = "10.0.1.2"`+"\nweight = 0", 1))
	g.advance(time.Minute)
	g.apply(drainProbeConfig("maglev", false, "", "10s", "0s"))
	if w, _ := g.published("be2"); w != WeightScale/10 {
		t.Errorf("configured weight 0, then 1 by a reload: published %d at once, want %d", w, WeightScale/10)
	}
}

// Held: weights outside 0..65535 are refused by SetWeight; 65535 beside 1
// builds, and the weight-1 backend still keeps a slot.
func TestDrainProbeWeightBounds(t *testing.T) {
	f := newFixture(t, drainProbeConfig("maglev", false, "", "0s", "0s"))
	for _, w := range []int{-1, 65536, 1 << 40, -1 << 62} {
		if err := f.plane.SetWeight("web", "be2", w); err == nil {
			t.Errorf("SetWeight %d accepted", w)
		}
	}
	for _, b := range []string{"be1", "be2", "be3"} {
		if err := f.plane.SetWeight("web", b, 65535); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.plane.SetWeight("web", "be4", 1); err != nil {
		t.Fatal(err)
	}
	b := f.backend("be4")
	if b.Effective != WeightScale {
		t.Errorf("be4 weight 1: effective %d", b.Effective)
	}
	t.Logf("be4 weight 1 beside three of 65535: %d slots of %d", b.Slots, f.plane.Status(false).VIPs[0].TableSize)
	for _, n := range []string{"be1", "be2", "be3", "be4"} {
		if err := f.plane.SetWeight("web", n, 0); err != nil {
			t.Fatal(err)
		}
	}
	if v := f.plane.Status(false).VIPs[0]; v.Serving {
		t.Error("every weight 0: VIP still serving")
	}
	if d := f.lc.send(syn(t, 40000, "S")); d.verdict == dataplane.Tx {
		t.Errorf("every weight 0: a new flow forwarded to %v", d.dst)
	}
}

// runPlane runs the plane's loop until the test ends.
func (f *fixture) runPlane() {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() { f.plane.Run(done); close(exited) }()
	f.t.Cleanup(func() { close(done); <-exited })
}

// waitDown polls the published snapshot for be's Down until deadline.
func (f *fixture) waitDown(name string, within time.Duration) bool {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, down := f.published(name); down {
			return true
		}
	}
	return false
}

// Held: the plane's loop applies a drain timeout by itself (no other
// rebuild) within about a second of it passing.
func TestDrainProbeRunAppliesDrainTimeout(t *testing.T) {
	f := newFixture(t, drainProbeConfig("maglev", false, "", "0s", "30s"))
	if err := f.plane.Drain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	f.runPlane()
	f.advance(31 * time.Second)
	if !f.waitDown("be2", 3*time.Second) {
		t.Error("be2 not down 1 s past its drain timeout, 3 s of the loop later")
	}
}

// Was a defect (fixed; the test guards it): the loop steps a drain timeout only while now is within
// [drainedAt, drainedAt+timeout+2s) at one of its once-a-second ticks
// (drainTimeoutPending). If no tick lands in that 2-second window (the
// loop held up by a long rebuild or reload under the plane's lock, a
// paused VM, a forward clock step), the timeout is never applied: the
// drained backend keeps its flows until some unrelated rebuild happens.
func TestDrainProbeDrainTimeoutMissedWindow(t *testing.T) {
	f := newFixture(t, drainProbeConfig("maglev", false, "", "0s", "30s"))
	be2 := f.addr("be2")
	ports := openOn(t, f, 25000, be2, 5)
	if err := f.plane.Drain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	f.runPlane()
	f.advance(33 * time.Second) // the loop saw no tick between 30 s and 32 s
	if !f.waitDown("be2", 3*time.Second) {
		stay := 0
		for _, p := range ports {
			if f.lc.send(syn(t, p, "PA")).dst == be2 {
				stay++
			}
		}
		t.Errorf("33 s into a 30 s drain timeout, 3 s of the loop later: be2 not down, %d of %d flows still forwarded to it", stay, len(ports))
	}
}
