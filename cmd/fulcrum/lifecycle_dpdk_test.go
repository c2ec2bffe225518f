//go:build dpdk

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/internal/syncbuf"
)

// daemon is one `fulcrum run` started by a lifecycle test: its own file
// prefix (so its runtime directory can be checked), its systemd
// notifications and its exit status.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    syncbuf.Buffer
	notify *net.UnixConn
	runDir string
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// lifecycleConfig is exampleConfig with a file prefix of the test's own
// and extra appended; it returns the file and the runtime directory DPDK
// makes for that prefix.
func lifecycleConfig(t *testing.T, dir, in, extra string) (string, string) {
	t.Helper()
	p := exampleConfig(t, dir, in, filepath.Join(dir, "out.pcap"))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("fulcrum-lc-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	s := strings.Replace(string(b), fmt.Sprintf(`file_prefix = "fulcrum-pcaptest-%d"`, os.Getpid()), fmt.Sprintf("file_prefix = %q", prefix), 1)
	if s == string(b) {
		t.Fatal("example configuration has no file_prefix to replace")
	}
	if err := os.WriteFile(p, []byte(s+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dpdk.RuntimeBase, prefix)
	// Whatever happens, the test leaves nothing of its prefix behind.
	t.Cleanup(func() { os.RemoveAll(runDir) })
	return p, runDir
}

// startDaemon runs bin with args, NOTIFY_SOCKET pointing at a socket of
// the test's; the process is killed and reaped at the end of the test.
// Its stdout and stderr go to d.out, or to stdio if that is not nil.
func startDaemon(t *testing.T, bin, dir, runDir string, stdio *os.File, args ...string) *daemon {
	t.Helper()
	return startDaemonIO(t, bin, dir, runDir, stdio, stdio, args...)
}

// startDaemonIO is startDaemon with stdout and stderr each to its own
// file, or to d.out where nil.
func startDaemonIO(t *testing.T, bin, dir, runDir string, stdout, stderr *os.File, args ...string) *daemon {
	t.Helper()
	sock := filepath.Join(dir, "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	d := &daemon{t: t, notify: ln, runDir: runDir, done: make(chan struct{})}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
	if stdout != nil {
		d.cmd.Stdout = stdout
	}
	if stderr != nil {
		d.cmd.Stderr = stderr
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.done
	})
	return d
}

// next is the daemon's next systemd notification, "" if none came
// within the deadline.
func (d *daemon) next(within time.Duration) string {
	d.notify.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 256)
	n, err := d.notify.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// waitReady waits for READY=1 (skipping nothing else: it must be first).
func (d *daemon) waitReady() {
	d.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	got := ""
	for got == "" && !d.exited() && time.Now().Before(deadline) {
		got = d.next(100 * time.Millisecond)
	}
	if got == "" && d.exited() {
		got = d.next(10 * time.Millisecond) // sent before it exited
	}
	if got != "READY=1" {
		d.t.Fatalf("notification %q, want READY=1 (exited: %v)\n%s", got, d.exited(), d.out.String())
	}
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// wait returns the exit code (-1: killed by a signal), failing the test
// if the daemon has not exited within the deadline.
func (d *daemon) wait(within time.Duration) int {
	d.t.Helper()
	select {
	case <-d.done:
	case <-time.After(within):
		d.t.Fatalf("daemon still running %v later\n%s", within, d.out.String())
	}
	if d.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(d.err, &ee) {
		d.t.Fatalf("wait: %v", d.err)
	}
	return ee.ExitCode()
}

func (d *daemon) signal(s os.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(s); err != nil {
		d.t.Fatalf("signal %v: %v", s, err)
	}
}

// runDirGone: the runtime directory the daemon's EAL made is removed.
func (d *daemon) runDirGone() {
	d.t.Helper()
	if _, err := os.Stat(d.runDir); !errors.Is(err, os.ErrNotExist) {
		d.t.Errorf("runtime directory %s left behind (stat: %v)", d.runDir, err)
	}
}

func needDPDKRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
}

// TestRunSignalDuringStartup: a SIGHUP that arrives while the EAL is
// still starting (here: net_pcap waiting for its input, a FIFO) neither
// kills the daemon nor is lost: it starts, reports READY and reloads. A
// SIGTERM then stops it once the EAL is up, through the clean-up (exit
// 0, runtime directory removed), without ever reporting READY. Before,
// signals were caught only once forwarding: either signal killed the
// daemon outright and left /var/run/dpdk/<prefix> behind. A second stop
// signal (SIGINT, then SIGTERM) while start-up hangs exits at once with
// status 1: a start-up that never ends can still be stopped.
func TestRunSignalDuringStartup(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	pcap, err := os.ReadFile("../../examples/in.pcap")
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "in.pcap")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, runDir := lifecycleConfig(t, dir, fifo, "")
			d := startDaemon(t, bin, dir, runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
			// The EAL made its runtime directory and now waits in the
			// net_pcap probe for the FIFO's writer.
			deadline := time.Now().Add(15 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(runDir, "config")); err == nil {
					break
				}
				if d.exited() || time.Now().After(deadline) {
					t.Fatalf("no runtime directory %s (exited: %v)\n%s", runDir, d.exited(), d.out.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			d.signal(sig)
			if sig == syscall.SIGINT {
				// A second stop signal while the EAL still waits: the
				// daemon exits at once, status 1.
				d.signal(syscall.SIGTERM)
				if code := d.wait(15 * time.Second); code != 1 {
					t.Fatalf("exit code %d, want 1\n%s", code, d.out.String())
				}
				return
			}
			// Feed the FIFO: the EAL goes on.
			var fd int
			for {
				fd, err = syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
				if err == nil {
					break
				}
				if !errors.Is(err, syscall.ENXIO) || d.exited() || time.Now().After(deadline) {
					t.Fatalf("opening the FIFO: %v (daemon exited: %v, code %d)\n%s", err, d.exited(), d.waitCode(), d.out.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			syscall.SetNonblock(fd, false)
			w := os.NewFile(uintptr(fd), fifo)
			go func() { w.Write(pcap); w.Close() }()

			if sig == syscall.SIGHUP {
				d.waitReady()
				for _, want := range []string{"RELOADING=1", "READY=1"} {
					if got := d.next(15 * time.Second); got != want {
						t.Fatalf("after the start-up SIGHUP: %q, want %q\n%s", got, want, d.out.String())
					}
				}
				d.signal(syscall.SIGTERM)
			}
			if code := d.wait(15 * time.Second); code != 0 {
				t.Fatalf("exit code %d, want 0\n%s", code, d.out.String())
			}
			// Whatever it sent is queued by now.
			if got := d.next(10 * time.Millisecond); sig == syscall.SIGTERM && got == "READY=1" {
				t.Errorf("stopped during start-up, yet reported READY")
			}
			d.runDirGone()
		})
	}
}

// waitCode is the exit code if the daemon has exited, else -2.
func (d *daemon) waitCode() int {
	if !d.exited() {
		return -2
	}
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// TestRunSecondSignalEndsDrain: with [bgp], a SIGTERM withdraws and
// drains for bgp.drain_time (here 10 minutes, the most allowed); a
// second SIGTERM during the drain stops the daemon at once, through the
// clean-up. Before, the second signal waited for the whole drain.
func TestRunSecondSignalEndsDrain(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	dir := t.TempDir()
	// A router that is not there (nothing listens on 127.0.0.1 at this
	// port): the speaker runs and keeps retrying.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	bgpSection := fmt.Sprintf(`
[bgp]
asn = 64512
router_id = "192.0.2.10"
drain_time = "10m"
next_hop_v6 = "2001:db8:100::10"

  [[bgp.neighbor]]
  address = "127.0.0.1"
  peer_asn = 64512
  port = %d
`, port)
	cfg, runDir := lifecycleConfig(t, dir, "../../examples/in.pcap", bgpSection)
	d := startDaemon(t, bin, dir, runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
	d.waitReady()
	d.signal(syscall.SIGTERM)
	if got := d.next(15 * time.Second); got != "STOPPING=1" {
		t.Fatalf("after SIGTERM: %q, want STOPPING=1\n%s", got, d.out.String())
	}
	d.signal(syscall.SIGTERM)
	if code := d.wait(15 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0\n%s", code, d.out.String())
	}
	d.runDirGone()
}

// TestRunReaderGone: a daemon whose stdout and stderr reader has gone
// (`fulcrum run --stats-json | head`, a log shipper restarted) keeps
// forwarding, and a SIGTERM stops it cleanly (exit 0, runtime directory
// removed). Before, its next write killed it with SIGPIPE and left the
// runtime directory behind.
func TestRunReaderGone(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	dir := t.TempDir()
	cfg, runDir := lifecycleConfig(t, dir, "../../examples/in.pcap", "")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close() // nobody reads
	defer pw.Close()
	d := startDaemon(t, bin, dir, runDir, pw, "run", "-c", cfg, "--stats-json", "--stats-interval", "20ms")
	d.waitReady()
	d.signal(syscall.SIGTERM) // the final counters go to stdout too
	if code := d.wait(15 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0 (%v)", code, d.err)
	}
	d.runDirGone()
}

// TestRunExitWhenIdleTiny: --exit-when-idle below 4ns is a duration like
// any other; before, it made a ticker of 0 and panicked once forwarding.
func TestRunExitWhenIdleTiny(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	dir := t.TempDir()
	cfg, runDir := lifecycleConfig(t, dir, "../../examples/in.pcap", "")
	d := startDaemon(t, bin, dir, runDir, nil, "run", "-c", cfg, "--exit-when-idle", "1ns", "--stats-interval", "0")
	if code := d.wait(15 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0\n%s", code, d.out.String())
	}
	d.runDirGone()
}
