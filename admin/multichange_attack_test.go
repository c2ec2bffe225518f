package admin_test

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// Operators drain, undrain and re-weight backends, readers read every
// endpoint, and reloads move, re-weight and remove the same backends, all
// at once (run under -race). Every call answers 200, or 404 for a backend
// a reload has just taken away; afterwards the API shows what the
// dataplane uses, backend by backend.
func TestAdminCallsDuringReloads(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	a := admintest.Config
	b := strings.Replace(strings.Replace(a, `address = "10.0.1.3"`, `address = "10.0.1.33"`, 1),
		"  [[vip.backend]]\n  name = \"be2\"\n  address = \"10.0.1.2\"\n", "", 1)
	if b == a || !strings.Contains(b, "10.0.1.33") || strings.Contains(b, `"be2"`) {
		t.Fatal("variant config not built")
	}
	const rounds = 30
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range rounds {
			cfg := b
			if i%2 == 1 {
				cfg = a
			}
			if err := os.WriteFile(e.plane.File, []byte(cfg), 0o644); err != nil {
				t.Error(err)
				return
			}
			if code, body := e.call("POST", api.ReloadPath, ""); code != 200 {
				t.Errorf("reload %d: %d %s", i, code, body)
			}
		}
	})
	for _, be := range []string{"be2", "be3"} {
		wg.Go(func() {
			for i := range 2 * rounds {
				var path, body string
				switch i % 3 {
				case 0:
					path = api.ActionPath("web", be, api.ActionDrain)
				case 1:
					path, body = api.ActionPath("web", be, api.ActionWeight), `{"weight": 3}`
				default:
					path = api.ActionPath("web", be, api.ActionUndrain)
				}
				if code, out := e.call("POST", path, body); code != 200 && code != 404 {
					t.Errorf("POST %s: %d %s", path, code, out)
				}
			}
		})
	}
	for _, p := range []string{api.VIPsPath + "?backends=true", api.StatusPath, api.MetricsPath, api.TablePath("web"), api.VIPPath("web")} {
		wg.Go(func() {
			for range rounds {
				if code, out := e.call("GET", p, ""); code != 200 {
					t.Errorf("GET %s: %d %s", p, code, out)
				}
			}
		})
	}
	wg.Wait()

	// Quiet now: the API and the published snapshot agree.
	var web api.VIP
	e.get(api.VIPPath("web"), &web)
	pub := map[string]int{} // the published snapshot's weights (control.BackendStatus.Effective)
	snap := e.plane.Status(false)
	for _, v := range snap.VIPs {
		if v.Name == "web" {
			for _, bs := range v.Backends {
				pub[bs.Name] = bs.Effective
			}
		}
	}
	if len(web.Backends) != len(pub) {
		t.Fatalf("API lists %d backends of web, the snapshot %d", len(web.Backends), len(pub))
	}
	for _, bk := range web.Backends {
		if int(bk.EffectiveWeight*100) != pub[bk.Name] {
			t.Errorf("%s: API effective weight %v, snapshot %d/100", bk.Name, bk.EffectiveWeight, pub[bk.Name])
		}
		if bk.Drained && bk.EffectiveWeight != 0 {
			t.Errorf("%s: drained but effective weight %v", bk.Name, bk.EffectiveWeight)
		}
	}
}
