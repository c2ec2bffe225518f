package admin_test

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// TestTableShowsPlacementMismatch: README ("Slow start and the fleet")
// gives `fulcrumctl table VIP` (its sha256 and hash key id) as the way to
// compare instances. Two instances whose VIP places new flows on other
// servers must not show identical table answers. Cases: the VIP's hash
// fields differ (one instance's template says hash = "3-tuple", or
// src-ip-prefix with another prefix), or a backend name is bound to
// another address on one instance (a template typo): the slot names are
// the same, so digest and hash key id agree, and nothing in the answer
// tells the operator that flows land elsewhere.
func TestTableShowsPlacementMismatch(t *testing.T) {
	a := start(t, admintest.Config, loopback())
	var ta api.Table
	a.get(api.TablePath("web"), &ta)
	webLine := "name = \"web\"\naddress = \"203.0.113.7\"\nport = 80\n"
	if !strings.Contains(admintest.Config, webLine) {
		t.Fatal("fixture changed: no web VIP header")
	}
	cases := []struct{ name, cfg string }{
		{"hash 3-tuple", strings.Replace(admintest.Config, webLine, webLine+"hash = \"3-tuple\"\n", 1)},
		{"src-ip-prefix /16 vs /24", strings.Replace(admintest.Config, webLine, webLine+"hash = \"src-ip-prefix\"\nhash_prefix = 16\n", 1)},
		{"be1 at another address", strings.Replace(admintest.Config, `address = "10.0.1.1"`, `address = "10.0.1.9"`, 1)},
	}
	base := strings.Replace(admintest.Config, webLine, webLine+"hash = \"src-ip-prefix\"\n", 1)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref, refT := a, ta
			if strings.Contains(c.name, "src-ip-prefix") {
				ref = start(t, base, loopback())
				ref.get(api.TablePath("web"), &refT)
			}
			if c.cfg == admintest.Config {
				t.Fatal("case changes nothing")
			}
			b := start(t, c.cfg, loopback())
			var tb api.Table
			b.get(api.TablePath("web"), &tb)
			moved := 0
			const n = 200
			for i := range n {
				var la, lb api.Lookup
				// Sources spread over /16s so that prefix modes differ.
				src := "198." + itoa(18+i%2) + "." + itoa(i) + ".7"
				q := api.LookupQuery(src, "203.0.113.7", uint16(20000+i), 80, "tcp")
				ref.get(q, &la)
				b.get(q, &lb)
				if la.Address != lb.Address {
					moved++
				}
			}
			if moved == 0 {
				t.Fatal("the two instances place every probed flow alike: the test shows nothing")
			}
			same := refT.Digest == tb.Digest && refT.HashKeyID == tb.HashKeyID && refT.Size == tb.Size
			if same {
				t.Errorf("%d of %d new flows go to another server, yet both instances' table answers agree (digest %s, hash key id %s): comparing `fulcrumctl table` says the instances agree",
					moved, n, tb.Digest[:12], tb.HashKeyID)
			}
		})
	}
}
