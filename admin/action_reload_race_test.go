package admin_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// A drain by address looks the backend up in the configuration in force,
// then drains it by name. A reload that lands between the two and swaps
// two backends' addresses (be1 <-> be2) made the name stand for the other
// address: the drain of 10.0.1.1 drained the backend at 10.0.1.2, one
// the operator never named. The reload now waits for the action; here it
// is started in the gap, so on the old code it finished before the drain.
func TestDrainByAddressNotRedirectedByReload(t *testing.T) {
	a := admintest.Config
	b := strings.NewReplacer(`address = "10.0.1.1"`, `address = "10.0.1.2"`, `address = "10.0.1.2"`, `address = "10.0.1.1"`).Replace(a)
	if b == a || strings.Count(b, `"10.0.1.1"`) != 1 {
		t.Fatal("swapped config not built")
	}
	p := admintest.New(t, a)
	var e *env
	reloaded := make(chan int, 1)
	e = serve(t, p, loopback(), p.File, func(s *admin.Server) {
		s.SetAfterResolve(func() {
			if err := os.WriteFile(p.File, []byte(b), 0o644); err != nil {
				t.Error(err)
				return
			}
			go func() {
				code, _ := e.call("POST", api.ReloadPath, "")
				reloaded <- code
			}()
			// The reload either waits for this action (as it must) or
			// is done within this bound (the fault).
			select {
			case code := <-reloaded:
				reloaded <- code
			case <-time.After(time.Second):
			}
			s.SetAfterResolve(nil)
		})
	})
	if code, out := e.call("POST", api.ActionPath("web", "10.0.1.1", api.ActionDrain), ""); code != 200 {
		t.Fatalf("drain 10.0.1.1: %d %s", code, out)
	}
	if code := <-reloaded; code != 200 {
		t.Fatalf("reload: %d", code)
	}
	// After the reload be1 is at 10.0.1.2 and be2 at 10.0.1.1: a moved
	// backend is a new one (its drain ends), and nothing at 10.0.1.2 was
	// asked to drain.
	var web api.VIP
	e.get(api.VIPPath("web"), &web)
	for _, be := range web.Backends {
		if be.Address == "10.0.1.2" && be.Drained {
			t.Errorf("backend %s at 10.0.1.2 drained; the operator drained 10.0.1.1", be.Name)
		}
	}
}
