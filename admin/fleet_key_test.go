package admin_test

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// TestTableShowsHashKeyMismatch: the README's way to check that
// instances agree is to compare `fulcrumctl table VIP`. An instance
// started with another dataplane.hash_key (a template not updated, a
// typo) places most new flows, and every flow ECMP moves to it, on
// another backend than the rest of the fleet, with the same table: the
// answer's hash_key_id (and the metric's id) must differ, and never show
// the key.
func TestTableShowsHashKeyMismatch(t *testing.T) {
	a := start(t, admintest.Config, loopback())
	a2 := start(t, admintest.Config, loopback())
	other := strings.Replace(admintest.Config, configtest.HashKey, "ffeeddccbbaa99887766554433221100", 1)
	if other == admintest.Config {
		t.Fatal("fixture has no hash_key to change")
	}
	b := start(t, other, loopback())
	var ta, ta2, tb api.Table
	a.get(api.TablePath("web"), &ta)
	a2.get(api.TablePath("web"), &ta2)
	b.get(api.TablePath("web"), &tb)
	moved := 0
	const n = 200
	for i := range n {
		var la, lb api.Lookup
		q := api.LookupQuery(admintest.Client.String(), "203.0.113.7", uint16(20000+i), 80, "tcp")
		a.get(q, &la)
		b.get(q, &lb)
		if la.Address != lb.Address {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the two keys place every probed flow alike: the test shows nothing")
	}
	if ta.Digest != tb.Digest {
		t.Fatalf("the key changed the table's digest (%s, %s): the table does not depend on it", ta.Digest, tb.Digest)
	}
	if len(ta.HashKeyID) != 16 || ta.HashKeyID != ta2.HashKeyID {
		t.Errorf("instances with one key show hash key ids %q and %q, want the same 16 hex digits", ta.HashKeyID, ta2.HashKeyID)
	}
	if ta.HashKeyID == tb.HashKeyID {
		t.Errorf("instances with different hash keys send %d of %d new flows to other backends, yet show the same hash key id %q", moved, n, ta.HashKeyID)
	}
	for _, inst := range []struct {
		id, key string
		e       *env
	}{{ta.HashKeyID, configtest.HashKey, a}, {tb.HashKeyID, "ffeeddccbbaa99887766554433221100", b}} {
		if strings.Contains(inst.key, inst.id) {
			t.Errorf("hash key id %q is part of the key %s", inst.id, inst.key)
		}
		code, raw := inst.e.call("GET", "/metrics", "")
		body := string(raw)
		if code != 200 {
			t.Fatalf("metrics: %d", code)
		}
		if want := `fulcrum_hash_key_info{id="` + inst.id + `"} 1`; !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
		if strings.Contains(body, inst.key) {
			t.Errorf("metrics show the hash key %s", inst.key)
		}
	}
}
