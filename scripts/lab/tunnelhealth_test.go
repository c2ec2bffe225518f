//go:build dpdk && lab

package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reloadThrough rewrites both LBs' configurations with their health checks
// going through (HEALTH_THROUGH: "tunnel", or "" for the lab's default,
// direct to 10.77.2.2x:8080) and reloads them.
func reloadThrough(t *testing.T, through string) {
	t.Helper()
	for lb := 1; lb <= 2; lb++ {
		c := exec.Command(script, "lb-conf", fmt.Sprint(lb))
		c.Env = append(os.Environ(), "HEALTH_THROUGH="+through)
		conf := must(t, c)
		if strings.Contains(conf, `through = "tunnel"`) != (through == "tunnel") {
			t.Fatalf("lb-conf with HEALTH_THROUGH=%q:\n%s", through, conf)
		}
		if err := os.WriteFile(filepath.Join(labDir, fmt.Sprintf("lb%d.toml", lb)), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		ctl(t, lb, "reload")
	}
}

// 14. Health checks through the tunnel (Maglev, GLB) catch a backend
// whose decapsulation is broken while its own health endpoint still
// answers 200: with the checks through the tunnel, be2 leaves both LBs'
// tables within fall (3) checks of 200 ms plus slack once its
// fulcrum-decap stops; with the lab's direct checks, the same broken
// backend stays up. The checks are encapsulated by the dataplane
// (health_tunnel_tx grows on both LBs) and answered directly (DSR).
func TestTunnelHealthCatchesBrokenDecap(t *testing.T) {
	upOn := func(lb int, name string) bool {
		b, ok := backends(t, lb)[name]
		return ok && b.Health == "up" && !b.Down && b.TableSlots > 0
	}
	allUp := func(lb int) bool {
		bs := backends(t, lb)
		for _, b := range bs {
			if b.Health != "up" || b.Down || b.SlowStart || b.TableSlots == 0 {
				return false
			}
		}
		return len(bs) == 4
	}
	decapStopped, tunnel := false, false
	t.Cleanup(func() {
		if decapStopped {
			lab(t, "start-decap", "2")
		}
		if tunnel {
			reloadThrough(t, "")
		}
		for lb := 1; lb <= 2; lb++ {
			waitFor(t, fmt.Sprintf("every backend up on lb%d (lab restored)", lb), 60*time.Second, func() bool { return allUp(lb) })
		}
	})

	reloadThrough(t, "tunnel")
	tunnel = true
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("every backend up through the tunnel on lb%d", lb), 30*time.Second, func() bool { return allUp(lb) })
		// Four backends every 200 ms, several packets a check: the
		// counter moves by dozens within a couple of seconds.
		before := status(t, lb).Total.HealthTunnelTx
		waitFor(t, fmt.Sprintf("health checks encapsulated on lb%d", lb), 10*time.Second, func() bool {
			return status(t, lb).Total.HealthTunnelTx >= before+40
		})
	}

	// Checks through the tunnel pass steadily: no backend leaves for 2 s.
	steady := time.Now().Add(2 * time.Second)
	for time.Now().Before(steady) {
		for lb := 1; lb <= 2; lb++ {
			if !allUp(lb) {
				t.Fatalf("lb%d: a healthy backend left under checks through the tunnel: %+v", lb, backends(t, lb))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Break be2's decapsulation; its own health endpoint still answers.
	broke := time.Now()
	lab(t, "stop-decap", "2")
	decapStopped = true
	stopped := time.Since(broke)
	code := must(t, ns("fl-lb1", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "2", "http://10.77.2.22:8080/healthz"))
	if code != "200" {
		t.Fatalf("be2's direct /healthz answers %q with its decap stopped, want 200 (the test needs a backend that passes direct checks)", code)
	}
	for lb := 1; lb <= 2; lb++ {
		// fall×interval is 600 ms; the deadline is slack for a shared
		// 2-core host, not the claim (the log says how long it took).
		deadline := time.Now().Add(10 * time.Second)
		for {
			b := backends(t, lb)["be2"]
			if b.Health == "down" && b.TableSlots == 0 {
				break
			}
			if time.Now().After(deadline) {
				// What the LB saw, for the one who reads the failure.
				logTail, _ := os.ReadFile(filepath.Join(labDir, fmt.Sprintf("lb%d.log", lb)))
				if len(logTail) > 4000 {
					logTail = logTail[len(logTail)-4000:]
				}
				t.Fatalf("be2 still in lb%d's table 10 s after its decap stopped under checks through the tunnel: %+v\nhealth_tunnel_tx %d\nlb%d.log (end):\n%s",
					lb, b, status(t, lb).Total.HealthTunnelTx, lb, logTail)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("lb%d: be2 out of the table %v after stop-decap began (which took %v; reason: %s)", lb, time.Since(broke).Round(10*time.Millisecond), stopped.Round(10*time.Millisecond), backends(t, lb)["be2"].Reason)
		for _, n := range []string{"be1", "be3", "be4"} {
			if !upOn(lb, n) {
				t.Errorf("lb%d: %s not up while only be2's decap is broken: %+v", lb, n, backends(t, lb)[n])
			}
		}
	}

	// The same broken backend under the lab's direct checks: it comes back
	// (after any flap backoff) and stays up.
	reloadThrough(t, "")
	tunnel = false
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("be2 up again on lb%d under direct checks", lb), 30*time.Second, func() bool { return upOn(lb, "be2") })
	}
	deadline := time.Now().Add(3 * time.Second)
	polls := 0
	for time.Now().Before(deadline) {
		for lb := 1; lb <= 2; lb++ {
			if !upOn(lb, "be2") {
				t.Fatalf("lb%d: direct checks took be2 down though only its decap is broken: %+v", lb, backends(t, lb)["be2"])
			}
		}
		polls++
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("direct checks: be2 (decap stopped) stayed up on both LBs for 3 s (%d polls)", polls)

	lab(t, "start-decap", "2")
	decapStopped = false
}
