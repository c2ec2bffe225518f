package control

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/health"
)

// Several changes at once: reloads, operator actions and health verdicts
// interleaved as a careless operator and a hostile world produce them.
// Every assertion is on the published snapshot (what the dataplane uses),
// the announced set, or the Status the admin API shows.

// pubBackend is the published (dataplane) state of backend name of vip.
func pubBackend(t *testing.T, shared *dataplane.Shared, vip, name string) *dataplane.Backend {
	t.Helper()
	return published(t, shared, func(v *dataplane.VIP) bool { return v.Name == vip }, vip, name)
}

// pubByKey is the published backend name of the VIP with key k.
func pubByKey(t *testing.T, shared *dataplane.Shared, k flow.VIPKey, name string) *dataplane.Backend {
	t.Helper()
	return published(t, shared, func(v *dataplane.VIP) bool { return v.Key == k }, k.String(), name)
}

func published(t *testing.T, shared *dataplane.Shared, is func(*dataplane.VIP) bool, vip, name string) *dataplane.Backend {
	t.Helper()
	svc := shared.Services.Load()
	for _, v := range svc.VIPs {
		if v == nil || !is(v) {
			continue
		}
		for _, id := range v.Members {
			if b := svc.Backends[id]; b != nil && b.Name == name {
				return b
			}
		}
	}
	t.Fatalf("backend %s/%s not published", vip, name)
	return nil
}

func (f *fixture) apply(toml string) {
	f.t.Helper()
	if err := f.plane.Apply(mustParse(f.t, toml)); err != nil {
		f.t.Fatal(err)
	}
}

// Checks turned off by one reload and on again by the next (the second
// reverting the first): the backends served all along, unchecked and then
// "unknown" (routed like up), so their first verdict of up must not
// restart slow start: their weight in the table must not fall to
// slow_start_min of it.
func TestChecksOffAndOnAgainNoSlowStartDrop(t *testing.T) {
	checked := checkedConfig("")
	unchecked := strings.Replace(checked, "[health]\nkind = \"tcp\"\n", "[health]\nkind = \"none\"\n", 1)
	f := newFixture(t, checked)
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		f.setHealth(b, true)
	}
	f.advance(time.Minute)
	f.rebuild()
	if w := pubBackend(t, f.shared, "web", "be1").Weight; w != WeightScale {
		t.Fatalf("be1 weight %d before the reloads, want %d", w, WeightScale)
	}
	f.apply(unchecked)
	f.advance(time.Minute)
	f.apply(checked)
	if b := pubBackend(t, f.shared, "web", "be1"); b.Weight != WeightScale || b.Unhealthy {
		t.Fatalf("be1 after its check was added back: weight %d unhealthy %v; want %d (unknown serves like up)", b.Weight, b.Unhealthy, WeightScale)
	}
	f.setHealth("be1", true) // the new check's first verdict
	if b := pubBackend(t, f.shared, "web", "be1"); b.Weight != WeightScale {
		t.Errorf("be1, serving at full weight, dropped to weight %d (slow start restarted) when its re-added check passed; want %d",
			b.Weight, WeightScale)
	}
	if s := f.backend("be1"); s.SlowStart {
		t.Errorf("the API shows be1 slow-starting: %+v", s)
	}
}

// A backend added by a reload without checks served (after its ramp) at
// full weight; a later reload that adds a check must not ramp it again
// when the check passes.
func TestCheckAddedToReloadAddedBackendNoSlowStartDrop(t *testing.T) {
	unchecked := baseConfig
	plus := strings.Replace(unchecked, "  [[vip.backend]]\n  name = \"be4\"", "  [[vip.backend]]\n  name = \"be5\"\n  address = \"10.0.1.5\"\n  [[vip.backend]]\n  name = \"be4\"", 1)
	f := newFixture(t, unchecked)
	f.apply(plus)
	f.advance(time.Minute) // be5's slow start is long over
	f.rebuild()
	if w := pubBackend(t, f.shared, "web", "be5").Weight; w != WeightScale {
		t.Fatalf("be5 weight %d a minute after it was added, want %d", w, WeightScale)
	}
	f.apply(strings.Replace(plus, "[[vip]]", "[health]\nkind = \"tcp\"\n\n[[vip]]", 1))
	if err := f.plane.SetHealth("web", "be5", true, "test"); err != nil {
		t.Fatal(err)
	}
	f.rebuild()
	if w := pubBackend(t, f.shared, "web", "be5").Weight; w != WeightScale {
		t.Errorf("be5 dropped to weight %d when its newly added check passed; want %d", w, WeightScale)
	}
}

// drainCfg is baseConfig with a drain timeout, and be2 drained in the
// config when drained is true.
func drainCfg(drained bool) string {
	toml := strings.Replace(baseConfig, `drain_timeout = "0s"`, `drain_timeout = "30s"`, 1)
	if drained {
		toml = strings.Replace(toml, `address = "10.0.1.2"`, `address = "10.0.1.2"`+"\n  drain = true", 1)
	}
	return toml
}

// README: a backend that is "added, undrained or comes back up" ramps.
// Undrained by a reload (drain = true removed from the config) is
// undrained as much as by fulcrumctl undrain.
func TestConfigUndrainSlowStarts(t *testing.T) {
	f := newFixture(t, drainCfg(true))
	f.advance(time.Minute)
	f.rebuild()
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight != 0 {
		t.Fatalf("be2 drained in the config: weight %d", b.Weight)
	}
	f.apply(drainCfg(false))
	want := int(0.1 * WeightScale) // slow_start_min 10%
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight != want {
		t.Errorf("be2 undrained by a reload: published weight %d at once; want %d (slow start from slow_start_min)", b.Weight, want)
	}
	// The same through the API, for comparison: it ramps.
	f.apply(drainCfg(true))
	f.advance(time.Minute)
	if err := f.plane.Undrain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight != want {
		t.Errorf("be2 undrained by the API: weight %d, want %d", b.Weight, want)
	}
}

// An operator drains be2; the drain timeout passes and its flows are told
// to move (Down). Writing drain = true into the config and reloading (the
// operator making the drain permanent) must not restart the timeout: the
// remaining flows are not given back to the backend.
func TestConfigDrainKeepsOperatorsDrainTimeout(t *testing.T) {
	f := newFixture(t, drainCfg(false))
	if err := f.plane.Drain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	f.advance(40 * time.Second)
	f.rebuild()
	if b := pubBackend(t, f.shared, "web", "be2"); !b.Down || b.Weight != 0 {
		t.Fatalf("be2 40s into a 30s drain timeout: down %v weight %d; want down", b.Down, b.Weight)
	}
	f.apply(drainCfg(true))
	if b := pubBackend(t, f.shared, "web", "be2"); !b.Down || b.Weight != 0 {
		t.Errorf("be2 after a reload wrote its drain into the config: down %v weight %d; the drain timeout restarted", b.Down, b.Weight)
	}
}

// twoVIPs is checkedConfig with a second VIP on another address.
func twoVIPs(withWeb bool) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "10s"`, `drain_timeout = "0s"`).
		Section("health", `kind = "tcp"`)
	if withWeb {
		b = b.Web(2)
	}
	return b.VIP("other", "203.0.113.20", 80).Backend("o1", "10.0.9.1").String()
}

// A VIP removed by one reload and added back by the next (a revert): its
// backends start down, unchecked, as any backend a reload adds. Its
// address was withdrawn; it must not be announced again before its checks
// have given their verdicts (a VIP that is new at that address waits for
// them), and not in the panic mode of "every backend down, not checked
// yet".
func TestReaddedVIPWaitsForItsChecks(t *testing.T) {
	f := newFixture(t, twoVIPs(true))
	var last []netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { last = append([]netip.Prefix(nil), set...) }, nil)
	for _, r := range []dataplane.BackendRef{{VIP: "web", Backend: "be1"}, {VIP: "web", Backend: "be2"}, {VIP: "other", Backend: "o1"}} {
		if err := f.plane.SetHealth(r.VIP, r.Backend, true, "test"); err != nil {
			t.Fatal(err)
		}
	}
	f.rebuild()
	webP, otherP := netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("203.0.113.20/32")
	has := func(p netip.Prefix) bool {
		for _, x := range last {
			if x == p {
				return true
			}
		}
		return false
	}
	if !has(webP) || !has(otherP) {
		t.Fatalf("announced %v, want both VIPs", last)
	}
	f.apply(twoVIPs(false))
	if has(webP) || !has(otherP) {
		t.Fatalf("after the reload removing web: announced %v", last)
	}
	f.apply(twoVIPs(true))
	if has(webP) {
		t.Errorf("web added back by a reload announced before any check of its backends: %v (panic %v)", last, f.plane.Panicked()["web"])
	}
	// A VIP new at its address: the same rule (for comparison).
	if err := f.plane.SetHealth("web", "be1", true, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.SetHealth("web", "be2", false, "test"); err != nil {
		t.Fatal(err)
	}
	f.rebuild()
	if !has(webP) {
		t.Errorf("web not announced once its checks gave their verdicts: %v", last)
	}
}

// manualChecks points the plane's health Manager at cfg's targets with the
// given prober, without StartHealth's event loop: the test plays the loop,
// so it can hold an event as the loop does while it waits for the lock.
func manualChecks(t *testing.T, f *fixture, probe func(netip.AddrPort) error) *health.Manager {
	t.Helper()
	m := health.NewManager(health.ManagerOptions{NewProber: func(string, health.Target) (health.Prober, error) {
		return probeFunc(probe), nil
	}})
	t.Cleanup(m.Close)
	f.plane.mu.Lock()
	defer f.plane.mu.Unlock()
	targets, err := healthTargets(f.plane.cfg, f.shared.Services.Load())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Set(targets); err != nil {
		t.Fatal(err)
	}
	f.plane.checks = m
	return m
}

// nextEvent waits for the next event of key from m (others are applied,
// as the loop would).
func nextEvent(t *testing.T, f *fixture, m *health.Manager, key string, want health.State) health.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-m.Events():
			if ev.Key == key && ev.New == want {
				return ev
			}
			f.plane.healthEvent(ev)
		case <-deadline:
			t.Fatalf("no %v event for %s", want, key)
		}
	}
}

const fastChecks = "[health]\nkind = \"tcp\"\ninterval = \"10ms\"\ntimeout = \"5ms\"\nrise = 1\nfall = 1\n"

// A verdict of up that the event loop holds (waiting for the lock) while
// one reload removes the backend and the next adds it back at the same
// address: it is the old incarnation's verdict, and the new incarnation
// starts down until its own checks pass (README). Here they fail.
func TestStaleVerdictAcrossRemoveAndReadd(t *testing.T) {
	withBe2 := strings.Replace(baseConfig, "[[vip]]", fastChecks+"\n[[vip]]", 1)
	without := strings.Replace(withBe2, "  [[vip.backend]]\n  name = \"be2\"\n  address = \"10.0.1.2\"\n", "", 1)
	f := newFixture(t, withBe2)
	var be2Fails atomic.Bool
	be2 := netip.MustParseAddr("10.0.1.2")
	m := manualChecks(t, f, func(a netip.AddrPort) error {
		if a.Addr() == be2 && be2Fails.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	held := nextEvent(t, f, m, "web/be2", health.Up) // taken by the loop, which now waits for the lock
	be2Fails.Store(true)
	f.apply(without)
	f.apply(withBe2)
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight != 0 {
		t.Fatalf("be2 re-added: weight %d before any check", b.Weight)
	}
	f.plane.healthEvent(held) // the loop gets the lock at last
	f.rebuild()
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight != 0 || !b.Unhealthy {
		t.Errorf("re-added be2, whose checks fail, taken up by its removed incarnation's verdict: weight %d, unhealthy %v", b.Weight, b.Unhealthy)
	}
	if s := f.backend("be2"); s.Health == "up" {
		t.Errorf("the API shows be2 up: %+v", s)
	}
}

// The same with the check turned off and on again by two reloads: a down
// verdict of the old checker, held by the loop, must not take down the
// backend the new checker has said nothing about yet (unknown serves).
func TestStaleVerdictAcrossCheckOffAndOn(t *testing.T) {
	checked := strings.Replace(baseConfig, "[[vip]]", fastChecks+"\n[[vip]]", 1)
	unchecked := strings.Replace(checked, `kind = "tcp"`, `kind = "none"`, 1)
	slow := strings.Replace(checked, `interval = "10ms"`, `interval = "1m"`, 1) // its first check is far off
	f := newFixture(t, checked)
	be2 := netip.MustParseAddr("10.0.1.2")
	m := manualChecks(t, f, func(a netip.AddrPort) error {
		if a.Addr() == be2 {
			return errors.New("connection refused")
		}
		return nil
	})
	held := nextEvent(t, f, m, "web/be2", health.Down)
	f.apply(unchecked)
	f.apply(slow)
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight == 0 || b.Unhealthy {
		t.Fatalf("be2 with its check added back: weight %d unhealthy %v; want serving until a verdict", b.Weight, b.Unhealthy)
	}
	f.plane.healthEvent(held)
	f.rebuild()
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight == 0 || b.Unhealthy {
		t.Errorf("be2, checked afresh, taken down by the removed check's verdict: weight %d unhealthy %v", b.Weight, b.Unhealthy)
	}
}

// A thousand reloads, each adding or removing a checked VIP and moving a
// backend, with the health checks and the rebuild loop running: no
// goroutine (checker, clearing of a removed VIP's flows) outlives what it
// served.
func TestThousandReloadsLeakNoGoroutines(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 reloads")
	}
	a := strings.Replace(baseConfig, "[[vip]]", fastChecks+"\n[[vip]]", 1)
	b := strings.Replace(a, `address = "10.0.1.4"`, `address = "10.0.1.44"`, 1) +
		"\n[[vip]]\nname = \"extra\"\naddress = \"203.0.113.30\"\nport = 443\n  [[vip.backend]]\n  name = \"x1\"\n  address = \"10.0.8.1\"\n  [[vip.backend]]\n  name = \"x2\"\n  address = \"10.0.8.2\"\n"
	f := newFixture(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go f.plane.Run(done)
	if err := f.plane.StartHealth(ctx, health.ManagerOptions{NewProber: func(string, health.Target) (health.Prober, error) {
		return probeFunc(func(netip.AddrPort) error { return nil }), nil
	}}); err != nil {
		t.Fatal(err)
	}
	cfgA, cfgB := mustParse(t, a), mustParse(t, b)
	if err := f.plane.Apply(cfgB); err != nil { // every goroutine kind exists once
		t.Fatal(err)
	}
	if err := f.plane.Apply(cfgA); err != nil {
		t.Fatal(err)
	}
	settle := func() int {
		// Goroutines end asynchronously: take the lowest count seen while
		// it keeps falling.
		n := runtime.NumGoroutine()
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
			runtime.Gosched()
			if m := runtime.NumGoroutine(); m < n {
				n, end = m, time.Now().Add(500*time.Millisecond)
			}
		}
		return n
	}
	before := settle()
	for i := 0; i < 1000; i++ {
		cfg := cfgB
		if i%2 == 1 {
			cfg = cfgA
		}
		if err := f.plane.Apply(cfg); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	after := settle()
	for after > before+2 && time.Now().Before(deadline) {
		after = settle()
	}
	if after > before+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before 1,000 reloads, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// Two reloads overlap (SIGHUP and fulcrumctl reload; the operator saves
// the file between them): the first reads the old file, the second the
// new one and applies it, then the first gets the lock. The file's newer
// content must stay in force, and the snapshot must be the one built from
// it (here: be4's weight 7).
func TestOverlappingReloadsNewerReadWins(t *testing.T) {
	f := newFixture(t, baseConfig)
	path := filepath.Join(t.TempDir(), "fulcrum.toml")
	v1, v2 := withWeight(baseConfig, "10.0.1.4", "3"), withWeight(baseConfig, "10.0.1.4", "7")
	// Reload's steps, interleaved as two overlapping calls can run them.
	read := func(content string) (*config.Config, uint64) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		seq := f.plane.readSeq.Add(1)
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg, seq
	}
	old, s1 := read(v1)
	cur, s2 := read(v2)
	if err := f.plane.apply(cur, s2); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.apply(old, s1); err != nil {
		t.Fatal(err)
	}
	if w := *f.plane.Config().VIPs[0].Backends[3].Weight; w != 7 {
		t.Errorf("config in force after overlapping reloads: be4 weight %d; the file says 7", w)
	}
	if b := pubBackend(t, f.shared, "web", "be4"); b.Weight != 7*WeightScale {
		t.Errorf("published be4 weight %d, want %d (the file's)", b.Weight, 7*WeightScale)
	}
	// A plain sequence still applies every reload.
	if err := f.plane.Reload(writeTemp(t, v1)); err != nil {
		t.Fatal(err)
	}
	if w := *f.plane.Config().VIPs[0].Backends[3].Weight; w != 3 {
		t.Errorf("a later reload of weight 3 not applied: %d", w)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.toml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// An instance that converged long ago (here: nothing to wait for at
// start) gets a reload that turns checks on for the backends it started
// with: it is not a fresh instance again. Status must not say converging,
// nor count every new flow since start as forwarded while converging.
func TestChecksAddedByReloadDoNotReopenConvergence(t *testing.T) {
	f := newFixture(t, baseConfig)
	for i := 0; i < 30; i++ {
		f.lc.send(syn(t, uint16(3000+i), "S"))
	}
	st := f.plane.Status(false)
	if st.Converging || st.ConvergingNewFlows != 0 {
		t.Fatalf("unchecked instance: converging %v, %d flows", st.Converging, st.ConvergingNewFlows)
	}
	f.plane.mu.Lock()
	f.plane.foldSignals(st.Workers, f.plane.now())
	f.plane.mu.Unlock()
	f.apply(checkedConfig(""))
	if st := f.plane.Status(false); st.Converging || st.ConvergingNewFlows != 0 {
		t.Errorf("after a reload added checks: converging %v, converging_new_flows %d; want false, 0 (it converged at start)",
			st.Converging, st.ConvergingNewFlows)
	}
}
