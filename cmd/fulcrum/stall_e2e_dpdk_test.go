//go:build dpdk

package main

// The stall watch (control/stall.go) end to end: a real `fulcrum run`
// with two workers, each reading its own net_pcap rx queue from a FIFO
// the test feeds. A worker whose FIFO the test stops feeding is really
// stuck: its rx burst waits in read(2), inside a cgo call, exactly as a
// loop stuck in a driver would.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// pcapFeeder writes a pcap stream into a FIFO that one net_pcap rx queue
// reads: while on, 32 frames (one burst) every 20 ms.
type pcapFeeder struct {
	f      *os.File
	frames [][]byte
	on     atomic.Bool
	sent   atomic.Int64
	stop   chan struct{}
	done   chan struct{}
}

func newPCAPFeeder(t *testing.T, path string, frames [][]byte) *pcapFeeder {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// O_RDWR: the open does not wait for the reader, and the reader's
	// open does not wait for us.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 65535)
	binary.LittleEndian.PutUint32(hdr[20:], 1) // Ethernet
	if _, err := f.Write(hdr); err != nil {
		t.Fatal(err)
	}
	p := &pcapFeeder{f: f, frames: frames, stop: make(chan struct{}), done: make(chan struct{})}
	p.on.Store(true)
	go p.run()
	t.Cleanup(func() { close(p.stop); f.Close(); <-p.done })
	return p
}

func (p *pcapFeeder) run() {
	defer close(p.done)
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	var buf []byte
	k := 0
	for {
		select {
		case <-p.stop:
			return
		case <-tk.C:
		}
		if !p.on.Load() {
			continue
		}
		buf = buf[:0]
		for range 32 {
			fr := p.frames[k%len(p.frames)]
			k++
			var rec [16]byte
			binary.LittleEndian.PutUint32(rec[8:], uint32(len(fr)))
			binary.LittleEndian.PutUint32(rec[12:], uint32(len(fr)))
			buf = append(buf, rec[:]...)
			buf = append(buf, fr...)
		}
		if _, err := p.f.Write(buf); err != nil {
			return
		}
		p.sent.Add(32)
	}
}

// stallDaemon is a running two-worker daemon with its feeders and
// admin client.
type stallDaemon struct {
	*daemon
	feed [2]*pcapFeeder
	out  [2]string
	hc   *http.Client
	sock string
}

// startStallDaemon starts `fulcrum run` with two workers, each on its own
// FIFO-fed rx queue, and the [control] lines extra.
func startStallDaemon(t *testing.T, bin, control string) *stallDaemon {
	t.Helper()
	dir := t.TempDir()
	frames := readPcap(t, "../../examples/in.pcap")
	if len(frames) == 0 {
		t.Fatal("no frames in examples/in.pcap")
	}
	s := &stallDaemon{}
	in := [2]string{filepath.Join(dir, "in0.pcap"), filepath.Join(dir, "in1.pcap")}
	s.out = [2]string{filepath.Join(dir, "out0.pcap"), filepath.Join(dir, "out1.pcap")}
	for i := range in {
		s.feed[i] = newPCAPFeeder(t, in[i], frames)
	}
	extra := "\n[control]\n" + control + "\n"
	cfg, runDir := lifecycleConfig(t, dir, in[0]+",rx_pcap="+in[1], extra)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	txt := string(b)
	old := filepath.Base(runDir)
	prefix := strings.Replace(old, "fulcrum-lc-", "fulcrum-stall-", 1)
	for _, r := range [][2]string{
		{old, prefix},
		{"tx_pcap=" + filepath.Join(dir, "out.pcap"), "tx_pcap=" + s.out[0] + ",tx_pcap=" + s.out[1]},
		{"worker_lcores = [1]", "worker_lcores = [1, 2]\nlcore_map = \"0@0,1@1,2@1\""},
	} {
		if !strings.Contains(txt, r[0]) {
			t.Fatalf("config has no %q", r[0])
		}
		txt = strings.Replace(txt, r[0], r[1], 1)
	}
	if err := os.WriteFile(cfg, []byte(txt), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir = filepath.Join(filepath.Dir(runDir), prefix)
	t.Cleanup(func() { os.RemoveAll(runDir) })
	s.daemon = startDaemon(t, bin, dir, runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
	sock := filepath.Join(dir, "admin.sock")
	s.sock = sock
	s.hc = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	s.waitReady()
	return s
}

func (s *stallDaemon) status(t *testing.T) api.Status {
	t.Helper()
	resp, err := s.hc.Get("http://fulcrum" + api.StatusPath)
	if err != nil {
		t.Fatalf("GET status: %v\n%s", err, s.daemon.out.String())
	}
	defer resp.Body.Close()
	var st api.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}

func (s *stallDaemon) metric(t *testing.T, name string) string {
	t.Helper()
	resp, err := s.hc.Get("http://fulcrum" + api.MetricsPath)
	if err != nil {
		t.Fatalf("GET metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+" ") {
			return strings.TrimPrefix(l, name+" ")
		}
	}
	return "<absent>"
}

func pollUntil(t *testing.T, within time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, got := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, within, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStallE2EStuckWorkers: with both workers stuck (a driver or NIC
// fault takes every queue), the metric meant to raise the alert,
// fulcrum_workers_stalled, must still be scrapable within Prometheus's
// default scrape_timeout (10 s). Before, each stuck worker cost a status
// read 2 s for its counters and 5 s for a flow count left posted, and
// every read after it waited the same. Then the operator restarts the
// instance (what README tells them to decide): SIGTERM gives STOPPING
// and an exit within seconds (1: the stuck loops' ports and the EAL are
// left to the process's end), its runtime directory removed. Before, the
// exit waited for the stuck loops for ever, and a second SIGTERM did
// nothing: systemd killed it after TimeoutStopSec (11 minutes).
func TestStallE2EStuckWorkers(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	t.Setenv("GOGC", "off")
	s := startStallDaemon(t, bin, `stall_timeout = "3s"`)
	s.feed[0].on.Store(false)
	s.feed[1].on.Store(false)
	pollUntil(t, 30*time.Second, "both workers stalled", func() (bool, string) {
		st := s.status(t)
		return slices.Equal(st.StalledWorkers, []int{0, 1}), fmt.Sprint(st.StalledWorkers)
	})
	prom := &http.Client{Timeout: 10 * time.Second, Transport: s.hc.Transport}
	for i := range 2 {
		resp, err := prom.Get("http://fulcrum" + api.MetricsPath)
		if err != nil {
			t.Fatalf("scrape %d with both workers stalled: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "\nfulcrum_workers_stalled 2\n") {
			t.Errorf("scrape %d: no fulcrum_workers_stalled 2", i)
		}
	}
	s.signal(syscall.SIGTERM)
	if got := s.next(15 * time.Second); got != "STOPPING=1" {
		t.Fatalf("after SIGTERM: %q, want STOPPING=1", got)
	}
	if code := s.wait(45 * time.Second); code != 1 {
		t.Fatalf("SIGTERM with the workers stuck: exit code %d, want 1 (-1: still running or killed)\n%s", code, s.daemon.out.String())
	}
	s.runDirGone()
}
