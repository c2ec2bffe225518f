package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// stalledFulcrum prints --stats-json lines whose tx stops at one burst:
// Fulcrum forwarded 32 packets and then nothing (an mbuf leak that empties
// the pool, a stuck tx queue), while rx keeps counting.
const stalledFulcrum = "#!/bin/sh\ni=0\nwhile :; do\n\ti=$((i+1000))\n\techo \"{\\\"time_unix_ms\\\":1,\\\"workers\\\":1,\\\"rx\\\":$i,\\\"tx\\\":32,\\\"ct_hits\\\":0,\\\"ct_misses\\\":0,\\\"new_flows\\\":0}\"\n\tsleep 0.02\ndone\n"

// A Fulcrum run that forwards nothing during the window is not a
// measurement: the scenario must fail (exit status 1), not print a table
// whose Fulcrum column reads 0.00 and a summary row "failed" while the
// harness exits 0.
func TestStalledRunFailsScenario(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("testpmd", fakeStats(false))
	write("fulcrum", stalledFulcrum)
	write("fulcrum-gen", "#!/bin/sh\n: > \"$2\"\necho 'fulcrum-gen: wrote'\n")
	o := &options{bin: dir, testpmd: filepath.Join(dir, "testpmd"), cache: t.TempDir(), work: t.TempDir(), pairs: 1,
		prefix: fmt.Sprintf("fbench-stalltest-%d", os.Getpid()), maxOther: 100,
		tm: Timing{Warmup: 100 * time.Millisecond, Window: 200 * time.Millisecond, Startup: 30 * time.Second, Stall: 30 * time.Second, Exit: 5 * time.Second}}
	sum, err := runScenario(context.Background(), o, scenarioNamed(t, "est-10k"), "digest", nil)
	if len(sum.Pairs) != 1 {
		t.Fatalf("%d pairs, err %v", len(sum.Pairs), err)
	}
	p := sum.Pairs[0]
	t.Logf("testpmd %.3f Mpps (%v), Fulcrum %.3f Mpps (%v), rx %.3f Mpps", p.T.Mpps, p.TErr, p.F.Mpps, p.FErr, p.F.RxMpps)
	if err == nil {
		t.Errorf("Fulcrum forwarded 0 packets in its window (Mpps %v) but runScenario returned no error: the run exits 0", p.F.Mpps)
	}
}

// Every frame of a sample is unique (fulcrum-gen draws each frame's
// sequence number, and numbers IPv4 IDs), so an output that carries one
// input packet twice and lacks another is a forwarding fault (a burst
// slot overwritten by another's mbuf), and tx counts it as two packets
// forwarded. The verification counts frames and checks each one's
// backend only: 20 frames out of 20 in, ten of them copies of the other
// ten, must not read "20/20 verified".
func TestCheckFramesDuplicates(t *testing.T) {
	vip, be := net.IP{203, 0, 113, 1}, net.IP{10, 1, 0, 1}
	var out [][]byte
	for i := range 10 {
		f := greFrame(t, be, vip, uint16(1000+i))
		out = append(out, f, f) // each forwarded twice; the other ten input frames are lost
	}
	res, err := checkFrames(verifyConfig, out)
	if err != nil {
		t.Fatal(err)
	}
	res.Sent = len(out)
	if res.Frames-res.Wrong == res.Sent {
		t.Errorf("10 distinct packets forwarded twice each: verification %+v reads %s, all verified", res, res)
	}
}

// A tunnel whose inner packet was damaged on the way (a payload byte
// overwritten by a header write that ran long) reaches the right backend,
// which then drops it for its bad checksum: the verification must not
// count it as verified. fulcrum-gen's frames all carry valid IPv4 and
// TCP/UDP checksums.
func TestCheckFramesCorruptInner(t *testing.T) {
	vip, be := net.IP{203, 0, 113, 1}, net.IP{10, 1, 0, 1}
	good := greFrame(t, be, vip, 1000)
	bad := greFrame(t, be, vip, 1001)
	bad[len(bad)-1] ^= 0x40 // last byte: the inner TCP window's low byte
	res, err := checkFrames(verifyConfig, [][]byte{good, bad})
	if err != nil {
		t.Fatal(err)
	}
	if res.Wrong != 1 {
		t.Errorf("one intact and one corrupted inner packet: %+v, want 1 wrong", res)
	}
}
