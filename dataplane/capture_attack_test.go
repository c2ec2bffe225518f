package dataplane

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"
)

// ProcessCaptured is Process with the capture hooks around it, and Process
// takes a burst of any length (it handles the first MaxBurst packets). With
// a capture running, a longer burst indexed the hooks' per-burst arrays
// past MaxBurst and panicked the lcore. Now it captures exactly what
// Process handled: the first MaxBurst packets, each with its own bytes.
func TestCaptureBurstLongerThanMaxBurst(t *testing.T) {
	r := newRig(t, testConfig)
	cp, err := StartCapture([]*Worker{r.w}, CaptureFilter{Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	const n = MaxBurst + 8
	frames := make([][]byte, n)
	pkts := make([]Pkt, n)
	for i := range pkts {
		// Port 81: no service, so each packet is one captured drop.
		frames[i] = frame(t, "198.51.100.10", "203.0.113.7", uint16(1000+i), 81, layers.IPProtocolTCP, "S", 10, true)
		b := make([]byte, headroom+len(frames[i])+64)
		copy(b[headroom:], frames[i])
		pkts[i] = Pkt{Buf: b, Off: headroom, Len: len(frames[i])}
	}
	before := r.w.Local().Drops[DropNoService]
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("ProcessCaptured of %d packets with a capture running panicked: %v", n, p)
			}
		}()
		r.w.ProcessCaptured(pkts, r.now)
	}()
	if d := r.w.Local().Drops[DropNoService] - before; d != MaxBurst {
		t.Fatalf("no-service drops +%d, want +%d (Process handles MaxBurst)", d, MaxBurst)
	}
	got := cp.Drain(nil)
	if len(got) != MaxBurst {
		t.Fatalf("%d frames captured, want %d (one drop per packet Process handled)", len(got), MaxBurst)
	}
	for i, g := range got {
		if g.Kind != CaptureDrop || g.Reason != "no-service" || !bytes.Equal(g.Data, frames[i]) || g.OrigLen != len(frames[i]) {
			t.Errorf("frame %d: %v %q %d/%d bytes (equal %v); want drop no-service of packet %d", i, g.Kind, g.Reason, len(g.Data), g.OrigLen, bytes.Equal(g.Data, frames[i]), i)
		}
	}
	if m := cp.Missed(); m != 0 {
		t.Errorf("%d missed, want 0", m)
	}
}

// A buffer whose offsets are inconsistent (a driver bug) is a counted drop,
// "bad-buffer", for Process; with a capture running the hooks sliced it
// first and panicked the lcore. Now it is captured as that drop, with no
// bytes (there are none to trust), and the packets around it keep theirs.
func TestCaptureBadBufferIsCapturedDrop(t *testing.T) {
	r := newRig(t, testConfig)
	cp, err := StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	noSvc := frame(t, "198.51.100.10", "203.0.113.7", 1001, 81, layers.IPProtocolTCP, "S", 10, true)
	good := make([]byte, headroom+len(noSvc))
	copy(good[headroom:], noSvc)
	pkts := []Pkt{
		{Buf: good, Off: headroom, Len: len(noSvc)},
		{Buf: make([]byte, 60), Off: 128, Len: 60}, // offset past the buffer
		{Buf: make([]byte, 60), Off: 0, Len: 4000}, // length past the buffer
		{Buf: make([]byte, 60), Off: -1, Len: 10},  // negative offset
		{Buf: make([]byte, 60), Off: 0, Len: -5},   // negative length
		{Buf: good, Off: headroom, Len: len(noSvc)},
	}
	before := r.w.Local().Drops[DropBadBuffer]
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("ProcessCaptured of inconsistent buffers with a capture running panicked: %v", p)
			}
		}()
		r.w.ProcessCaptured(pkts, r.now)
	}()
	if d := r.w.Local().Drops[DropBadBuffer] - before; d != 4 {
		t.Fatalf("bad-buffer drops +%d, want +4", d)
	}
	got := cp.Drain(nil)
	type want struct {
		kind   CaptureKind
		reason string
		data   []byte
	}
	wants := []want{{CaptureRx, "", noSvc}, {CaptureDrop, "no-service", noSvc}}
	for range 4 {
		wants = append(wants, want{CaptureRx, "", nil}, want{CaptureDrop, "bad-buffer", nil})
	}
	wants = append(wants, want{CaptureRx, "", noSvc}, want{CaptureDrop, "no-service", noSvc})
	if len(got) != len(wants) {
		t.Fatalf("%d frames captured, want %d", len(got), len(wants))
	}
	for i, w := range wants {
		g := got[i]
		if g.Kind != w.kind || g.Reason != w.reason || !bytes.Equal(g.Data, w.data) || g.OrigLen != len(w.data) {
			t.Errorf("frame %d: %v %q %d/%d bytes; want %v %q %d bytes", i, g.Kind, g.Reason, len(g.Data), g.OrigLen, w.kind, w.reason, len(w.data))
		}
	}
}

// withDestOpts inserts an empty IPv6 Destination Options header (8 bytes)
// between an Ethernet/IPv6 frame's IPv6 header and its transport header.
func withDestOpts(f []byte) []byte {
	out := append([]byte(nil), f[:14+40]...)
	out = append(out, f[14+6], 0, 1, 4, 0, 0, 0, 0) // next: the old next header; PadN
	out = append(out, f[14+40:]...)
	out[14+6] = 60 // Destination Options
	binary.BigEndian.PutUint16(out[14+4:], binary.BigEndian.Uint16(f[14+4:])+8)
	return out
}

// A capture of a VIP keeps every frame the VIP's traffic is made of. The
// dataplane forwards an IPv6 packet with extension headers (it walks them)
// and an IPv4 non-first fragment (no ports in it), but the capture's VIP
// filter read the transport protocol and ports at fixed places: it took the
// extension header for the protocol and payload bytes for the ports, and
// silently left those frames, received and sent, out of the capture.
func TestCaptureVIPFilterKeepsExtHeadersAndFragments(t *testing.T) {
	r := newRig(t, testConfig)
	plain6 := frame(t, "2001:db8:2::1", "2001:db8:ffff::7", 1000, 443, layers.IPProtocolTCP, "S", 10, true)
	ext6 := withDestOpts(frame(t, "2001:db8:2::1", "2001:db8:ffff::7", 1001, 443, layers.IPProtocolTCP, "S", 10, true))
	other6 := withDestOpts(frame(t, "2001:db8:2::1", "2001:db8:ffff::7", 1002, 444, layers.IPProtocolTCP, "S", 10, true))
	if _, v := r.run(plain6, ext6); v[0] != Tx || v[1] != Tx {
		t.Fatalf("verdicts %v: the test needs both forwarded", v)
	}
	cp, err := StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Drops: true,
		VIP: netip.MustParseAddr("2001:db8:ffff::7"), VIPPort: 443, VIPProto: 6})
	if err != nil {
		t.Fatal(err)
	}
	out, v := r.run(plain6, ext6, other6)
	if v[0] != Tx || v[1] != Tx || v[2] != Drop {
		t.Fatalf("verdicts %v, want Tx Tx Drop", v)
	}
	got := cp.Drain(nil)
	cp.Stop()
	want := [][]byte{plain6, out[0], ext6, out[1]} // not other6: port 444
	if len(got) != len(want) {
		t.Fatalf("IPv6 VIP capture: %d frames, want %d (rx and tx of the plain and the extension-header packet)", len(got), len(want))
	}
	for i, w := range want {
		if !bytes.Equal(got[i].Data, w) {
			t.Errorf("IPv6 frame %d: %v, not the expected bytes", i, got[i].Kind)
		}
	}

	// IPv4: a first fragment (ports present) and a non-first one (none),
	// both forwarded to the VIP's backends.
	first := frame(t, "198.51.100.10", "203.0.113.7", 1000, 80, layers.IPProtocolTCP, "A", 10, false)
	binary.BigEndian.PutUint16(first[14+6:], 0x2000) // MF, offset 0
	rest := frame(t, "198.51.100.10", "203.0.113.7", 1000, 80, layers.IPProtocolTCP, "A", 10, false)
	binary.BigEndian.PutUint16(rest[14+6:], 0x0004) // offset 32 bytes
	rest[14+20+2], rest[14+20+3] = 0x12, 0x34       // payload where a port would be
	cp, err = StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true,
		VIP: netip.MustParseAddr("203.0.113.7"), VIPPort: 80, VIPProto: 6})
	if err != nil {
		t.Fatal(err)
	}
	out, v = r.run(first, rest)
	if v[0] != Tx || v[1] != Tx {
		t.Fatalf("fragment verdicts %v: the test needs both forwarded", v)
	}
	got = cp.Drain(nil)
	cp.Stop()
	want = [][]byte{first, out[0], rest, out[1]}
	if len(got) != len(want) {
		t.Fatalf("IPv4 VIP capture of a fragmented datagram: %d frames, want %d (rx and tx of both fragments)", len(got), len(want))
	}
	for i, w := range want {
		if !bytes.Equal(got[i].Data, w) {
			t.Errorf("IPv4 frame %d: %v, not the expected bytes", i, got[i].Kind)
		}
	}
}
