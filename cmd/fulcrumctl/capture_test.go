package main

import (
	"bytes"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
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
