package admin_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// An action's answer must describe the state the action left, not one a
// reload or another action made after it. The answer was read after the
// reload hold was let go: a reload that renamed the VIP in that gap (the
// drain carried to the new name, as README says) turned a drain that
// took effect into 404 "not found" (fulcrumctl exit 1: a deploy script
// takes the drain as failed while it is in force).
func TestDrainAnswerNotForALaterReload(t *testing.T) {
	renamed := strings.Replace(admintest.Config, `name = "web"`, `name = "web2"`, 1)
	p := admintest.New(t, admintest.Config)
	reloaded := make(chan error, 1)
	e := serve(t, p, loopback(), p.File, func(s *admin.Server) {
		s.SetAfterResolve(func() {
			s.SetAfterResolve(nil)
			// A status read in progress (a scrape, a show) holds the
			// answer back; the reload waits for the action's hold.
			unlock := s.LockStatus()
			if err := os.WriteFile(p.File, []byte(renamed), 0o644); err != nil {
				t.Error(err)
			}
			go func() {
				err := p.Reload(p.File)
				unlock()
				reloaded <- err
			}()
		})
	})
	code, out := e.call(http.MethodPost, api.ActionPath("web", "be2", api.ActionDrain), "")
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
	// The drain is in force, carried to the renamed VIP.
	var web2 api.VIP
	e.get(api.VIPPath("web2"), &web2)
	drained := false
	for _, b := range web2.Backends {
		if b.Name == "be2" {
			drained = b.Drained
		}
	}
	if !drained {
		t.Fatal("be2 not drained under web2: the drain did not take effect")
	}
	if code != http.StatusOK {
		t.Errorf("drain answered %d %s, though the drain is in force (web2/be2 drained)", code, out)
	}
}

// The same gap with two operators: a drain, then an undrain by another
// caller. The drain's answer is 200 with "drained": false, a state the
// drain never left, and fulcrumctl prints it as "drained".
func TestDrainAnswerNotForALaterUndrain(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	undrained := make(chan error, 1)
	e := serve(t, p, loopback(), p.File, func(s *admin.Server) {
		s.SetAfterResolve(func() {
			s.SetAfterResolve(nil)
			unlock := s.LockStatus()
			go func() {
				// After the drain (the hold orders it), before its answer.
				err := p.HoldReloads(func() error { return p.Undrain("web", "be2") })
				unlock()
				undrained <- err
			}()
		})
	})
	code, out := e.call(http.MethodPost, api.ActionPath("web", "be2", api.ActionDrain), "")
	if err := <-undrained; err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, out)
	}
	var b api.Backend
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if !b.Drained {
		t.Errorf("the drain's answer says drained=%v (state %q): the state of a later undrain, not the one the drain left", b.Drained, b.State)
	}
}
