//go:build dpdk && lab

package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// Per-VIP hash fields: with the VIP at hash = "3-tuple" every connection
// of the client (one address, a new source port each) reaches the same
// backend, although the router's ECMP spreads those connections over both
// LBs by their 5-tuples: the two instances hash them alike. Back at the
// default 5-tuple the same client's connections spread again (so the
// check can fail). The test leaves the lab at its default configuration.
func TestSourceIPAffinity(t *testing.T) {
	reload := func(hash string) {
		for lb := 1; lb <= 2; lb++ {
			c := exec.Command(script, "lb-conf", fmt.Sprint(lb))
			c.Env = append(os.Environ(), "HASH="+hash)
			conf := must(t, c)
			if err := os.WriteFile(filepath.Join(labDir, fmt.Sprintf("lb%d.toml", lb)), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			ctl(t, lb, "reload")
		}
	}
	// ready: the VIP hashes as asked and every backend is up at full
	// weight (a changed hash setting leaves the backends alone; this
	// waits out any check still running from an earlier test).
	ready := func(lb int, fields string) bool {
		var v api.VIP
		if err := json.Unmarshal(ctl(t, lb, "backends", "web"), &v); err != nil {
			t.Fatal(err)
		}
		if v.HashFields != fields || len(v.Backends) != 4 {
			return false
		}
		for _, b := range v.Backends {
			if b.Health != "up" || b.Down || b.SlowStart || b.TableSlots == 0 {
				return false
			}
		}
		return true
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			reload("")
		}
		for lb := 1; lb <= 2; lb++ {
			waitFor(t, fmt.Sprintf("lb%d back at the 5-tuple, every backend up", lb), 30*time.Second, func() bool { return ready(lb, "5-tuple") })
		}
	})

	reload("3-tuple")
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("lb%d hashing the 3-tuple, every backend up", lb), 30*time.Second, func() bool { return ready(lb, "3-tuple") })
	}
	before := [3]uint64{0, forwarded(t, 1), forwarded(t, 2)}
	per, failed := curlMany(t, 50)
	d1, d2 := forwarded(t, 1)-before[1], forwarded(t, 2)-before[2]
	t.Logf("3-tuple: 50 connections of one client answered by %v (failed %d); packets forwarded: lb1 %d, lb2 %d", per, failed, d1, d2)
	if failed != 0 || len(per) != 1 {
		t.Errorf("3-tuple: %d failed, answered by %v: want every connection on one backend", failed, per)
	}
	if d1 == 0 || d2 == 0 {
		t.Errorf("3-tuple: an LB carried no flows (lb1 %d, lb2 %d): the two instances' agreement is untested", d1, d2)
	}

	reload("")
	restored = true
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("lb%d back at the 5-tuple, every backend up", lb), 30*time.Second, func() bool { return ready(lb, "5-tuple") })
	}
	per, failed = curlMany(t, 50)
	t.Logf("5-tuple: 50 connections of one client answered by %v (failed %d)", per, failed)
	if failed != 0 || len(per) < 2 {
		t.Errorf("5-tuple: %d failed, answered by %v: want the connections spread", failed, per)
	}
}
