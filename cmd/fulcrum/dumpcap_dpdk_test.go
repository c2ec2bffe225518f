//go:build dpdk

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/internal/syncbuf"

	"github.com/google/gopacket/pcapgo"
)

// dumpcapBurst is dpdk-dumpcap's dequeue burst (BURST_SIZE in DPDK 22.11's
// app/dumpcap/main.c): it writes a whole burst before it checks -c, so a
// capture of -c N holds N to N+dumpcapBurst-1 packets.
const dumpcapBurst = 32

// TestDumpcapCapturesRunningFulcrum runs fulcrum on hugepages (a hugetlbfs
// of the test's own) with a net_pcap port replaying examples/in.pcap, then
// attaches DPDK's dpdk-dumpcap to it (a secondary process, through
// rte_pdump) and checks the pcapng it writes: the count asked for (rounded
// up to dumpcap's burst) of frames, each byte for byte a frame of the input.
func TestDumpcapCapturesRunningFulcrum(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("hugepages and DPDK need root")
	}
	dumpcap, err := exec.LookPath("dpdk-dumpcap")
	if err != nil {
		t.Skip("dpdk-dumpcap is not installed (Debian: dpdk)")
	}
	const memoryMB = 256
	reserveHugepages(t, memoryMB/2+64) // fulcrum's -m in 2 MB pages, and room for dumpcap's ring and pool
	huge := mountHugetlbfs(t)

	// The replayed pcap at a short path: dumpcap's secondary process
	// re-probes the primary's vdevs, and from a clean clone in
	// /tmp/tmp.XXXXXXXXXX/fulcrum the net_pcap0 arguments grew past what
	// it accepts ("failed to initialize net_pcap0"; the same test passed
	// from a shorter checkout path).
	src, err := os.ReadFile("../../examples/in.pcap")
	if err != nil {
		t.Fatal(err)
	}
	short, err := os.CreateTemp("", "fdc*.pcap")
	if err != nil {
		t.Fatal(err)
	}
	in := short.Name()
	t.Cleanup(func() { os.Remove(in) })
	if _, err := short.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := short.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, fr := range readPcap(t, in) {
		want[string(fr)] = true
	}
	if len(want) == 0 {
		t.Fatalf("%s holds no frames", in)
	}

	bin := buildFulcrum(t)
	dir := t.TempDir()
	prefix := fmt.Sprintf("fulcrum-dumpcap-%d", os.Getpid())
	runDir := filepath.Join("/var/run/dpdk", prefix)
	t.Cleanup(func() { os.RemoveAll(runDir) }) // also what dumpcap left there
	cfgPath := dumpcapConfig(t, dir, in, prefix, huge, memoryMB)

	cmd := exec.Command(bin, "run", "-c", cfgPath, "--stats-interval", "0")
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { stopProcess(t, cmd, exited) })
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "msg=forwarding") {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("fulcrum exited before forwarding: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("fulcrum did not start forwarding:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// On hugepages, each worker's conntrack table is in the EAL's
	// hugepage heap, not on the Go heap.
	st := unixStatus(t, filepath.Join(dir, "admin.sock"))
	if len(st.Workers) == 0 {
		t.Fatalf("status lists no workers")
	}
	for _, w := range st.Workers {
		if !w.Conntrack.Hugepages || w.Conntrack.Capacity < 65536 {
			t.Errorf("worker %d: conntrack hugepages=%v capacity=%d, want true and >= 65536 (examples/pcap.toml)", w.Worker, w.Conntrack.Hugepages, w.Conntrack.Capacity)
		}
	}

	const count = 50
	out := filepath.Join(dir, "capture.pcapng")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dc := exec.CommandContext(ctx, dumpcap, "--file-prefix="+prefix, "-i", "net_pcap0", "-c", strconv.Itoa(count), "-q", "-w", out)
	dc.Dir = dir
	dc.WaitDelay = 5 * time.Second
	dcOut, err := dc.CombinedOutput()
	if err != nil {
		t.Fatalf("dpdk-dumpcap: %v (context: %v)\n%s\nfulcrum:\n%s", err, ctx.Err(), dcOut, stderr.String())
	}

	frames := readPcapng(t, out)
	if len(frames) < count || len(frames) > count+dumpcapBurst-1 {
		t.Fatalf("capture holds %d frames, want %d..%d (-c %d, dumpcap's burst %d)", len(frames), count, count+dumpcapBurst-1, count, dumpcapBurst)
	}
	for i, fr := range frames {
		if !want[string(fr)] {
			t.Errorf("captured frame %d (%d bytes) is no frame of %s: % x", i, len(fr), in, fr[:min(len(fr), 64)])
		}
	}
	// Still forwarding after the capture detached: it stops cleanly.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("fulcrum exit after the capture: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("fulcrum did not exit on SIGTERM\n%s", stderr.String())
	}
}

// dumpcapConfig is examples/pcap.toml on hugepages in huge: net_pcap0
// replays in forever, what fulcrum sends goes to net_null0, and the admin
// API listens on a socket in dir.
func dumpcapConfig(t *testing.T, dir, in, prefix, huge string, memoryMB int) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/pcap.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{"hugepages = false", "hugepages = true"},
		{"memory_mb = 512", fmt.Sprintf("memory_mb = %d", memoryMB)},
		{`file_prefix = "fulcrum-example"`, fmt.Sprintf("file_prefix = %q\nextra_args = [\"--huge-dir\", %q]", prefix, huge)},
		{`vdevs = ["net_pcap0,rx_pcap=examples/in.pcap,tx_pcap=/tmp/fulcrum-out.pcap"]`, fmt.Sprintf(`vdevs = ["net_pcap0,rx_pcap=%s,infinite_rx=1", "net_null0"]`, in)},
		{`port = "net_pcap0"`, "port = \"net_pcap0\"\ntx_port = \"net_null0\""},
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
	return p
}

// reserveHugepages makes sure pages 2 MB hugepages are free, raising
// vm.nr_hugepages if need be (and putting it back after the test); it
// skips the test when the kernel does not give them.
func reserveHugepages(t *testing.T, pages int) {
	t.Helper()
	size, free := meminfo(t, "Hugepagesize"), meminfo(t, "HugePages_Free")
	if size != 2048 {
		t.Skipf("default hugepage size is %d kB, the test mounts 2 MB pages", size)
	}
	if free >= pages {
		return
	}
	const knob = "/proc/sys/vm/nr_hugepages"
	b, err := os.ReadFile(knob)
	if err != nil {
		t.Skipf("hugepages: %v", err)
	}
	old, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q", knob, b)
	}
	if err := os.WriteFile(knob, []byte(strconv.Itoa(old+pages-free)), 0o644); err != nil {
		t.Skipf("cannot reserve hugepages: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(knob, []byte(strconv.Itoa(old)), 0o644); err != nil {
			t.Errorf("putting %s back to %d: %v", knob, old, err)
		}
	})
	if free = meminfo(t, "HugePages_Free"); free < pages {
		t.Skipf("the kernel gave %d free hugepages of the %d asked for", free, pages)
	}
}

// meminfo reads a number from /proc/meminfo.
func meminfo(t *testing.T, key string) int {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Skipf("hugepages: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		if err != nil {
			t.Fatalf("/proc/meminfo %s: %q", key, v)
		}
		return n
	}
	t.Skipf("/proc/meminfo has no %s (no hugepage support)", key)
	return 0
}

// mountHugetlbfs mounts a 2 MB hugetlbfs in a directory of the test's own
// and unmounts it after the test (after the processes using it are gone:
// cleanups run last registered first).
func mountHugetlbfs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "huge")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("nodev", dir, "hugetlbfs", 0, "pagesize=2M"); err != nil {
		t.Skipf("cannot mount hugetlbfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// stopProcess ends a started command: SIGTERM, then SIGKILL if it is still
// there after a while; it always waits for it.
func stopProcess(t *testing.T, cmd *exec.Cmd, exited chan error) {
	t.Helper()
	select {
	case err := <-exited:
		exited <- err
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		exited <- err
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		exited <- <-exited
	}
}

// readPcapng reads every packet of a pcapng file.
func readPcapng(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var frames [][]byte
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatalf("%s: packet %d: %v", path, len(frames), err)
		}
		if ci.CaptureLength != ci.Length {
			t.Fatalf("%s: packet %d cut to %d of %d bytes", path, len(frames), ci.CaptureLength, ci.Length)
		}
		frames = append(frames, bytes.Clone(data))
	}
}

// unixStatus is GET /api/v1/status from the admin API on a unix socket.
func unixStatus(t *testing.T, sock string) api.Status {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Get("http://fulcrum" + api.StatusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st api.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}
