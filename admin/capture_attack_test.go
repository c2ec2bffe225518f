package admin

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// injectingWriter is a client's connection that, each time the capture
// writes to it, has one more frame reach the worker while the capture is
// installed: the traffic that goes on while the answer is being written.
type injectingWriter struct {
	h        http.Header
	body     bytes.Buffer
	w        *dataplane.Worker
	frame    []byte
	injected int // frames processed while the capture was installed
}

func (iw *injectingWriter) Header() http.Header { return iw.h }
func (iw *injectingWriter) WriteHeader(int)     {}
func (iw *injectingWriter) Flush()              {}
func (iw *injectingWriter) Write(b []byte) (int, error) {
	iw.body.Write(b)
	if iw.w.Capturing() {
		buf := make([]byte, 128+len(iw.frame))
		copy(buf[128:], iw.frame)
		iw.w.ProcessCaptured([]dataplane.Pkt{{Buf: buf, Off: 128, Len: len(iw.frame)}}, 0)
		iw.injected++
	}
	return len(b), nil
}

// epbCount counts the Enhanced Packet Blocks of a pcapng stream.
func epbCount(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) >= 12 {
		typ, l := binary.LittleEndian.Uint32(b), int(binary.LittleEndian.Uint32(b[4:]))
		if l < 12 || l > len(b) || l%4 != 0 {
			t.Fatalf("bad pcapng block: type %#x length %d of %d", typ, l, len(b))
		}
		if typ == 6 {
			n++
		}
		b = b[l:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after the last block", len(b))
	}
	return n
}

// Every frame a capture put in its ring is in the answer or counted as
// missed: none is lost when the duration ends. Before the fix the last
// drain came before the capture left the workers, so the frames captured
// between the two (here: one, seen while the previous frames were being
// written) were in neither the file nor the missed count.
func TestCaptureDurationEndLosesNoFrame(t *testing.T) {
	key, err := flow.ParseKey("000102030405060708090a0b0c0d0e0f")
	if err != nil {
		t.Fatal(err)
	}
	// No services published: every frame is punted, and a capture of
	// sent frames keeps it as "punt".
	ct := conntrack.DefaultConfig()
	ct.Capacity = 1024
	w, err := dataplane.NewWorker(0, &dataplane.Shared{}, ct, key, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := dataplane.StartCapture([]*dataplane.Worker{w}, dataplane.CaptureFilter{Tx: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	frame := make([]byte, 60)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // broadcast: to another station's MAC it is not for the host
	frame[12], frame[13] = 0x08, 0x06                       // ARP
	iw := &injectingWriter{h: http.Header{}, w: w, frame: frame}
	n, err := writeCapture(iw, http.NewResponseController(iw), cp, 0, 30*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w.Capturing() {
		t.Fatal("the capture is still installed after its duration")
	}
	blocks := epbCount(t, iw.body.Bytes())
	if blocks != n {
		t.Fatalf("%d packet blocks written, %d reported", blocks, n)
	}
	if iw.injected < 2 {
		t.Fatalf("only %d frames reached the worker during the capture", iw.injected)
	}
	if got := uint64(n) + cp.Missed(); got != uint64(iw.injected) {
		t.Fatalf("%d frames captured during the capture, %d written + %d missed: %d lost without a count",
			iw.injected, n, cp.Missed(), uint64(iw.injected)-got)
	}
}
