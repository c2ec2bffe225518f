package control

import (
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/health"
)

// A backend ejected for flapping (held down for flap_backoff, here 1h)
// must stay out when a reload moves the VIP's checks to another port:
// README "A reload that moves a VIP's checks to another port keeps each
// backend's verdict until the check at the new port gives its own", and
// package health's doc: a changed config at the same address inherits
// the state, ejection included. Package control puts the check port in
// health.Target.Addr, so Manager.Set sees another address, starts a
// fresh checker (Unknown, no ejection) and the flapping backend is back
// in the table after rise checks.
func TestPortMoveKeepsFlapEjection(t *testing.T) {
	checks := strings.Replace(fastChecks, "fall = 1\n", "fall = 1\nflap_backoff = \"1h\"\nflap_backoff_max = \"1h\"\n", 1)
	cfg := strings.Replace(baseConfig, "[[vip]]", checks+"\n[[vip]]", 1)
	moved := strings.Replace(cfg, "fall = 1\n", "fall = 1\nport = 8080\n", 1)
	f := newFixture(t, cfg)
	be2 := netip.MustParseAddr("10.0.1.2")
	var be2Fails atomic.Bool
	m := manualChecks(t, f, func(a netip.AddrPort) error {
		if a.Addr() == be2 && be2Fails.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	const key = "web/be2"
	f.plane.healthEvent(nextEvent(t, f, m, key, health.Up)) // first verdict
	be2Fails.Store(true)
	f.plane.healthEvent(nextEvent(t, f, m, key, health.Down))
	be2Fails.Store(false)
	f.plane.healthEvent(nextEvent(t, f, m, key, health.Up)) // recovered
	be2Fails.Store(true)
	ev := nextEvent(t, f, m, key, health.Down) // within the window: a flap
	if !ev.Ejected {
		t.Fatalf("second down not an ejection: %+v", ev)
	}
	f.plane.healthEvent(ev)
	be2Fails.Store(false) // passes again, but is held out for an hour
	f.rebuild()
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 0 {
		t.Fatalf("ejected be2 at weight %d", w)
	}

	f.apply(moved) // the operator moves the checks to port 8080
	var s health.Status
	waitFor(t, "5 checks at the new port", func() bool {
		s, _ = m.Status(key)
		return s.Addr.Port() == 8080 && s.Checks >= 5
	})
	if s.State != health.Down || s.EjectedUntil.IsZero() {
		t.Errorf("after the port move the flapping be2 (ejected for 1h) is %v (%q, ejections %d, ejected until %v): its ejection was dropped",
			s.State, s.Reason, s.Ejections, s.EjectedUntil)
	}
	if s.State == health.Up {
		f.plane.healthEvent(nextEvent(t, f, m, key, health.Up))
		f.rebuild()
		if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 0 {
			t.Errorf("flapping be2 back in the table at weight %d minutes before its 1h ejection ends", w)
		}
	}
	_ = time.Second
}
