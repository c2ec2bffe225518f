//go:build dpdk

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/internal/syncbuf"
)

// crefFrames is the size of the test's sample of est-10k's traffic.
const crefFrames = 3000

// TestCRefForwards builds bench/cref/cref.c as `make cref` does and runs it
// with the command line fulcrum-bench gives testpmd for est-10k, on a
// sample of that scenario's traffic written by fulcrum-gen, read once (no
// infinite_rx) and sent to a capture file instead of net_null. Once its
// port 1 has sent every frame it is stopped, and every frame that came out
// is checked: a GRE tunnel (valid outer IPv4 header, protocol 47, the
// right length) to one of the 10 backends, carrying the input frame's IP
// packet unchanged, every frame of a flow to the same backend.
func TestCRefForwards(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
	if err := exec.Command("pkg-config", "--exists", "libdpdk").Run(); err != nil {
		t.Fatalf("running as root with the dpdk tag, but pkg-config finds no libdpdk (%v): scripts/setup.sh installs it", err)
	}
	dir := t.TempDir()
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "libdpdk").Output()
	if err != nil {
		t.Fatalf("pkg-config --cflags --libs libdpdk: %v", err)
	}
	bin := filepath.Join(dir, "cref")
	if out, err := exec.Command("gcc", append([]string{"-O2", "-o", bin, "../../bench/cref/cref.c"}, strings.Fields(string(flags))...)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if out, err := exec.Command("go", "build", "-o", dir+"/", "../fulcrum-gen").CombinedOutput(); err != nil {
		t.Fatalf("go build fulcrum-gen: %v\n%s", err, out)
	}

	s := *scenarioNamed(t, "est-10k")
	s.Frames = crefFrames
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	if err := ensurePcap(context.Background(), dir, in, s.GenArgs(0)); err != nil {
		t.Fatal(err)
	}
	inFrames, err := readFrames(in)
	if err != nil || len(inFrames) != crefFrames {
		t.Fatalf("input: %d frames, %v; want %d", len(inFrames), err, crefFrames)
	}

	// testpmd's command line for the scenario, with the pcap read once,
	// a capture file for net_null and -m 512.
	prefix := fmt.Sprintf("fbench-creftest-%d", os.Getpid())
	t.Cleanup(func() { os.RemoveAll(dpdkRuntimeDir(prefix)) })
	args, err := s.TestpmdArgs(prefix, []string{in}, "0,1")
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i := range args {
		switch {
		case i > 0 && args[i-1] == "-m":
			args[i] = "512"
		case strings.HasPrefix(args[i], "net_pcap0,"):
			args[i] = "net_pcap0,rx_pcap=" + in
		case strings.HasPrefix(args[i], "net_null0"):
			args[i] = "net_pcap1,tx_pcap=" + out
		default:
			continue
		}
		changed++
	}
	if changed != 3 || !strings.Contains(strings.Join(args, " "), " --no-huge ") {
		t.Fatalf("testpmd's arguments changed shape (-m, two vdevs, --no-huge): %q", args)
	}

	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("CREF_CT_CAPACITY=%d", s.ctCapacity()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	var output syncbuf.Buffer
	cmd.Stderr = &output
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	lines := make(chan string, 64)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	ended := false
	defer func() {
		if !ended {
			syscall.Kill(-pid, syscall.SIGKILL) // whatever still runs on a failure
		}
	}()

	// Until port 1 has sent every frame (a time limit, not a wait).
	p := newTestpmdParser()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for sent := false; !sent; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("cref exited (%v) before sending %d frames:\n%s", <-exited, crefFrames, output.String())
			}
			fmt.Fprintln(&output, l)
			if sm, ok := p.Line(l); ok {
				if sm.Tx > crefFrames {
					t.Fatalf("port 1 sent %d frames of %d:\n%s", sm.Tx, crefFrames, output.String())
				}
				sent = sm.Tx == crefFrames
			}
		case <-deadline.C:
			t.Fatalf("port 1 did not send %d frames within 60 s:\n%s", crefFrames, output.String())
		}
	}
	syscall.Kill(-pid, syscall.SIGTERM)
	exit := time.NewTimer(20 * time.Second)
	defer exit.Stop()
	for ok := true; ok; {
		select {
		case l, more := <-lines:
			fmt.Fprintln(&output, l)
			ok = more
		case <-exit.C:
			t.Fatalf("cref did not exit within 20 s of SIGTERM:\n%s", output.String())
		}
	}
	err = <-exited
	ended = true
	if err != nil {
		t.Fatalf("cref: %v\n%s", err, output.String())
	}
	if err := os.RemoveAll(dpdkRuntimeDir(prefix)); err != nil {
		t.Error(err)
	}

	outFrames, err := readFrames(out)
	if err != nil || len(outFrames) != crefFrames {
		t.Fatalf("output: %d frames, %v; want %d\n%s", len(outFrames), err, crefFrames, output.String())
	}
	backends := map[netip.Addr]bool{}
	for i := 1; i <= 10; i++ {
		backends[netip.AddrFrom4([4]byte{10, 1, 0, byte(i)})] = false
	}
	type tuple struct {
		src, dst     netip.Addr
		sport, dport uint16
		proto        uint8
	}
	flows := map[tuple]netip.Addr{}
	repeated := 0
	for i, fr := range outFrames {
		if len(fr) < 38 {
			t.Fatalf("frame %d: %d bytes", i, len(fr))
		}
		ip := fr[14:34]
		dst := netip.AddrFrom4([4]byte(ip[16:20]))
		var sum uint32
		for k := 0; k < 20; k += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[k:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		switch _, isBackend := backends[dst]; {
		case binary.BigEndian.Uint16(fr[12:]) != 0x0800:
			t.Errorf("frame %d: Ethernet type %#04x, want IPv4", i, binary.BigEndian.Uint16(fr[12:]))
		case ip[0] != 0x45 || ip[9] != 47:
			t.Errorf("frame %d: outer IPv4 version/IHL %#02x, protocol %d; want 0x45, 47 (GRE)", i, ip[0], ip[9])
		case sum != 0xffff:
			t.Errorf("frame %d: outer IPv4 header checksum wrong (sum %#04x)", i, sum)
		case int(binary.BigEndian.Uint16(ip[2:])) != len(fr)-14:
			t.Errorf("frame %d: outer IPv4 total length %d, frame %d bytes", i, binary.BigEndian.Uint16(ip[2:]), len(fr))
		case !isBackend:
			t.Errorf("frame %d: to %v, not one of the 10 backends", i, dst)
		case binary.BigEndian.Uint16(fr[34:]) != 0 || binary.BigEndian.Uint16(fr[36:]) != 0x0800:
			t.Errorf("frame %d: GRE flags %#04x, protocol %#04x; want 0, 0x0800", i, binary.BigEndian.Uint16(fr[34:]), binary.BigEndian.Uint16(fr[36:]))
		case !bytes.Equal(fr[38:], inFrames[i][14:]):
			t.Errorf("frame %d: inner packet is not input frame %d's IP packet\n got %x\nwant %x", i, i, fr[38:], inFrames[i][14:])
		default:
			inner := fr[38:]
			if len(inner) < 20 || len(inner) < int(inner[0]&0xf)*4+4 || inner[9] != 6 {
				t.Fatalf("frame %d: input frame %d is not IPv4 TCP: %x", i, i, inner)
			}
			l4 := inner[int(inner[0]&0xf)*4:]
			tp := tuple{netip.AddrFrom4([4]byte(inner[12:16])), netip.AddrFrom4([4]byte(inner[16:20])), binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]), inner[9]}
			backends[dst] = true
			if prev, seen := flows[tp]; !seen {
				flows[tp] = dst
			} else if repeated++; prev != dst {
				t.Errorf("frame %d: flow %v:%d > %v:%d to %v, earlier to %v", i, tp.src, tp.sport, tp.dst, tp.dport, dst, prev)
			}
		}
		if t.Failed() {
			t.FailNow() // one frame's report says enough
		}
	}
	// The checks above must have had something to check: flows that come
	// back (10k flows, 3000 frames at random) and every backend in use.
	if repeated == 0 {
		t.Errorf("no flow has two frames in the sample")
	}
	for be, used := range backends {
		if !used {
			t.Errorf("no frame went to backend %v of %d flows", be, len(flows))
		}
	}
}
