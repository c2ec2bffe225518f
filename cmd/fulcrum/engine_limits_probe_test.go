//go:build dpdk

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dpdk"
)

// TestLimitsOversizedLcoresAndQueues: configs asking for more lcores than
// the host has, or more queues than the port has, end the daemon with
// status 1 (a clear refusal), quickly: no hang, no crash, and no DPDK
// runtime directory left behind.
func TestLimitsOversizedLcoresAndQueues(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
	in, err := filepath.Abs("../../examples/in.pcap")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildFulcrum(t)
	n := runtime.NumCPU()
	cases := []struct{ name, eal, dp string }{
		// Lcores n and n+1 do not exist.
		{"lcores-over-cpus", fmt.Sprintf("worker_lcores = [1, %d, %d]", n, n+1), ""},
		// lcores mapped onto existing CPUs, but net_pcap has one rx queue.
		{"queues-over-port", "worker_lcores = [1, 2, 3]\nlcore_map = \"0@0,1@1,2@1,3@1\"", ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile("../../examples/pcap.toml")
			if err != nil {
				t.Fatal(err)
			}
			prefix := fmt.Sprintf("fulcrum-limits-%d-%d", os.Getpid(), i)
			s := string(b)
			for _, r := range [][2]string{
				{"rx_pcap=examples/in.pcap,tx_pcap=/tmp/fulcrum-out.pcap", "rx_pcap=" + in + ",tx_pcap=/dev/null"},
				{`file_prefix = "fulcrum-example"`, fmt.Sprintf("file_prefix = %q", prefix)},
				{"worker_lcores = [1]", "#"},
				{"[dataplane]", "[dataplane]\n" + c.dp},
				{"[eal]", "[eal]\n" + c.eal},
			} {
				if !strings.Contains(s, r[0]) {
					t.Fatalf("examples/pcap.toml has no %q", r[0])
				}
				s = strings.Replace(s, r[0], r[1], 1)
			}
			s += fmt.Sprintf("\n[admin]\nlisten = \"unix:%s\"\n", filepath.Join(dir, "admin.sock"))
			p := filepath.Join(dir, "fulcrum.toml")
			if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			runDir := filepath.Join(dpdk.RuntimeBase, prefix)
			t.Cleanup(func() { os.RemoveAll(runDir) })
			cmd := exec.Command(bin, "run", "-c", p)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				t.Fatalf("still running after 30 s (started with the oversized config?)\n%s", out.String())
			}
			var ee *exec.ExitError
			code := 0
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != 1 {
				t.Errorf("exit status %d (%v), want 1\n%s", code, err, out.String())
			} else {
				t.Logf("exit 1:\n%s", lastLines(out.String(), 3))
			}
			if _, err := os.Stat(runDir); err == nil {
				t.Errorf("runtime directory %s left behind", runDir)
			}
		})
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
