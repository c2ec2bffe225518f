package control

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// passiveConfig: passive checks only (no active ones), a 4 s window.
var passiveConfig = strings.Replace(baseConfig, "[[vip]]", "[health]\npassive_window = \"4s\"\npassive_min = 20\nflap_backoff = \"10s\"\n\n[[vip]]", 1)

// simCounters are simulated worker counters: per period, each backend is
// given SYNs and completed handshakes, cumulative as the workers keep them.
type simCounters struct {
	f *fixture
	c []dataplane.Counters
}

func newSim(f *fixture) *simCounters {
	return &simCounters{f: f, c: []dataplane.Counters{{VIPs: make([]dataplane.PacketBytes, dataplane.MaxVIPs), Backends: make([]dataplane.PacketBytes, dataplane.MaxBackends)}}}
}

// period adds one second of traffic (syns and completed handshakes by
// backend name) and folds it; it reports whether the tables changed.
func (s *simCounters) period(syns, est map[string]uint64) bool {
	svc := s.f.shared.Services.Load()
	for _, id := range svc.VIPs[0].Members {
		b := svc.Backends[id]
		bc := &s.c[0].Backends[id]
		bc.Gen = b.Gen
		bc.SYNs += syns[b.Name]
		bc.Established += est[b.Name]
	}
	s.f.advance(time.Second)
	s.f.plane.mu.Lock()
	defer s.f.plane.mu.Unlock()
	ch := s.f.plane.foldSignals(s.c, s.f.plane.now())
	if ch {
		s.f.plane.rebuildLocked()
	}
	return ch
}

func ejections(f *fixture) (outliers, total int) {
	for _, b := range f.plane.Status(false).VIPs[0].Backends {
		if b.Outlier {
			outliers++
		}
		total += b.Ejections
	}
	return outliers, total
}

// The lab's spoofer: 20 forged SYNs a second spread by the hash over every
// backend, on top of real clients whose handshakes all complete. Every
// backend sees about the same failing share ("11 of 22 handshakes
// failed"), so none stands out and none is ejected (finding 1).
func TestPassiveSpoofedSYNsEjectNobody(t *testing.T) {
	for _, tc := range []struct {
		name         string
		real, forged uint64 // per backend and second, before the ±1 spread
	}{
		{"lab: 7 of 11 failed", 4, 7},
		{"flood: 40 forged for each real", 5, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, passiveConfig)
			sim := newSim(f)
			names := []string{"be1", "be2", "be3", "be4"}
			for round := 0; round < 60; round++ {
				syns, est := map[string]uint64{}, map[string]uint64{}
				for i, b := range names {
					// The hash spreads both evenly, up to the noise of
					// small counts: ±1 a second, out of step.
					real := tc.real - 1 + uint64((round+i)%3)
					forged := tc.forged - 1 + uint64((round*7+i)%3)
					syns[b], est[b] = real+forged, real
				}
				sim.period(syns, est)
			}
			if out, n := ejections(f); out != 0 || n != 0 {
				t.Fatalf("spoofed SYNs ejected backends: %d outliers, %d ejections", out, n)
			}
		})
	}
}

// One backend refuses connections while its peers are fine: it is ejected
// (no new flows; with on_down keep, its tracked flows stay), and only it.
func TestPassiveRefusingBackendEjected(t *testing.T) {
	f := newFixture(t, passiveConfig)
	sim := newSim(f)
	// Evidence needs two periods (passive_min 20 at 15 a second, the newest
	// period left out), then must hold for a whole window (4 s): the
	// ejection comes at the 7th fold, and not before.
	for round := 1; round <= 7; round++ {
		ch := sim.period(map[string]uint64{"be1": 15, "be2": 15, "be3": 15, "be4": 15},
			map[string]uint64{"be1": 15, "be2": 0, "be3": 15, "be4": 15})
		if ch != (round == 7) {
			t.Fatalf("fold %d: tables changed %v", round, ch)
		}
	}
	st := f.backend("be2")
	if !st.Outlier || st.Ejections != 1 || st.Slots != 0 || st.Down {
		t.Fatalf("be2 not ejected (or ejected as down with on_down keep): %+v", st)
	}
	if out, _ := ejections(f); out != 1 {
		t.Fatalf("%d outliers, want only be2", out)
	}
}

// Never more than the max share of a VIP's backends on passive evidence
// (at least one): two of four refusing, one is ejected.
func TestPassiveEjectionCapped(t *testing.T) {
	f := newFixture(t, passiveConfig)
	sim := newSim(f)
	for round := 0; round < 8; round++ {
		sim.period(map[string]uint64{"be1": 15, "be2": 15, "be3": 15, "be4": 15},
			map[string]uint64{"be1": 15, "be2": 0, "be3": 0, "be4": 15})
	}
	if out, _ := ejections(f); out != 1 {
		t.Fatalf("%d of 4 backends ejected at once, want 1 (max share)", out)
	}
}

// The spoofer through a random hash, as in the lab: 20 real handshakes and
// 20 forged SYNs a second, each flow landing on a backend at random. Ten
// minutes of the noise of small counts eject nobody.
func TestPassiveSpoofedSYNsRandomHash(t *testing.T) {
	f := newFixture(t, passiveConfig)
	sim := newSim(f)
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"be1", "be2", "be3", "be4"}
	for round := 0; round < 600; round++ {
		syns, est := map[string]uint64{}, map[string]uint64{}
		for i := 0; i < 20; i++ {
			b := names[rng.IntN(len(names))]
			syns[b]++
			est[b]++
		}
		for i := 0; i < 20; i++ {
			syns[names[rng.IntN(len(names))]]++
		}
		sim.period(syns, est)
	}
	if out, n := ejections(f); out != 0 || n != 0 {
		t.Fatalf("spoofed SYNs ejected backends: %d outliers, %d ejections", out, n)
	}
}
