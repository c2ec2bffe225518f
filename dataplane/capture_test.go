package dataplane

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"
)

// TestCapture: received, sent and dropped frames land in the ring with
// their bytes (as received, as sent) and the drop reason; filters select;
// a full ring counts missed frames; one capture at a time.
func TestCapture(t *testing.T) {
	r := newRig(t, testConfig)
	cp, err := StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true}); err != ErrBusy {
		t.Fatalf("second capture: %v, want ErrBusy", err)
	}
	fwd := frame(t, "198.51.100.10", "203.0.113.7", 1000, 80, layers.IPProtocolTCP, "S", 10, true)
	noSvc := frame(t, "198.51.100.10", "203.0.113.7", 1001, 81, layers.IPProtocolTCP, "S", 10, true)
	out, v := r.run(fwd, noSvc)
	if v[0] != Tx || v[1] != Drop {
		t.Fatalf("verdicts %v", v)
	}
	got := cp.Drain(nil)
	if len(got) != 4 {
		t.Fatalf("%d frames captured, want 4 (rx, tx, rx, drop): %+v", len(got), got)
	}
	want := []struct {
		kind   CaptureKind
		reason string
		data   []byte
	}{{CaptureRx, "", fwd}, {CaptureTx, "", out[0]}, {CaptureRx, "", noSvc}, {CaptureDrop, "no-service", noSvc}}
	for i, w := range want {
		g := got[i]
		if g.Kind != w.kind || g.Reason != w.reason || !bytes.Equal(g.Data, w.data) || g.OrigLen != len(w.data) {
			t.Errorf("frame %d: %v %q %d bytes; want %v %q %d bytes (equal: %v)", i, g.Kind, g.Reason, len(g.Data), w.kind, w.reason, len(w.data), bytes.Equal(g.Data, w.data))
		}
	}
	cp.Stop()
	r.run(fwd)
	if n := len(cp.Drain(nil)); n != 0 {
		t.Errorf("%d frames captured after Stop", n)
	}

	// Drops of one reason only; a backend's traffic only.
	cp, err = StartCapture([]*Worker{r.w}, CaptureFilter{Drops: true, DropReason: "no-backend"})
	if err != nil {
		t.Fatal(err)
	}
	r.run(noSvc, fwd)
	if n := len(cp.Drain(nil)); n != 0 {
		t.Errorf("drops of no-backend: %d frames, want 0 (the drop was no-service)", n)
	}
	cp.Stop()
	be1 := netip.MustParseAddr("10.0.1.1")
	cp, _ = StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Backend: be1})
	to := map[bool]int{}
	for sport := uint16(2000); sport < 2040; sport++ {
		o, _ := r.run(frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "S", 10, true))
		to[outerDst(o[0]) == be1]++
	}
	frames := cp.Drain(nil)
	if to[true] == 0 || len(frames) != 2*to[true] {
		t.Errorf("backend be1: %d frames, want rx+tx of its %d flows", len(frames), to[true])
	}
	for _, f := range frames {
		if f.Kind == CaptureTx && outerDst(f.Data) != be1 {
			t.Errorf("a frame to %v in be1's capture", outerDst(f.Data))
		}
	}
	cp.Stop()

	// A full ring counts what it cannot hold.
	cp, _ = StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, VIP: netip.MustParseAddr("203.0.113.7"), VIPPort: 80})
	for i := range CaptureRingFrames + 5 {
		r.run(frame(t, "198.51.100.11", "203.0.113.7", uint16(3000+i%50), 80, layers.IPProtocolTCP, "A", 10, true))
	}
	r.run(noSvc) // port 81: not this VIP
	if n, m := len(cp.Drain(nil)), cp.Missed(); n != CaptureRingFrames || m != 5 {
		t.Errorf("full ring: %d frames, %d missed; want %d, 5", n, m, CaptureRingFrames)
	}
	cp.Stop()
}

// TestCaptureHookAllocatesNothing: with a capture running, the hooks
// allocate nothing on the lcore.
func TestCaptureHookAllocatesNothing(t *testing.T) {
	r := newRig(t, testConfig)
	cp, _ := StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Drops: true})
	defer cp.Stop()
	f := frame(t, "198.51.100.10", "203.0.113.7", 1000, 80, layers.IPProtocolTCP, "A", 10, true)
	pkts := []Pkt{{Buf: make([]byte, headroom+len(f)+64), Off: headroom, Len: len(f)}}
	allocs := testing.AllocsPerRun(100, func() {
		copy(pkts[0].Buf[headroom:], f)
		pkts[0].Off, pkts[0].Len = headroom, len(f)
		r.w.ProcessCaptured(pkts, r.now)
		cp.rings[0].tail.Store(cp.rings[0].head.Load()) // consume without copying
	})
	if allocs != 0 {
		t.Errorf("%v allocations per burst with a capture running", allocs)
	}
}

// BenchmarkCaptureHook: a 32-packet burst of established flows through
// Process alone, through the hooks with no capture running (what every
// burst pays), and with a capture of everything (drained every burst).
// ns/op is per packet.
func BenchmarkCaptureHook(b *testing.B) {
	for _, mode := range []string{"process", "hooks-idle", "capturing"} {
		b.Run(mode, func(b *testing.B) {
			r := newRig(&testing.T{}, testConfig)
			const burst = 32
			base := frame(&testing.T{}, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "A", 0, true)
			bufs := make([][]byte, burst)
			pkts := make([]Pkt, burst)
			fill := func() {
				for i := range pkts {
					if bufs[i] == nil {
						bufs[i] = make([]byte, headroom+len(base))
					}
					copy(bufs[i][headroom:], base)
					bufs[i][headroom+26+3] = byte(i) // 32 flows
					pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(base)}
				}
			}
			fill()
			r.w.Process(pkts, r.now)
			var cp *Capture
			if mode == "capturing" {
				cp, _ = StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Drops: true})
				defer cp.Stop()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n += burst {
				fill()
				if mode == "process" {
					r.w.Process(pkts, r.now)
				} else {
					r.w.ProcessCaptured(pkts, r.now)
				}
				if cp != nil {
					cp.rings[0].tail.Store(cp.rings[0].head.Load())
				}
			}
		})
	}
}

// TestCaptureDropReasonPerPacket: in one burst that drops packets for
// several reasons, each captured drop carries its own: the reason whose
// counter the same packet increments when it is processed alone.
func TestCaptureDropReasonPerPacket(t *testing.T) {
	r := newRig(t, testConfig)
	fwd := frame(t, "198.51.100.10", "203.0.113.7", 1000, 80, layers.IPProtocolTCP, "S", 10, true)
	noSvc := frame(t, "198.51.100.10", "203.0.113.7", 1001, 81, layers.IPProtocolTCP, "S", 10, true)
	badFlags := frame(t, "198.51.100.10", "203.0.113.7", 1002, 80, layers.IPProtocolTCP, "SF", 10, true)
	truncated := append([]byte(nil), fwd[:14+12]...) // Ethernet and part of an IPv4 header
	drops := [][]byte{noSvc, badFlags, truncated}

	// Alone: which counter each one increments.
	solo := make([]string, len(drops))
	for i, d := range drops {
		before := map[string]uint64{}
		ForEachDrop(r.w.Local(), func(name string, n uint64) { before[name] = n })
		if _, v := r.run(d); v[0] != Drop {
			t.Fatalf("drop %d: verdict %v", i, v[0])
		}
		ForEachDrop(r.w.Local(), func(name string, n uint64) {
			if n != before[name] {
				if solo[i] != "" {
					t.Fatalf("drop %d grew two counters: %s and %s", i, solo[i], name)
				}
				solo[i] = name
			}
		})
	}
	if solo[0] == solo[1] || solo[1] == solo[2] || solo[0] == solo[2] {
		t.Fatalf("the test needs three different reasons, got %v", solo)
	}

	cp, err := StartCapture([]*Worker{r.w}, CaptureFilter{Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	burst := [][]byte{fwd, drops[0], drops[1], fwd, drops[2], drops[0]}
	r.run(burst...)
	got := cp.Drain(nil)
	want := []string{solo[0], solo[1], solo[2], solo[0]}
	if len(got) != len(want) {
		t.Fatalf("%d drops captured, want %d", len(got), len(want))
	}
	for i, g := range got {
		if g.Kind != CaptureDrop || g.Reason != want[i] {
			t.Errorf("drop %d: %v %q, want drop %q", i, g.Kind, g.Reason, want[i])
		}
	}
	// A reason filter keeps exactly that reason's drops.
	cp.Stop()
	cp, _ = StartCapture([]*Worker{r.w}, CaptureFilter{Drops: true, DropReason: solo[1]})
	r.run(burst...)
	if got := cp.Drain(nil); len(got) != 1 || got[0].Reason != solo[1] || !bytes.Equal(got[0].Data, drops[1]) {
		t.Errorf("filter %q: %+v", solo[1], got)
	}
}
