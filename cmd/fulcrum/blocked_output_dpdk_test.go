//go:build dpdk

package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// blockedOutConfig is lifecycleConfig with a file prefix of its own.
func blockedOutConfig(t *testing.T, dir, extra string) (string, string) {
	t.Helper()
	p, runDir := lifecycleConfig(t, dir, "../../examples/in.pcap", extra)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Base(runDir)
	prefix := strings.Replace(old, "fulcrum-lc-", "fulcrum-bo-", 1)
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(prefix), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir = filepath.Join(filepath.Dir(runDir), prefix)
	t.Cleanup(func() { os.RemoveAll(runDir) })
	return p, runDir
}

// stalledPipe is a pipe whose reader is open but reads nothing (`| less`
// left open, a stalled journald): fill makes it full, so the daemon's
// next write to it blocks.
type stalledPipe struct {
	r, w *os.File
}

func newStalledPipe(t *testing.T) *stalledPipe {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &stalledPipe{r: r, w: w}
	// Closing the read end ends every write blocked on it (EPIPE): the
	// filler's and the daemon's.
	t.Cleanup(func() { r.Close(); w.Close() })
	return p
}

// fill writes to the pipe (from the test's side of it) until the pipe
// has no free page left: the filler's write then waits, and so does the
// daemon's next one.
func (p *stalledPipe) fill(t *testing.T) {
	t.Helper()
	size, err := unix.FcntlInt(p.r.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	go p.w.Write(make([]byte, 4*size)) // blocks once full; ends at clean-up
	deadline := time.Now().Add(15 * time.Second)
	for {
		fds := []unix.PollFd{{Fd: int32(p.w.Fd()), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, 0)
		if err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pipe of %d bytes still writable", size)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStalledReaderSIGTERM: a daemon whose stderr reader stopped
// reading (journald stalled, `fulcrum run 2>&1 | less` left open), or
// whose stdout reader did with --stats-json (`| less` again), must still
// stop on SIGTERM: report STOPPING, withdraw, exit 0 and remove its
// runtime directory. Before, the main loop's first act on the signal was
// to log "stopping", and it wrote the counters every interval, each a
// write that blocks for ever on the full pipe.
func TestStalledReaderSIGTERM(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	for _, c := range []struct {
		name   string
		stdout bool // the stalled pipe is stdout (stderr to the test)
		flags  []string
	}{
		{"stderr", false, []string{"--stats-interval", "0"}},
		{"stdout with --stats-json", true, []string{"--stats-json", "--stats-interval", "20ms"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg, runDir := blockedOutConfig(t, dir, "")
			p := newStalledPipe(t)
			out, errs := p.w, p.w
			if c.stdout {
				errs = nil
			}
			d := startDaemonIO(t, bin, dir, runDir, out, errs, append([]string{"run", "-c", cfg}, c.flags...)...)
			d.waitReady()
			p.fill(t)
			d.signal(syscall.SIGTERM)
			if got := d.next(15 * time.Second); got != "STOPPING=1" {
				t.Fatalf("after SIGTERM with %s stalled: notification %q, want STOPPING=1\n%s", c.name, got, d.out.String())
			}
			if code := d.wait(15 * time.Second); code != 0 {
				t.Fatalf("exit code %d, want 0\n%s", code, d.out.String())
			}
			d.runDirGone()
		})
	}
}

// TestStderrStalledAdmin: with stderr stalled, an operator's drain
// (which logs) may wait, but the admin API must keep answering reads for
// other clients: GET /api/v1/status answers. Before, the drain's log
// line was written under the control plane's mutex, so every later call
// that reads the plane (status, metrics scrapes, reloads, health
// verdicts) hung behind it.
func TestStderrStalledAdmin(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	dir := t.TempDir()
	cfg, runDir := blockedOutConfig(t, dir, "")
	p := newStalledPipe(t)
	d := startDaemon(t, bin, dir, runDir, p.w, "run", "-c", cfg, "--stats-interval", "0")
	d.waitReady()
	p.fill(t)
	sock := filepath.Join(dir, "admin.sock")
	client := func() *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			},
		}}
	}
	drained := make(chan error, 1)
	go func() {
		resp, err := client().Post("http://fulcrum"+api.ActionPath("web", "be1", "drain"), "application/json", nil)
		if err == nil {
			resp.Body.Close()
		}
		drained <- err
	}()
	// The drain has reached the plane (or answered) before the read.
	if err := <-drained; err != nil {
		t.Errorf("POST drain with stderr stalled: %v", err)
	}
	resp, err := client().Get("http://fulcrum" + api.StatusPath)
	if err != nil {
		t.Fatalf("GET status with stderr stalled: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET status: %d", resp.StatusCode)
	}
}
