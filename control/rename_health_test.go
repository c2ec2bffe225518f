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

// A VIP renamed by a reload keeps its backends' checkers (SetRenamed), but
// the renamed checkers go on reporting under the old key ("web/be2"):
// healthEvent finds no backend "web/be2" any more and drops every verdict.
// A backend that dies after the rename is never taken out of the table.
func TestRenamedVIPBackendDownAfterRename(t *testing.T) {
	cfg := strings.Replace(baseConfig, "[[vip]]", fastChecks+"\n[[vip]]", 1)
	f := newFixture(t, cfg)
	be2 := netip.MustParseAddr("10.0.1.2")
	var be2Dead atomic.Bool
	m := manualChecks(t, f, func(a netip.AddrPort) error {
		if a.Addr() == be2 && be2Dead.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	f.apply(strings.Replace(cfg, `name = "web"`, `name = "www"`, 1))
	be2Dead.Store(true)
	// Apply events as the daemon's loop does, until be2's down verdict
	// (whatever key it carries) has been handed to the plane.
	var down health.Event
	for deadline := time.After(10 * time.Second); down.New != health.Down; {
		select {
		case ev := <-m.Events():
			f.plane.healthEvent(ev)
			if ev.Target.Addr() == be2 {
				down = ev
			}
		case <-deadline:
			t.Fatal("no down event for be2")
		}
	}
	f.rebuild()
	if w := pubBackend(t, f.shared, "www", "be2").Weight; w != 0 {
		t.Errorf("be2 of the renamed VIP is down by its checks (%q) but still in the table at weight %d: the verdict came under key %q", down.Reason, w, down.Key)
	}
}

// A verdict the event loop holds (waiting for the lock) while a reload
// renames the VIP: the checker goes on under the new name with that very
// state (SetRenamed keeps its run and id), but healthEvent looks the event
// up by its old key, finds no backend there and drops it. The renamed
// checker has said Down and will say nothing more; the plane keeps the
// dead backend in the table until its next change.
func TestRenameKeepsHeldVerdict(t *testing.T) {
	cfg := strings.Replace(baseConfig, "[[vip]]", fastChecks+"\n[[vip]]", 1)
	f := newFixture(t, cfg)
	be2 := netip.MustParseAddr("10.0.1.2")
	var be2Dead atomic.Bool
	m := manualChecks(t, f, func(a netip.AddrPort) error {
		if a.Addr() == be2 && be2Dead.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	nextEvent(t, f, m, "web/be2", health.Up)
	be2Dead.Store(true)
	held := nextEvent(t, f, m, "web/be2", health.Down) // taken by the loop, which now waits for the lock
	f.apply(strings.Replace(cfg, `name = "web"`, `name = "www"`, 1))
	f.plane.healthEvent(held)
	f.rebuild()
	s, _ := m.Status("www/be2")
	if w := pubBackend(t, f.shared, "www", "be2").Weight; w != 0 && s.State == health.Down {
		t.Errorf("be2's checker, renamed to www/be2, is %v (%q), but its down verdict held across the rename was dropped: weight %d", s.State, s.Reason, w)
	}
}
