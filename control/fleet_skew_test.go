package control

// Two instances of a fleet given the same random history, each with its
// own timing: its checks' verdicts and the operator's calls reach it up to
// skewMax later than the other, and its control loop steps at its own
// phase. Whatever happened in between, once both have been quiet for a
// slow start they must build the same table: a flow ECMP moves between
// them must reach the same backend.

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

const skewMax = 300 * time.Millisecond

// skewConfigs are the configurations the history reloads between: web's
// checked backends, with panic_threshold, slow_start, a weight and
// on_down changed, the VIP renamed, be5 replaced by be6.
var skewConfigs = smallTables(
	checkedWeb(5, "10s"),
	checkedWeb(5, "10s", "panic_threshold = 0.3"),
	checkedWeb(5, "20s"),
	strings.Replace(checkedWeb(5, "10s"), `name = "be2"`, "name = \"be2\"\nweight = 3", 1),
	strings.Replace(checkedWeb(5, "10s"), `port = 80`, "port = 80\non_down = \"move\"", 1),
	strings.Replace(checkedWeb(5, "10s"), `name = "web"`, `name = "www"`, 1),
	reloadWeb("web", "10s", "0.5", 1, 2, 3, 4, 6),
)

// smallTables gives each configuration's VIP a table of 1,021 slots: the
// history rebuilds some 150,000 times.
func smallTables(tomls ...string) []string {
	for i, t := range tomls {
		tomls[i] = strings.Replace(t, "port = 80", "port = 80\ntable_size = 1021", 1)
	}
	return tomls
}

// skewEvent is one thing that happens to both instances: at At on the
// first, at At+Delay[1] on the second (Delay[0] for the first is 0 or
// more too).
type skewEvent struct {
	At    time.Duration
	Delay [2]time.Duration
	Kind  string // "up", "down", "drain", "undrain", "weight", "reload"
	Name  string // the backend (not for reload)
	Arg   int    // weight, or the index of skewConfigs
}

func (e skewEvent) String() string {
	return fmt.Sprintf("%v %s %s %d (+%v/+%v)", e.At, e.Kind, e.Name, e.Arg, e.Delay[0], e.Delay[1])
}

// skewHistory draws n events. The verdicts of one backend reach each
// instance in the order its checks gave them (a later one never before an
// earlier one); the operator's calls and reloads too, among themselves.
// Verdicts and calls name the backends of the configuration in force,
// and reach an instance after the reload that put it in force (its checks
// of a backend a reload adds start with the reload).
func skewHistory(rng *rand.Rand, n int) []skewEvent {
	var out []skewEvent
	var at time.Duration
	var last [2]map[string]time.Duration // per instance: when the last event of a backend (or "op") arrived
	var reloaded [2]time.Duration        // per instance: when the last reload arrived
	for i := range last {
		last[i] = map[string]time.Duration{}
	}
	names := skewNames(0)
	for range n {
		gap := 3 * time.Second
		if rng.IntN(8) == 0 {
			gap = 30 * time.Second // long enough for outages past any slow start
		}
		at += time.Duration(rng.Int64N(int64(gap)))
		e := skewEvent{At: at, Name: names[rng.IntN(len(names))]}
		switch r := rng.IntN(20); {
		case r < 12:
			e.Kind = "down"
			if rng.IntN(2) == 0 {
				e.Kind = "up"
			}
		case r < 14:
			e.Kind = "drain"
		case r < 16:
			e.Kind = "undrain"
		case r < 18:
			e.Kind = "weight"
			e.Arg = []int{0, 1, 3, 100}[rng.IntN(4)]
		default:
			e.Kind, e.Name, e.Arg = "reload", "", rng.IntN(len(skewConfigs))
			names = skewNames(e.Arg)
		}
		key := e.Name
		if e.Kind != "up" && e.Kind != "down" {
			key = "op"
		}
		for i := range e.Delay {
			d := time.Duration(rng.Int64N(int64(skewMax)))
			floor, ok := last[i][key]
			if e.Kind != "reload" && reloaded[i] > floor {
				floor, ok = reloaded[i], true
			}
			if ok && at+d <= floor {
				d = floor - at + time.Millisecond
			}
			e.Delay[i] = d
			last[i][key] = at + d
			if e.Kind == "reload" {
				reloaded[i] = at + d
			}
		}
		out = append(out, e)
	}
	return out
}

// skewNames are the backends of skewConfigs[i].
func skewNames(i int) []string {
	cfg, err := config.Parse([]byte(skewConfigs[i]), "skew.toml")
	if err != nil {
		panic(err)
	}
	var out []string
	for _, b := range cfg.VIPs[0].Backends {
		out = append(out, b.Name)
	}
	return out
}

// skewInstance is one instance's fixture and the phase of its control
// loop's step.
type skewInstance struct {
	f     *fixture
	phase time.Duration
	t0    time.Time
	steps time.Duration // the next step, from t0

	// What its verdicts say of each backend; stretch: how long it has
	// been down by them and out of the table (not used by panic mode)
	// without a break, as seen at each event and step (lastObs); longEnd:
	// when such a stretch longer than any slow start last ended (used by
	// panic mode, or back up), and ssMin the shortest slow_start since.
	up       map[string]bool
	stretch  map[string]time.Duration
	out      map[string]bool // down and out of the table at lastObs
	lastObs  time.Time
	longEnd  map[string]time.Time
	ssMin    map[string]time.Duration
	violated string
}

// skewBackend is one backend as checkRamps reads it: its weight
// (configured or the operator's) and its weight in the published table.
type skewBackend struct {
	name      string
	base, eff int
}

// view reads the backends of the instance's VIP and whether it is in
// panic mode, as published (Status reads the same, at a much higher cost).
func (s *skewInstance) view() ([]skewBackend, bool) {
	p := s.f.plane
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.cfg.VIPs[0]
	pub := map[string]int{}
	svc := s.f.shared.Services.Load()
	for _, dv := range svc.VIPs {
		if dv != nil && dv.Name == v.Name {
			for _, id := range dv.Members {
				pub[svc.Backends[id].Name] = svc.Backends[id].Weight
			}
		}
	}
	out := make([]skewBackend, 0, len(v.Backends))
	for _, b := range v.Backends {
		st := p.backends[dataplane.BackendRef{VIP: v.Name, Backend: b.Name}]
		out = append(out, skewBackend{b.Name, p.baseWeight(st), pub[b.Name]})
	}
	return out, p.panicked[v.Name]
}

// observe adds the time since the last observation to the stretches of
// the backends that were out then, and ends those of the backends that
// are no longer.
func (s *skewInstance) observe() {
	now := s.f.plane.now()
	bs, _ := s.view()
	for _, b := range bs {
		n := b.name
		if s.out[n] {
			s.stretch[n] += now.Sub(s.lastObs)
		}
		s.out[n] = !s.up[n] && b.eff == 0
		if !s.out[n] {
			if s.stretch[n] > 20*time.Second {
				s.longEnd[n], s.ssMin[n] = now, s.f.plane.Config().Control.SlowStart
			}
			s.stretch[n] = 0
		}
	}
	s.lastObs = now
}

// noted records what a verdict, or a reload, says of the backends.
func (s *skewInstance) noted(e skewEvent) {
	switch e.Kind {
	case "down", "up":
		if _, known := s.up[e.Name]; known {
			s.up[e.Name] = e.Kind == "up"
		}
	case "reload":
		in := map[string]bool{}
		for _, b := range s.f.plane.Config().VIPs[0].Backends {
			in[b.Name] = true
			if _, known := s.up[b.Name]; !known {
				s.up[b.Name], s.out[b.Name] = false, true // added: out of the table from now
			}
		}
		for n := range s.up {
			if !in[n] {
				delete(s.up, n)
				delete(s.out, n)
				delete(s.stretch, n)
				delete(s.longEnd, n)
			}
		}
	}
}

// checkRamps records the first time a backend that was out of the table
// (down, and not used by panic mode) for longer than any slow start has
// more than a slow start begun when that outage ended gives it, outside
// panic mode (which gives every backend its full weight). A backend's
// share grows no faster than a ramp, whether it serves in the table or
// panic mode uses it, so no panic mode before, during or after the
// outage may credit it with more.
func (s *skewInstance) checkRamps() {
	if s.violated != "" {
		return
	}
	bs, panic := s.view()
	if panic {
		return
	}
	c := s.f.plane.Config().Control
	now := s.f.plane.now()
	for _, b := range bs {
		at, ok := s.longEnd[b.name]
		if !ok {
			continue
		}
		ss := min(s.ssMin[b.name], c.SlowStart)
		s.ssMin[b.name] = ss
		el := now.Sub(at)
		if el >= ss {
			delete(s.longEnd, b.name)
			continue
		}
		limit := int(math.Ceil(float64(b.base*WeightScale) * math.Max(c.SlowStartMin, float64(el)/float64(ss))))
		if b.eff > limit {
			s.violated = fmt.Sprintf("%s, out of the table for over 20 s until %v ago: effective weight %d, a slow start from then gives at most %d", b.name, el, b.eff, limit)
		}
	}
}

// until runs the instance's steps due before d (from t0), as Run does
// (a rebuild while a ramp or a drain timeout is pending), and leaves its
// clock at d.
func (s *skewInstance) until(d time.Duration) {
	for s.steps < d {
		s.f.clock.Store(s.t0.Add(s.steps).UnixNano())
		s.f.tick()
		s.observe()
		s.checkRamps()
		s.steps += time.Second
	}
	s.f.clock.Store(s.t0.Add(d).UnixNano())
	s.observe()
}

// do applies e to the instance. A backend the configuration in force
// does not have (be5 or be6, as the last reload left it) is skipped.
func (s *skewInstance) do(e skewEvent) error {
	p := s.f.plane
	vip := p.Config().VIPs[0].Name
	var err error
	switch e.Kind {
	case "up", "down":
		if err = p.SetHealth(vip, e.Name, e.Kind == "up", "probe"); err == nil {
			s.f.rebuild() // the kick a verdict sends Run
		}
	case "drain":
		err = p.Drain(vip, e.Name)
	case "undrain":
		err = p.Undrain(vip, e.Name)
	case "weight":
		err = p.SetWeight(vip, e.Name, e.Arg)
	default:
		err = p.Apply(mustParse(s.f.t, skewConfigs[e.Arg]))
	}
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err == nil {
		s.noted(e)
		s.observe()
		s.checkRamps()
	}
	return err
}

// Random histories of verdicts, drains, weights and reloads, each seen by
// the two instances of a fleet up to skewMax apart: once both have been
// quiet for longer than the slowest slow start, every slot of their
// tables and the backends' weights agree, and so does panic mode. And on
// each instance, at every step, a backend back from an outage longer than
// any slow start has no more than a slow start from the outage's end
// gives it, once panic mode is over.
func TestFleetSkewedHistoriesConverge(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		// A subtest each: its fixtures' lcores stop when it ends.
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { skewRun(t, seed) }) {
			return
		}
	}
}

// skewRun plays the history of seed on two instances and checks them.
func skewRun(t *testing.T, seed int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 48))
	hist := skewHistory(rng, 40)
	var in [2]*skewInstance
	for i := range in {
		f := newFixture(t, skewConfigs[0])
		f.allUp()
		in[i] = &skewInstance{f: f, phase: time.Duration(rng.Int64N(int64(time.Second))), t0: f.plane.now(),
			up: map[string]bool{}, stretch: map[string]time.Duration{}, out: map[string]bool{}, longEnd: map[string]time.Time{}, ssMin: map[string]time.Duration{}}
		for _, b := range f.plane.Config().VIPs[0].Backends {
			in[i].up[b.Name] = true
		}
		in[i].observe()
		in[i].steps = in[i].phase
	}
	for i, s := range in {
		order := make([]skewEvent, len(hist))
		copy(order, hist)
		sort.SliceStable(order, func(a, b int) bool {
			return order[a].At+order[a].Delay[i] < order[b].At+order[b].Delay[i]
		})
		for _, e := range order {
			s.until(e.At + e.Delay[i])
			if err := s.do(e); err != nil {
				t.Fatalf("seed %d, instance %d, %v: %v", seed, i, e, err)
			}
		}
	}
	end := hist[len(hist)-1].At + skewMax + 21*time.Second // the slowest slow start (20s) over
	for _, s := range in {
		s.until(end)
		s.f.rebuild()
	}
	a, b := in[0].f, in[1].f
	failed := false
	for i, s := range in {
		if s.violated != "" {
			t.Errorf("seed %d, instance %d: %s", seed, i, s.violated)
			failed = true
		}
	}
	for v, n := range compareChoices(t, fixtureKey(t, a), a.shared.Services.Load(), b.shared.Services.Load()) {
		if n != 0 {
			t.Errorf("seed %d: %d of %d new flows of %s go to different backends", seed, n, probeFlows, v)
			failed = true
		}
	}
	vip := a.plane.Config().VIPs[0]
	for _, be := range vip.Backends {
		if x, y := pubBackend(t, a.shared, vip.Name, be.Name).Weight, pubBackend(t, b.shared, vip.Name, be.Name).Weight; x != y {
			t.Errorf("seed %d: %s weight %d on one instance, %d on the other", seed, be.Name, x, y)
			failed = true
		}
	}
	if pa, pb := a.plane.Panicked(), b.plane.Panicked(); !maps.Equal(pa, pb) {
		t.Errorf("seed %d: panic mode %v on one instance, %v on the other", seed, pa, pb)
		failed = true
	}
	if failed {
		for _, e := range hist {
			t.Logf("seed %d: %v", seed, e)
		}
	}
}
