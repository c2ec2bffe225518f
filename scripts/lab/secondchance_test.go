//go:build dpdk && lab

package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// Two changes at once (docs/second-chance.md): under 200 long-lived
// connections, be4 joins the tables of both LBs and lb1 is killed in the
// same second. lb2 receives lb1's flows without conntrack entries, with a
// table in which some of their slots moved to be4, where no socket exists
// for them. With the second chance on, the tunnel names each such flow's
// previous backend and be4's agent forwards the packets there: no
// connection breaks. With it off (same run, same steps) the moved flows
// are reset by be4.
func TestSecondChanceSurvivesTwoChangesAtOnce(t *testing.T) {
	marker := filepath.Join(labDir, "removed-be4")
	write := func(env ...string) {
		for lb := 1; lb <= 2; lb++ {
			c := exec.Command(script, "lb-conf", fmt.Sprint(lb))
			c.Env = append(os.Environ(), env...)
			os.WriteFile(filepath.Join(labDir, fmt.Sprintf("lb%d.toml", lb)), []byte(must(t, c)), 0o644)
		}
	}
	conf := func(env ...string) {
		write(env...)
		ctl(t, 1, "reload")
		ctl(t, 2, "reload")
	}
	t.Cleanup(func() {
		// Back as found: be4 in, both LBs running the lab's default
		// configuration, be4 at full weight.
		os.Remove(marker)
		if routeHops() < 2 {
			exec.Command(script, "start-lb", "1").Run()
			waitHops(t, 2)
		}
		conf()
		waitFor(t, "be4 in both tables at full weight", 30*time.Second, func() bool {
			b1, b2 := backends(t, 1)["be4"], backends(t, 2)["be4"]
			return b1.TableSlots > 0 && !b1.SlowStart && b2.TableSlots > 0 && !b2.SlowStart
		})
	})
	run := func(on bool) (report, int) {
		// No slow start: be4 takes its full share at once, the case that
		// moves the most flows.
		env := []string{"SLOW_START=0s", "SECOND_CHANCE=" + strconv.FormatBool(on)}
		os.WriteFile(marker, nil, 0o644)
		conf(env...) // be4 out
		removed := time.Now()
		waitFor(t, "be4 out of both LBs", 10*time.Second, func() bool {
			_, in1 := backends(t, 1)["be4"]
			_, in2 := backends(t, 2)["be4"]
			return !in1 && !in2
		})
		// Exchanges every 100 ms until every connection has exchanged
		// again after the router withdrew lb1 (the checker's 2 min are a
		// bound); an exchange that makes no progress for 25 s breaks its
		// connection, so one black-holed at the changes is counted broken
		// before settle gives up (40 s after the withdrawal), while TCP's
		// backoff over the ~3 s the router takes to withdraw lb1 (BGP
		// hold) is not.
		fleetSettled(t, 30*time.Second)
		cc := startConncheckWith(t, 200, 2*time.Minute, 25*time.Second, "")
		// The scenario needs the table without be4 to have been in force
		// for dataplane.PrevMinAge: only then does it become the previous
		// table when be4 comes back (a shorter-lived one is a ramp step).
		waitFor(t, "the table without be4 in force for PrevMinAge", 10*time.Second, func() bool {
			return time.Since(removed) > dataplane.PrevMinAge+500*time.Millisecond
		})
		fwd0 := decapCounter(t, 4, "second_chance.forwarded")
		os.Remove(marker)
		write(env...)
		// be4 in, on both LBs at once (lb1's reload may not finish: it
		// dies) ... and lb1 killed as soon as lb2 runs the new table.
		start := time.Now()
		r1 := exec.Command(filepath.Join(labDir, "bin", "fulcrumctl"), "--addr", fmt.Sprintf("unix:%s/lb1.sock", labDir), "reload")
		if err := r1.Start(); err != nil {
			t.Fatal(err)
		}
		ctl(t, 2, "reload")
		lab(t, "stop-lb", "1", "KILL")
		r1.Wait()
		t.Logf("second_chance=%v: be4 added to both LBs and lb1 killed within %v", on, time.Since(start).Round(time.Millisecond))
		waitHops(t, 1)
		withdrawn := time.Now()
		cc.settle(t, withdrawn.Add(time.Second), 40*time.Second)
		t.Logf("second_chance=%v: every connection exchanging again (or broken) %v after the changes", on, time.Since(start).Round(100*time.Millisecond))
		r := cc.stop(t)
		fwd := decapCounter(t, 4, "second_chance.forwarded") - fwd0
		lab(t, "start-lb", "1")
		waitHops(t, 2)
		return r, fwd
	}

	on, fwdOn := run(true)
	t.Logf("second chance on: connections %d, broken %d, switched %d, alive %d, per backend %v, longest stall %d ms (connection %d); be4's agent forwarded %d packets",
		on.Connections, len(on.Broken), on.Switched, on.Alive, on.PerBackend, on.LongestStallMS, on.LongestStallConn, fwdOn)
	off, fwdOff := run(false)
	t.Logf("second chance off: connections %d, broken %d, switched %d, alive %d, per backend %v, longest stall %d ms (connection %d); be4's agent forwarded %d packets",
		off.Connections, len(off.Broken), off.Switched, off.Alive, off.PerBackend, off.LongestStallMS, off.LongestStallConn, fwdOff)

	if on.Connections != 200 || len(on.Broken) != 0 || on.Switched != 0 || on.Alive != 200 {
		t.Errorf("second chance on: %d connections, %d broken (%v), %d switched, %d alive; want 200, 0, 0, 200", on.Connections, len(on.Broken), on.Broken, on.Switched, on.Alive)
	}
	if fwdOn == 0 {
		t.Errorf("second chance on: be4's agent forwarded nothing: no flow of lb1 moved to be4, the run shows nothing")
	}
	// Off, about a quarter of lb1's hundred-odd flows land on be4 and are
	// reset: zero would need every one of them to miss be4's quarter of
	// the slots.
	if len(off.Broken) == 0 || fwdOff != 0 {
		t.Errorf("second chance off: %d broken, %d forwarded; want some broken, none forwarded", len(off.Broken), fwdOff)
	}
}

// decapCounter asks backend be<n>'s fulcrum-decap for its counters
// (decapCounters) and returns the named one.
func decapCounter(t *testing.T, n int, name string) int {
	t.Helper()
	line, err := decapCounters(n)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(name) + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("be%d's counters have no %s: %s", n, name, line)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// decapCounters asks backend be<n>'s fulcrum-decap for its counters
// (SIGUSR1) and returns the line it logs, waiting up to 5 s for it.
func decapCounters(n int) (string, error) {
	pidb, err := os.ReadFile(filepath.Join(labDir, fmt.Sprintf("be%d-decap.pid", n)))
	if err != nil {
		return "", err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if err != nil {
		return "", err
	}
	logf := filepath.Join(labDir, fmt.Sprintf("be%d-decap.log", n))
	count := func() (int, string) {
		b, _ := os.ReadFile(logf)
		lines := regexp.MustCompile(`msg=counters .*`).FindAllString(string(b), -1)
		if len(lines) == 0 {
			return 0, ""
		}
		return len(lines), lines[len(lines)-1]
	}
	before, _ := count()
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return "", fmt.Errorf("be%d's fulcrum-decap: %w", n, err)
	}
	var line string
	if !poll(5*time.Second, func() bool {
		var k int
		k, line = count()
		return k > before
	}) {
		return "", fmt.Errorf("be%d's fulcrum-decap logged no counters within 5 s", n)
	}
	return line, nil
}
