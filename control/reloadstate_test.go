package control

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/health"
)

// What a reload does to the state a backend carries across it: the
// operator's weight, its health verdict, its incarnation in the dataplane,
// and what the reload reports when the kernel's side fails.

func mustParse(t *testing.T, toml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// withWeight gives backend addr of toml the weight w.
func withWeight(toml, addr string, w string) string {
	return strings.Replace(toml, `address = "`+addr+`"`, `address = "`+addr+`"`+"\nweight = "+w, 1)
}

// README: "fulcrumctl weight web be2 3 overrides the configured weight
// until a reload changes it". A reload that changes the configured weight
// ends the override; one that leaves it alone keeps it.
func TestReloadWeightChangeEndsOverride(t *testing.T) {
	f := newFixture(t, baseConfig)
	for _, name := range []string{"be2", "be3"} {
		if err := f.plane.SetWeight("web", name, 0); err != nil {
			t.Fatal(err)
		}
	}
	// be2: 1 -> 5 in the config; be3 unchanged.
	if err := f.plane.Apply(mustParse(t, withWeight(baseConfig, "10.0.1.2", "5"))); err != nil {
		t.Fatal(err)
	}
	// Back from 0 it slow-starts (10 s here), as an undrained backend.
	if b := f.backend("be2"); b.Effective != 5*WeightScale/10 || !b.SlowStart {
		t.Errorf("be2 back from weight 0: effective %d, slow start %v; want the ramp's start %d", b.Effective, b.SlowStart, 5*WeightScale/10)
	}
	f.advance(10 * time.Second)
	f.rebuild()
	if b := f.backend("be2"); b.Weight != 5 || b.Effective != 5*WeightScale || b.Slots == 0 {
		t.Errorf("be2 after a reload changed its weight 1 -> 5 over an override of 0: weight %d, effective %d, %d slots; want 5, %d, > 0",
			b.Weight, b.Effective, b.Slots, 5*WeightScale)
	}
	if b := f.backend("be3"); b.Weight != 0 || b.Effective != 0 || b.Slots != 0 {
		t.Errorf("be3, whose configured weight the reload left alone: weight %d, effective %d, %d slots; want the override (0) kept",
			b.Weight, b.Effective, b.Slots)
	}
	be2, be3 := f.addr("be2"), f.addr("be3")
	got2 := 0
	for i := range 400 {
		switch f.lc.send(syn(t, uint16(30000+i), "S")).dst {
		case be2:
			got2++
		case be3:
			t.Fatal("a new flow went to be3, whose override of 0 should hold")
		}
	}
	if got2 == 0 {
		t.Error("no new flow went to be2 (weight 5 of 8)")
	}
}

// The operator gave a backend weight 3; the config then takes it out with
// weight = 0. The reload must take it out.
func TestReloadWeightZeroEndsOverride(t *testing.T) {
	f := newFixture(t, baseConfig)
	if err := f.plane.SetWeight("web", "be2", 3); err != nil {
		t.Fatal(err)
	}
	if b := f.backend("be2"); b.Effective != 3*WeightScale {
		t.Fatalf("be2 effective %d after SetWeight 3", b.Effective)
	}
	if err := f.plane.Apply(mustParse(t, withWeight(baseConfig, "10.0.1.2", "0"))); err != nil {
		t.Fatal(err)
	}
	if b := f.backend("be2"); b.Weight != 0 || b.Effective != 0 || b.Slots != 0 {
		t.Errorf("be2 after a reload set weight = 0 over an override of 3: weight %d, effective %d, %d slots; want no new flows",
			b.Weight, b.Effective, b.Slots)
	}
	be2 := f.addr("be2")
	for i := range 400 {
		if f.lc.send(syn(t, uint16(31000+i), "S")).dst == be2 {
			t.Fatal("a new flow went to be2 after the reload gave it weight 0")
		}
	}
}

// chkBackend is backend name of the "chk" VIP in the published snapshot.
func chkBackend(t *testing.T, f *reloadFixture, name string) *dataplane.Backend {
	t.Helper()
	svc := f.shared.Services.Load()
	v := f.vip("chk")
	for _, id := range v.Members {
		if b := svc.Backends[id]; b != nil && b.Name == name {
			return b
		}
	}
	t.Fatalf("no backend chk/%s in the snapshot", name)
	return nil
}

func chkStatus(t *testing.T, f *reloadFixture, name string) BackendStatus {
	t.Helper()
	for _, b := range f.status("chk").Backends {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no backend chk/%s", name)
	return BackendStatus{}
}

// movedC1 is reloadBase with chk/c1 moved from 10.0.3.1 to 10.0.3.99.
var movedC1 = strings.Replace(reloadBase, `address = "10.0.3.1"`, `address = "10.0.3.99"`, 1)

// A checked backend keeps its name and moves to another address. The new
// server was never checked (README: "a backend added by a reload starts
// down until it passes rise checks"), and the flows tracked on the old one
// must not follow the name to it: the move is a removed backend and an
// added one, in the control plane (health, operator and passive state) and
// in the dataplane (a new incarnation, so its flows choose again).
func TestReloadAddressChangeIsNewBackend(t *testing.T) {
	f := newReloadFixture(t)
	for _, n := range []string{"c1", "c2"} {
		if err := f.plane.SetHealth("chk", n, true, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.plane.SetWeight("chk", "c2", 2); err != nil {
		t.Fatal(err)
	}
	// Tracked flows on both backends.
	old1, old2 := netip.MustParseAddr("10.0.3.1"), netip.MustParseAddr("10.0.3.2")
	new1 := netip.MustParseAddr("10.0.3.99")
	placed := map[uint16]netip.Addr{}
	on1 := 0
	for i := range 64 {
		sp := uint16(40000 + i)
		d := f.lc.Send(dptest.TCP(t, sp, webChk, "S")).Backend
		placed[sp] = d
		if d == old1 {
			on1++
		}
	}
	if on1 == 0 {
		t.Fatal("no flow on c1 before the move")
	}
	before := chkBackend(t, f, "c1")
	beforeC2 := chkBackend(t, f, "c2")
	gen := f.shared.Services.Load().Gen
	f.plane.mu.Lock()
	ref := dataplane.BackendRef{VIP: "chk", Backend: "c1"}
	f.plane.backends[ref].passive.ejections = 2 // some passive history on the old address
	f.plane.mu.Unlock()

	if err := f.plane.Apply(mustParse(t, movedC1)); err != nil {
		t.Fatal(err)
	}

	// The control plane: a new backend, down until its checks pass.
	s := chkStatus(t, f, "c1")
	if s.Address != new1.String() || s.Health != "down" || s.Effective != 0 || s.Slots != 0 || s.Reason != "not checked yet" {
		t.Errorf("c1 moved to %s, never checked there: address %s, health %q (%s), effective %d, %d slots; want down, not checked yet, no new flows",
			new1, s.Address, s.Health, s.Reason, s.Effective, s.Slots)
	}
	f.plane.mu.Lock()
	st := f.plane.backends[ref]
	if st.settled || st.everUp || st.initial || st.passive.ejections != 0 || st.addr != new1 || st.check != netip.AddrPortFrom(new1, 80) {
		t.Errorf("c1's state after the move: settled %v, everUp %v, initial %v, ejections %d, addr %v, check %v; want a fresh backend at %v",
			st.settled, st.everUp, st.initial, st.passive.ejections, st.addr, st.check, new1)
	}
	f.plane.mu.Unlock()
	if s := chkStatus(t, f, "c2"); s.Health != "up" || s.Weight != 2 {
		t.Errorf("c2, not moved, lost its state: health %q, weight %d", s.Health, s.Weight)
	}

	// The dataplane: c1 is a new incarnation; c2 keeps its id and
	// generation; one snapshot was published.
	after := chkBackend(t, f, "c1")
	if after.ID == before.ID && after.Gen == before.Gen {
		t.Errorf("c1 moved from %v to %v but kept id %d generation %d: its tracked flows follow the name to the new address",
			before.Addr, after.Addr, after.ID, after.Gen)
	}
	if c2 := chkBackend(t, f, "c2"); c2.ID != beforeC2.ID || c2.Gen != beforeC2.Gen {
		t.Errorf("c2 id/generation %d/%d -> %d/%d; want kept", beforeC2.ID, beforeC2.Gen, c2.ID, c2.Gen)
	}
	if g := f.shared.Services.Load().Gen; g != gen+1 {
		t.Errorf("snapshot generation %d -> %d; want one more", gen, g)
	}

	// The old address's flows choose again (c2: c1 is down); c2's stay.
	for sp, d := range placed {
		got := f.lc.Send(dptest.TCP(t, sp, webChk, "A")).Backend
		switch {
		case got == new1:
			t.Fatalf("flow %d, tracked on %v, was sent to %v, the address c1 moved to, which never served it", sp, d, new1)
		case d == old2 && got != old2:
			t.Fatalf("flow %d on c2 moved to %v", sp, got)
		case d == old1 && got != old2:
			t.Fatalf("flow %d on the old c1 went to %v; want it chosen again (c2)", sp, got)
		}
	}

	// Once its checks pass at the new address it takes new flows.
	if err := f.plane.SetHealth("chk", "c1", true, "2 consecutive checks passed"); err != nil {
		t.Fatal(err)
	}
	f.rebuild()
	if s := chkStatus(t, f, "c1"); s.Health != "up" || s.Slots == 0 {
		t.Errorf("c1 up at its new address: health %q, %d slots", s.Health, s.Slots)
	}
}

// An operator's override and drain belong to the server at the old address.
func TestReloadAddressChangeEndsOperatorState(t *testing.T) {
	f := newReloadFixture(t)
	if err := f.plane.SetWeight("web", "be2", 7); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Drain("web", "be1"); err != nil {
		t.Fatal(err)
	}
	toml := strings.Replace(reloadBase, `address = "10.0.1.2"`, `address = "10.0.1.22"`, 1)
	toml = strings.Replace(toml, `address = "10.0.1.1"`, `address = "10.0.1.11"`, 1)
	if err := f.plane.Apply(mustParse(t, toml)); err != nil {
		t.Fatal(err)
	}
	if b := f.webBackend("be2"); b.Weight != 1 || b.Address != "10.0.1.22" {
		t.Errorf("be2 moved: weight %d at %s; want the configured 1 at 10.0.1.22", b.Weight, b.Address)
	}
	if b := f.webBackend("be1"); b.Drained || b.Address != "10.0.1.11" {
		t.Errorf("be1 moved: drained %v at %s; want undrained at 10.0.1.11", b.Drained, b.Address)
	}
}

// A verdict from a backend's old address, still queued when a reload moves
// the backend, must not mark the unchecked new address up; the new
// address's verdicts apply.
func TestHealthEventFromOldAddressDropped(t *testing.T) {
	f := newReloadFixture(t)
	for _, n := range []string{"c1", "c2"} {
		if err := f.plane.SetHealth("chk", n, true, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.plane.Apply(mustParse(t, movedC1)); err != nil {
		t.Fatal(err)
	}
	f.plane.healthEvent(health.Event{Key: "chk/c1", Target: netip.MustParseAddrPort("10.0.3.1:80"), Addr: netip.MustParseAddrPort("10.0.3.1:80"),
		Old: health.Down, New: health.Up, Reason: "2 consecutive checks passed", Coalesced: 1})
	if s := chkStatus(t, f, "c1"); s.Health != "down" || s.Effective != 0 {
		t.Errorf("c1 at 10.0.3.99 after an event from 10.0.3.1: health %q (%s), effective %d; want down until its own checks pass",
			s.Health, s.Reason, s.Effective)
	}
	// Another port of the new address is not its check either.
	f.plane.healthEvent(health.Event{Key: "chk/c1", Target: netip.MustParseAddrPort("10.0.3.99:8080"), Addr: netip.MustParseAddrPort("10.0.3.99:8080"), New: health.Up, Coalesced: 1})
	if s := chkStatus(t, f, "c1"); s.Health != "down" {
		t.Errorf("c1 up from an event for another port: %q", s.Health)
	}
	// The new address's verdict counts however the check went: through
	// the tunnel it connects to the VIP (Addr), for the same backend
	// (Target).
	f.plane.healthEvent(health.Event{Key: "chk/c1", Target: netip.MustParseAddrPort("10.0.3.99:80"), Addr: netip.MustParseAddrPort("203.0.113.9:80"),
		Old: health.Unknown, New: health.Up, Reason: "2 consecutive checks passed", Coalesced: 1})
	if s := chkStatus(t, f, "c1"); s.Health != "up" {
		t.Errorf("c1 after its new address's checks passed: %q (%s); want up", s.Health, s.Reason)
	}
	// A removed backend's event is ignored.
	f.plane.healthEvent(health.Event{Key: "chk/gone", Target: netip.MustParseAddrPort("10.0.3.7:80"), New: health.Up, Coalesced: 1})
}

// probeFunc is a health.Prober from a function.
type probeFunc func(netip.AddrPort) error

func (p probeFunc) Probe(_ context.Context, a netip.AddrPort) (time.Duration, error) {
	return time.Millisecond, p(a)
}

// The whole path with a running health Manager: a backend up at its old
// address moves to one whose checks fail; it stays down, and comes up
// when they pass (the new address's events are not dropped).
func TestReloadAddressChangeWithRunningChecks(t *testing.T) {
	checked := strings.Replace(reloadBase, `kind = "tcp"`, `kind = "tcp"`+"\ninterval = \"20ms\"\ntimeout = \"10ms\"\nrise = 1\nfall = 1", 1)
	f := &reloadFixture{fixture: newFixture(t, checked)}
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: gwMAC4, MAC6: gwMAC6, Has4: true, Has6: true})
	f.plane.now = time.Now
	var newUp atomic.Bool
	moved := netip.MustParseAddr("10.0.3.99")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.plane.Run(ctx.Done())
	err := f.plane.StartHealth(ctx, health.ManagerOptions{NewProber: func(string, health.Target) (health.Prober, error) {
		return probeFunc(func(a netip.AddrPort) error {
			if a.Addr() == moved && !newUp.Load() {
				return errors.New("connection refused")
			}
			return nil
		}), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c1 up at its first address", func() bool { return chkStatus(t, f, "c1").Health == "up" })
	if err := f.plane.Apply(mustParse(t, strings.Replace(checked, `address = "10.0.3.1"`, `address = "10.0.3.99"`, 1))); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if s := chkStatus(t, f, "c1"); s.Health == "up" || s.Effective > 0 {
			t.Fatalf("c1 moved to %s, whose checks fail: health %q (%s), effective %d", moved, s.Health, s.Reason, s.Effective)
		}
	}
	newUp.Store(true)
	waitFor(t, "c1 up at its new address", func() bool { s := chkStatus(t, f, "c1"); return s.Health == "up" && s.Slots > 0 })
}

// The exception interface could not take the new lb_ipv4: the reload is
// in force (the snapshot uses it), and it says so instead of reporting
// success; the reload counter counts an error.
func TestReloadExceptionUpdateFailureReported(t *testing.T) {
	f := newReloadFixture(t)
	f.plane.SetOnApply(func(_, _ *config.Config) error { return errors.New("netlink: operation not permitted") })
	toml := edit(reloadBase, "dataplane", "lb_ipv4", `"192.0.2.20"`)
	cfg := mustParse(t, toml)
	err := f.plane.Apply(cfg)
	if err == nil || !errors.Is(err, ErrExceptionNotUpdated) || errors.Is(err, ErrNeedsRestart) ||
		!strings.Contains(err.Error(), "in force") || !strings.Contains(err.Error(), "operation not permitted") {
		t.Fatalf("Apply whose exception-interface update failed: %v; want an ErrExceptionNotUpdated naming the cause", err)
	}
	if f.plane.Config() != cfg {
		t.Error("the configuration is not in force after the exception interface failed")
	}
	if s := f.send(web, 10); s.outer4 == nil || s.outer4.SrcIP.String() != "192.0.2.20" {
		t.Errorf("outer source %v, want 192.0.2.20 (the snapshot is published)", s.outer4)
	}

	// Through Reload: counted as an error, not ok.
	path := filepath.Join(t.TempDir(), "f.toml")
	if err := os.WriteFile(path, []byte(edit(toml, "dataplane", "ttl", "9")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Reload(path); !errors.Is(err, ErrExceptionNotUpdated) {
		t.Fatalf("Reload: %v", err)
	}
	ops := f.plane.OpsStats()
	if ops.Reloads[ReloadError] != 1 || ops.Reloads[ReloadOK] != 0 || ops.Applied != 1 {
		t.Errorf("reloads %v, applied %d; want one error, no ok, and the configuration in force", ops.Reloads, ops.Applied)
	}
	// Once the interface takes it, the same reload succeeds.
	f.plane.SetOnApply(func(_, _ *config.Config) error { return nil })
	if err := f.plane.Reload(path); err != nil {
		t.Fatal(err)
	}
	if ops := f.plane.OpsStats(); ops.Reloads[ReloadOK] != 1 {
		t.Errorf("reloads %v after a good one", ops.Reloads)
	}
}
