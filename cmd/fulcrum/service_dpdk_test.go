//go:build dpdk

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/internal/syncbuf"
)

// TestRunJSONLogs: with --log-format json every line the daemon writes,
// DPDK's own included, is one JSON object; the start-up line carries the
// build; durations and MACs are text; no line appears twice.
func TestRunJSONLogs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
	bin := buildFulcrum(t)
	dir := t.TempDir()
	p := exampleConfig(t, dir, "../../examples/in.pcap", filepath.Join(dir, "out.pcap"))
	out, err := exec.Command(bin, "run", "-c", p, "--log-format", "json", "--exit-when-idle", "1s", "--stats-interval", "0").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	seen := map[string]int{}
	var dpdkLines int
	for i, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("line %d is not JSON: %q", i+1, line)
			continue
		}
		msg, _ := rec["msg"].(string)
		seen[msg]++
		switch msg {
		case "fulcrum starting":
			for _, k := range []string{"version", "go", "dpdk"} {
				if s, _ := rec[k].(string); s == "" {
					t.Errorf("start-up line lacks %s: %s", k, line)
				}
			}
		case "dataplane ready":
			if _, err := net.ParseMAC(rec["mac"].(string)); err != nil {
				t.Errorf("mac is not text: %s", line)
			}
		case "forwarding":
			// One loop at least, and two Ps beside it (dpdk.ReserveProcs).
			if n, _ := rec["gomaxprocs"].(float64); os.Getenv("GOMAXPROCS") == "" && n < 3 {
				t.Errorf("forwarding with GOMAXPROCS %v, want 3 or more: %s", rec["gomaxprocs"], line)
			}
		case "input idle, exiting":
			if rec["idle"] != "1s" {
				t.Errorf("duration is not text: %s", line)
			}
		}
		if rec["component"] == "dpdk" {
			dpdkLines++
		}
	}
	if dpdkLines == 0 {
		t.Errorf("no DPDK line went through the logger:\n%s", out)
	}
	for _, msg := range []string{"fulcrum starting", "forwarding", "admin API listening", "dataplane ready"} {
		if seen[msg] != 1 {
			t.Errorf("%q logged %d times, want once", msg, seen[msg])
		}
	}
}

// TestRunAsService: the daemon tells systemd READY once it forwards,
// RELOADING and READY around a SIGHUP reload, STOPPING on SIGTERM; a
// second daemon on the same file prefix exits 1 with DPDK's reason and
// no panic, and leaves the first one's runtime files alone.
func TestRunAsService(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
	bin := buildFulcrum(t)
	dir := t.TempDir()
	p := exampleConfig(t, dir, "../../examples/in.pcap", filepath.Join(dir, "out.pcap"))
	sock := filepath.Join(dir, "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	next := func() string {
		ln.SetReadDeadline(time.Now().Add(60 * time.Second))
		buf := make([]byte, 256)
		n, err := ln.Read(buf)
		if err != nil {
			t.Fatalf("waiting for sd_notify: %v", err)
		}
		return string(buf[:n])
	}

	first := exec.Command(bin, "run", "-c", p, "--stats-interval", "0")
	first.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var firstOut syncbuf.Buffer
	first.Stdout, first.Stderr = &firstOut, &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	if got := next(); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1\n%s", got, firstOut.String())
	}

	second := exec.Command(bin, "run", "-c", p, "--log-format", "json")
	out, err := second.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("second daemon on the same prefix: %v, want exit 1\n%s", err, out)
	}
	for _, bad := range []string{"panic", "goroutine"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("second daemon's output has %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(string(out), "Is another primary process running?") {
		t.Errorf("second daemon's output lacks DPDK's reason:\n%s", out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("second daemon: not JSON: %q", sc.Text())
		}
	}

	first.Process.Signal(syscall.SIGHUP)
	for _, want := range []string{"RELOADING=1", "READY=1"} {
		if got := next(); got != want {
			t.Errorf("after SIGHUP: %q, want %q", got, want)
		}
	}
	first.Process.Signal(syscall.SIGTERM)
	if got := next(); got != "STOPPING=1" {
		t.Errorf("after SIGTERM: %q, want STOPPING=1", got)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("first daemon: %v\n%s", err, firstOut.String())
	}
}

// TestRunJSONLogsRefusedConfig: a configuration refused at start is logged
// as JSON too, one object per problem, and the exit code is 2.
func TestRunJSONLogsRefusedConfig(t *testing.T) {
	bin := buildFulcrum(t)
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[dataplane]\nport = \"x\"\nmtu = 10\n[eal]\nfile_prefix = \"..\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "-c", bad, "--log-format", "json").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2:\n%s", err, out)
	}
	problems := 0
	for i, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("line %d is not JSON: %q", i+1, line)
			continue
		}
		if rec["msg"] == "configuration refused" {
			problems++
		}
	}
	if problems < 2 {
		t.Errorf("%d problems logged, want one per problem (at least mtu and file_prefix):\n%s", problems, out)
	}
}
