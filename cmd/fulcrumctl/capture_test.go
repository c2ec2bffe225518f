package main

import (
	"bytes"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/config"
)

// TestCapture: fulcrumctl capture --drops REASON --count N -w FILE writes
// a pcapng file of exactly the dropped frames.
func TestCapture(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	noSvc := admintest.TCP(t, 9, netip.AddrPortFrom(webVIP.Addr(), 81), "S")
	file := filepath.Join(t.TempDir(), "drops.pcapng")

	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errs := ctl("--addr", addr, "capture", "--drops", "no-service", "--count", "2", "-w", file)
		done <- result{code, out, errs}
	}()
	var r result
	deadline := time.After(15 * time.Second)
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-deadline:
			t.Fatal("capture did not end in 15 s")
		default:
			p.Send(admintest.TCP(t, 10, webVIP, "S")) // forwarded: not a drop
			p.Send(noSvc)
			time.Sleep(2 * time.Millisecond)
		}
	}
	if r.code != 0 || r.out != file+": 2 frames (0 missed: the rings were full)\n" {
		t.Fatalf("capture: exit %d, %q %q", r.code, r.out, r.errs)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := pcapgo.NewNgReader(bytes.NewReader(b), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		data, _, err := rd.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, noSvc) {
			t.Errorf("frame %d is not the dropped frame", n)
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d frames in the file, want 2", n)
	}
	if code, _, errs := ctl("--addr", addr, "capture", "no-service", "-w", file); code != exitUsage || !strings.Contains(errs, "--drops") {
		t.Errorf("a reason without --drops: exit %d %q", code, errs)
	}
	if code, _, errs := ctl("--addr", addr, "capture"); code != exitUsage || !strings.Contains(errs, "-w") {
		t.Errorf("no -w: exit %d %q", code, errs)
	}
}

// TestCaptureFileNotWorldReadable: the file capture makes holds client
// payloads, which the admin API gives out only with the token; it is
// made readable by its owner (and group) alone, as dumpcap makes its
// files (0600), not by every user of the host (0644 under the usual
// umask 022: `fulcrumctl capture -w /tmp/x.pcapng` run as root handed
// the clients' traffic to every local user).
func TestCaptureFileNotWorldReadable(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	file := filepath.Join(t.TempDir(), "web.pcapng")
	code, out, errs := ctl("--addr", addr, "capture", "--vip", "web", "--duration", "1s", "-w", file)
	if code != 0 {
		t.Fatalf("capture: exit %d, %q %q", code, out, errs)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o007 != 0 {
		t.Errorf("capture file mode %04o: every user of the host may read the clients' payloads", perm)
	}
}

// TestCaptureToDeviceOrFIFO: -w may name what is no regular file:
// /dev/null (count the frames), /dev/stdout, or a FIFO a live Wireshark
// reads (wireshark -k -i FIFO). Such a file cannot be truncated, and
// need not be: the capture is written there, not refused after the
// daemon started it.
func TestCaptureToDeviceOrFIFO(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	fifo := filepath.Join(t.TempDir(), "live")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() { // the live reader
		f, err := os.Open(fifo)
		if err != nil {
			got <- -1
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- len(b)
	}()
	for _, w := range []string{os.DevNull, fifo} {
		code, out, errs := ctl("--addr", addr, "capture", "--duration", "1s", "-w", w)
		if code != 0 {
			t.Errorf("capture -w %s: exit %d, %q %q", w, code, out, errs)
		}
	}
	if n := <-got; n <= 0 {
		t.Errorf("the FIFO's reader got %d bytes, want a pcapng header at least", n)
	}
}

// TestCaptureCtrlCAfterTimeout: Ctrl-C ends a capture early, and the
// file holds what came so far: exit 0 and the summary, however long the
// capture ran. --timeout bounds the wait for the daemon, not the capture
// (which runs for --duration on top of it), so a Ctrl-C after --timeout
// (30 s by default, in a capture of up to 10 min) is the same Ctrl-C.
// Before, it was reported as an error, "capture: context canceled",
// exit 1, without the summary.
func TestCaptureCtrlCAfterTimeout(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	file := filepath.Join(t.TempDir(), "long.pcapng")
	const marker = "not yet truncated"
	if err := os.WriteFile(file, []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		// --timeout 1ns: it has passed by the time the capture starts,
		// as 30 s have in a capture interrupted after 30 s.
		code, out, errs := ctl("--addr", addr, "--timeout", "1ns", "capture", "--duration", "5m", "-w", file)
		done <- result{code, out, errs}
	}()
	// The file is truncated once the daemon has accepted the capture,
	// after capture took over SIGINT.
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		if string(b) != marker {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("capture ended before Ctrl-C: exit %d, %q %q", r.code, r.out, r.errs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the capture did not start in 15 s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("capture still running 15 s after Ctrl-C")
	}
	if r.code != 0 || !strings.HasPrefix(r.out, file+": ") {
		t.Errorf("Ctrl-C after --timeout: exit %d, stdout %q, stderr %q; want 0 and the summary", r.code, r.out, r.errs)
	}
}
