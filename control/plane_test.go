package control

import (
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/flow"
)

var baseConfig = baseHead().Web(4).String()

// baseHead is baseConfig without its VIP.
func baseHead() *configtest.Builder {
	return configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "10s"`, `drain_timeout = "0s"`)
}

// lcore is the dataplane worker of the tests, driven by a goroutine as a
// real lcore would be (package dptest).
type lcore struct {
	*dptest.Lcore
	w *dataplane.Worker
}

type result struct {
	verdict dataplane.Verdict
	dst     netip.Addr
}

func newLcore(t *testing.T, shared *dataplane.Shared, cfg *config.Config) *lcore {
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	l := dptest.NewLcore(t, shared, cfg.Conntrack, key)
	return &lcore{Lcore: l, w: l.Worker}
}

func (l *lcore) send(f []byte) result {
	r := l.Send(f)
	return result{verdict: r.Verdict, dst: r.Backend}
}

// syn builds a TCP frame from the test client to the "web" VIP.
func syn(t *testing.T, sport uint16, flags string) []byte {
	return dptest.TCP(t, sport, netip.MustParseAddrPort("203.0.113.7:80"), flags)
}

type fixture struct {
	t      *testing.T
	cfg    *config.Config
	shared *dataplane.Shared
	plane  *Plane
	lc     *lcore
	clock  atomic.Int64 // unix nanos
	stride atomic.Int64 // nanos the clock moves at each reading (0: only advance moves it)
}

func newFixture(t *testing.T, toml string) *fixture {
	t.Helper()
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, cfg: cfg, shared: &dataplane.Shared{}}
	f.clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	f.lc = newLcore(t, f.shared, cfg)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))
	f.plane, err = newPlane(cfg, f.shared, []*dataplane.Worker{f.lc.w}, log, func() time.Time { return time.Unix(0, f.clock.Add(f.stride.Load())) })
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) advance(d time.Duration) { f.clock.Add(int64(d)) }

func (f *fixture) addr(name string) netip.Addr {
	for _, b := range f.plane.Config().VIPs[0].Backends {
		if b.Name == name {
			return b.Address.Addr
		}
	}
	f.t.Fatalf("no backend %s", name)
	return netip.Addr{}
}

func (f *fixture) backend(name string) BackendStatus {
	for _, b := range f.plane.Status(true).VIPs[0].Backends {
		if b.Name == name {
			return b
		}
	}
	f.t.Fatalf("no backend %s", name)
	return BackendStatus{}
}

func TestDrainKeepsEstablishedFlows(t *testing.T) {
	f := newFixture(t, baseConfig)
	const n = 400
	first := make([]netip.Addr, n)
	for i := range first {
		first[i] = f.lc.send(syn(t, uint16(1000+i), "S")).dst
	}
	be1 := f.addr("be1")
	var onBe1 int
	for _, d := range first {
		if d == be1 {
			onBe1++
		}
	}
	if err := f.plane.Drain("web", "be1"); err != nil {
		t.Fatal(err)
	}
	if st := f.backend("be1"); !st.Drained || st.Slots != 0 || st.Flows != uint64(onBe1) {
		t.Errorf("be1 after drain: %+v; want drained, 0 slots, %d flows", st, onBe1)
	}
	for i := range first {
		if d := f.lc.send(syn(t, uint16(1000+i), "A")).dst; d != first[i] {
			t.Fatalf("established flow %d moved from %v to %v", i, first[i], d)
		}
	}
	for i := 0; i < n; i++ {
		if d := f.lc.send(syn(t, uint16(20000+i), "S")).dst; d == be1 {
			t.Fatalf("new flow %d went to the drained backend", i)
		}
	}
	if err := f.plane.Drain("web", "nope"); err == nil {
		t.Error("draining an unknown backend succeeded")
	}
	// Undrain: it takes new flows again, ramping (slow start).
	if err := f.plane.Undrain("web", "be1"); err != nil {
		t.Fatal(err)
	}
	st := f.backend("be1")
	if st.Drained || !st.SlowStart || st.Effective != 100*1*1/10 {
		t.Errorf("be1 after undrain: %+v; want slow start at 10%% (effective 10)", st)
	}
	f.advance(5 * time.Second)
	f.plane.Kick()
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	if st := f.backend("be1"); st.Effective != 50 {
		t.Errorf("halfway through slow start: effective %d, want 50", st.Effective)
	}
	f.advance(6 * time.Second)
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	ramping := f.plane.ramping
	f.plane.mu.Unlock()
	if st := f.backend("be1"); st.Effective != 100 || st.SlowStart || ramping {
		t.Errorf("after slow start: %+v ramping %v", st, ramping)
	}
}

func TestHealthDownMovesFlowsAndPanicMode(t *testing.T) {
	f := newFixture(t, checkedConfig("move"))
	// Checked backends start unknown, routed like up, until their checks
	// give a verdict (converge.go): no panic mode, all of them used.
	if v := f.plane.Status(false).VIPs[0]; v.Panic || !v.Serving {
		t.Fatalf("initial: panic %v serving %v", v.Panic, v.Serving)
	}
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		f.plane.SetHealth("web", b, true, "tcp connect ok")
	}
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	if v := f.plane.Status(false).VIPs[0]; v.Panic {
		t.Fatal("panic mode with every backend up")
	}
	const n = 400
	first := make([]netip.Addr, n)
	for i := range first {
		first[i] = f.lc.send(syn(t, uint16(3000+i), "S")).dst
	}
	f.plane.SetHealth("web", "be2", false, "tcp connect: connection refused")
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	be2 := f.addr("be2")
	for i := range first {
		d := f.lc.send(syn(t, uint16(3000+i), "A")).dst
		if d == be2 {
			t.Fatalf("flow %d still on the down backend", i)
		}
		if first[i] != be2 && d != first[i] {
			t.Fatalf("flow %d on a healthy backend moved", i)
		}
	}
	st := f.backend("be2")
	if st.Health != "down" || !st.Down || st.Effective != 0 || st.Reason == "" {
		t.Errorf("be2: %+v", st)
	}
	// Two of four down is exactly the threshold (0.5): not panic. Three
	// down is below it: panic, all four used again.
	f.plane.SetHealth("web", "be3", false, "refused")
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	if f.plane.Status(false).VIPs[0].Panic {
		t.Error("panic at 2 of 4 healthy (threshold 0.5)")
	}
	f.plane.SetHealth("web", "be4", false, "refused")
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	v := f.plane.Status(false).VIPs[0]
	if !v.Panic {
		t.Fatal("no panic mode at 1 of 4 healthy")
	}
	for _, b := range v.Backends {
		if b.Slots == 0 || b.Down {
			t.Errorf("panic mode: %s has %d slots, down %v", b.Name, b.Slots, b.Down)
		}
	}
}

func TestReloadRejectsBadConfigKeepsTables(t *testing.T) {
	f := newFixture(t, baseConfig)
	before := f.shared.Services.Load()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte(strings.Replace(baseConfig, `address = "10.0.1.4"`, `address = "10.0.1.999"`, 1)), 0o644)
	if err := f.plane.Reload(bad); err == nil {
		t.Fatal("bad config accepted")
	}
	restart := filepath.Join(dir, "restart.toml")
	os.WriteFile(restart, []byte(strings.Replace(baseConfig, "000102030405060708090a0b0c0d0e0f", "ffffffffffffffffffffffffffffffff", 1)), 0o644)
	if err := f.plane.Reload(restart); err == nil || !strings.Contains(err.Error(), "hash_key") {
		t.Fatalf("hash key change: %v", err)
	}
	if f.shared.Services.Load() != before {
		t.Fatal("a rejected reload replaced the tables")
	}
	// A good reload: be4 removed, be5 added; the others keep their ids.
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte(strings.Replace(baseConfig, `name = "be4"
  address = "10.0.1.4"`, `name = "be5"
  address = "10.0.1.5"`, 1)), 0o644)
	if err := f.plane.Reload(good); err != nil {
		t.Fatal(err)
	}
	after := f.shared.Services.Load()
	if after == before || after.Gen != before.Gen+1 {
		t.Fatalf("generation %d -> %d", before.Gen, after.Gen)
	}
	names := map[string]uint32{}
	for _, b := range after.Backends {
		if b != nil {
			names[b.Name] = b.ID
		}
	}
	if _, ok := names["be4"]; ok {
		t.Error("be4 still present")
	}
	for _, b := range before.Backends {
		if b != nil && b.Name != "be4" && names[b.Name] != b.ID {
			t.Errorf("%s changed id %d -> %d", b.Name, b.ID, names[b.Name])
		}
	}
}

func TestReloadRemovingVIPClearsItsConntrack(t *testing.T) {
	two := baseConfig + `
[[vip]]
name = "other"
address = "203.0.113.8"
port = 80
  [[vip.backend]]
  address = "10.0.2.1"
`
	// SYN entries live 10 s by default: make them outlive the test, so only
	// the clearing can empty the table.
	two = strings.Replace(two, "capacity = 65536", "capacity = 65536\ntcp_syn = \"5m\"", 1)
	f := newFixture(t, two)
	for i := 0; i < 50; i++ {
		f.lc.send(syn(t, uint16(100+i), "S"))
	}
	count := func() uint32 {
		op := dataplane.CountFlowsOp()
		if err := f.lc.w.Run(op, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		var n uint32
		for _, c := range op.Flows {
			n += c
		}
		return n
	}
	if n := count(); n != 50 {
		t.Fatalf("%d flows, want 50", n)
	}
	cfg, err := config.Parse([]byte(strings.Replace(two, `address = "203.0.113.7"`, `address = "203.0.113.9"`, 1)), "reload.toml")
	if err != nil {
		t.Fatal(err)
	}
	// "web" now has another address: the same name, a new VIP key. Its
	// old VIP id's flows must go.
	if err := f.plane.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("conntrack of the removed VIP still holds %d flows", count())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRebuildsUnderTrafficLoseNothing forwards continuously while the
// control plane rebuilds the table two hundred times: every packet is
// forwarded, none dropped.
func TestRebuildsUnderTrafficLoseNothing(t *testing.T) {
	f := newFixture(t, baseConfig)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			f.plane.SetWeight("web", "be3", 1+i%3)
		}
		close(stop)
	}()
	sent := 0
	for i := 0; ; i++ {
		select {
		case <-stop:
			wg.Wait()
			c := f.plane.Status(false).Workers[0]
			if c.Dropped() != 0 || c.Encap[0] != uint64(sent) {
				t.Fatalf("sent %d, forwarded %d, dropped %d (%s)", sent, c.Encap[0], c.Dropped(), dataplane.DropSummary(&c))
			}
			if st := f.plane.Status(false); st.Rebuilds < 200 {
				t.Errorf("%d rebuilds", st.Rebuilds)
			}
			return
		default:
		}
		flags := "S"
		if i%2 == 1 {
			flags = "A"
		}
		if r := f.lc.send(syn(t, uint16(i%5000), flags)); r.verdict != dataplane.Tx {
			t.Fatalf("packet %d: verdict %v", i, r.verdict)
		}
		sent++
	}
}

func TestKicksCoalesce(t *testing.T) {
	f := newFixture(t, baseConfig)
	before := f.plane.Status(false).Rebuilds
	for i := 0; i < 100; i++ {
		f.plane.Kick()
	}
	done := make(chan struct{})
	go f.plane.Run(done)
	deadline := time.Now().Add(5 * time.Second)
	for f.plane.Status(false).Rebuilds == before {
		if time.Now().After(deadline) {
			t.Fatal("no rebuild")
		}
		time.Sleep(time.Millisecond)
	}
	close(done)
	if got := f.plane.Status(false).Rebuilds - before; got != 1 {
		t.Errorf("100 kicks made %d rebuilds, want 1", got)
	}
}

func TestLookupExplainsTheChoice(t *testing.T) {
	f := newFixture(t, baseConfig)
	client, vip := netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("203.0.113.7")
	// A flow nobody has seen: the table decides.
	res, err := f.plane.Lookup(client, vip, 4242, 80, 6)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != "table" || res.Slot < 0 || res.VIP != "web" {
		t.Fatalf("unseen flow: %+v", res)
	}
	// The packet goes where the lookup said, and is then pinned.
	if got := f.lc.send(syn(t, 4242, "S")).dst.String(); got != res.Address {
		t.Fatalf("packet went to %s, lookup said %s", got, res.Address)
	}
	res2, err := f.plane.Lookup(client, vip, 4242, 80, 6)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Reason != "conntrack" || res2.Address != res.Address || res2.State != "new" {
		t.Errorf("seen flow: %+v", res2)
	}
	if res3, _ := f.plane.Lookup(client, netip.MustParseAddr("192.0.2.77"), 1, 80, 6); res3.Reason != "not-a-vip" {
		t.Errorf("non-VIP: %+v", res3)
	}
	tb, err := f.plane.Table("web")
	if err != nil || len(tb) != 65537 || tb[res.Slot] != res.Backend {
		t.Errorf("table dump: %d slots, err %v, slot %d = %q (lookup said %q)", len(tb), err, res.Slot, tb[res.Slot], res.Backend)
	}
}

func TestDrainTimeoutMovesTheRest(t *testing.T) {
	f := newFixture(t, strings.Replace(baseConfig, `drain_timeout = "0s"`, `drain_timeout = "30s"`, 1))
	var onBe1 []uint16
	be1 := f.addr("be1")
	for i := 0; i < 300; i++ {
		if f.lc.send(syn(t, uint16(6000+i), "S")).dst == be1 {
			onBe1 = append(onBe1, uint16(6000+i))
		}
	}
	if err := f.plane.Drain("web", "be1"); err != nil {
		t.Fatal(err)
	}
	// Within the timeout its flows stay...
	f.advance(29 * time.Second)
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	for _, p := range onBe1 {
		if f.lc.send(syn(t, p, "A")).dst != be1 {
			t.Fatal("a drained backend's flow moved before the drain timeout")
		}
	}
	// ...after it, they are moved.
	f.advance(2 * time.Second)
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	if st := f.backend("be1"); !st.Down {
		t.Fatalf("be1 after the drain timeout: %+v", st)
	}
	for _, p := range onBe1 {
		if f.lc.send(syn(t, p, "A")).dst == be1 {
			t.Fatal("a flow stayed on the drained backend after the timeout")
		}
	}
	if len(onBe1) == 0 {
		t.Fatal("no flow landed on be1")
	}
}

func TestAnnouncesOnlyServingVIPs(t *testing.T) {
	f := newFixture(t, baseConfig)
	var mu sync.Mutex
	var calls [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) {
		mu.Lock()
		calls = append(calls, set)
		mu.Unlock()
	}, func() []PeerInfo { return []PeerInfo{{Address: "10.0.0.1", State: "established"}} })
	last := func() []netip.Prefix {
		mu.Lock()
		defer mu.Unlock()
		return calls[len(calls)-1]
	}
	if got := last(); len(got) != 1 || got[0] != netip.MustParsePrefix("203.0.113.7/32") {
		t.Fatalf("announced %v", got)
	}
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		f.plane.Drain("web", b)
	}
	// Drained, not down: the established flows keep coming here until
	// they end (serving), so the address stays announced.
	if got := last(); len(got) != 1 {
		t.Errorf("every backend drained (alive, holding flows): announced %v, want the VIP kept", got)
	}
	if sv := f.shared.Services.Load(); sv.VIPs[0].Table != nil {
		t.Fatalf("every backend drained, yet a table")
	}
	f.plane.Undrain("web", "be3")
	if got := last(); len(got) != 1 {
		t.Errorf("after undrain: %v", got)
	}
	n := len(calls)
	f.plane.SetWeight("web", "be3", 2) // the set does not change: no call
	if len(calls) != n {
		t.Errorf("an unchanged set was announced again")
	}
	if st := f.plane.Status(false); len(st.BGP) != 1 || len(st.Announced) != 1 {
		t.Errorf("status: bgp %v announced %v", st.BGP, st.Announced)
	}
}

// A fresh instance must match the fleet at once: its first health verdicts
// do not slow-start, and its VIP is announced only once every check has
// given one.
func TestFreshInstanceAnnouncesSettledTables(t *testing.T) {
	toml := strings.Replace(baseConfig, "[[vip]]", "[health]\nkind = \"tcp\"\n\n[[vip]]", 1)
	f := newFixture(t, toml)
	var got [][]netip.Prefix
	f.plane.SetAnnouncer(func(set []netip.Prefix) { got = append(got, set) }, nil)
	for i, b := range []string{"be1", "be2", "be3"} {
		f.plane.SetHealth("web", b, true, "ok")
		f.plane.mu.Lock()
		f.plane.rebuildLocked()
		f.plane.mu.Unlock()
		if len(got) > 0 && len(got[len(got)-1]) > 0 {
			t.Fatalf("announced after %d of 4 verdicts", i+1)
		}
	}
	f.plane.SetHealth("web", "be4", true, "ok")
	f.plane.mu.Lock()
	f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	if len(got) == 0 || len(got[len(got)-1]) != 1 {
		t.Fatalf("not announced once every check settled: %v", got)
	}
	for _, b := range f.plane.Status(false).VIPs[0].Backends {
		if b.SlowStart || b.Effective != WeightScale {
			t.Errorf("%s slow-starts on its first verdict: %+v", b.Name, b)
		}
	}
}

// Passive health: a backend whose handshakes never complete is ejected,
// the others stay; after the backoff it comes back.
func TestPassiveEjection(t *testing.T) {
	toml := strings.Replace(baseConfig, "[[vip]]", "[health]\npassive_window = \"4s\"\npassive_min = 20\nflap_backoff = \"10s\"\n\n[[vip]]", 1)
	f := newFixture(t, toml)
	be2 := f.addr("be2")
	fold := func() bool {
		st := f.plane.Status(false)
		f.advance(time.Second)
		f.plane.mu.Lock()
		defer f.plane.mu.Unlock()
		ch := f.plane.foldSignals(st.Workers, f.plane.now())
		if ch {
			f.plane.rebuildLocked()
		}
		return ch
	}
	port := uint16(10000)
	for round := 0; round < 8; round++ { // ejected at the 7th fold (see passive_test.go)
		for i := 0; i < 60; i++ {
			port++
			if r := f.lc.send(syn(t, port, "S")); r.dst != be2 {
				f.lc.send(syn(t, port, "A")) // the others complete their handshakes
			}
		}
		fold()
	}
	st := f.backend("be2")
	// on_down keep (the default): no new flows, tracked ones stay.
	if !st.Outlier || st.Down || st.Slots != 0 || !strings.Contains(st.Reason, "handshakes failed") {
		t.Fatalf("be2 not ejected: %+v", st)
	}
	for _, b := range []string{"be1", "be3", "be4"} {
		if s := f.backend(b); s.Outlier || s.Slots == 0 {
			t.Errorf("%s ejected too: %+v", b, s)
		}
	}
	// After the backoff it is taken back (and judged afresh).
	for i := 0; i < 11; i++ {
		fold()
	}
	if st := f.backend("be2"); st.Outlier || st.Slots == 0 || st.Ejections != 1 {
		t.Errorf("be2 after its backoff: %+v", st)
	}
}

// The signals fold publishes the loads the schedulers read: active flows
// per backend summed over the workers.
func TestLoadsPublished(t *testing.T) {
	f := newFixture(t, baseConfig)
	for i := 0; i < 40; i++ {
		f.lc.send(syn(t, uint16(30000+i), "S"))
	}
	st := f.plane.Status(false)
	f.plane.mu.Lock()
	f.plane.foldSignals(st.Workers, f.plane.now())
	f.plane.mu.Unlock()
	loads := f.shared.Loads.Load()
	if loads == nil {
		t.Fatal("no loads published")
	}
	var total int64
	for _, a := range loads.Active {
		total += a
	}
	if total != 40 {
		t.Errorf("published active flows %d, want 40", total)
	}
}
