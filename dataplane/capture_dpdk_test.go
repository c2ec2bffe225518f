//go:build dpdk

package dataplane

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
)

// TestEngineCapture: the engine loop's capture hooks see a forwarded
// frame as received and as it left on the wire, and a dropped frame with
// its reason.
func TestEngineCapture(t *testing.T) {
	l := newLab(t, labToml("exception = false"))
	cp, err := StartCapture(l.eng.Workers(), CaptureFilter{Rx: true, Tx: true, Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	fwd := frame(t, "198.51.100.10", "203.0.113.7", 5, 80, layers.IPProtocolTCP, "S", 0, true)
	noSvc := frame(t, "198.51.100.10", "203.0.113.7", 5, 81, layers.IPProtocolTCP, "S", 0, true)
	copy(fwd[:6], l.eng.PortMAC[:]) // as sent (lab.send), so that the captured bytes compare
	copy(noSvc[:6], l.eng.PortMAC[:])
	l.send(fwd)
	out := l.recv(1, 5*time.Second)
	if len(out) != 1 {
		t.Fatalf("received %d frames, want 1", len(out))
	}
	l.send(noSvc)
	var got []CapturedFrame
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 4 && time.Now().Before(deadline) {
		got = cp.Drain(got)
		time.Sleep(time.Millisecond)
	}
	if len(got) != 4 {
		t.Fatalf("captured %d frames, want 4", len(got))
	}
	want := []struct {
		kind   CaptureKind
		reason string
		data   []byte
	}{{CaptureRx, "", fwd}, {CaptureTx, "", out[0]}, {CaptureRx, "", noSvc}, {CaptureDrop, "no-service", noSvc}}
	for i, w := range want {
		if g := got[i]; g.Kind != w.kind || g.Reason != w.reason || !bytes.Equal(g.Data, w.data) {
			t.Errorf("frame %d: %v %q %d bytes; want %v %q %d bytes", i, g.Kind, g.Reason, len(g.Data), w.kind, w.reason, len(w.data))
		}
	}
}
