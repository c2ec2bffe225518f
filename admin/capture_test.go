package admin_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// capture runs POST path while send is called every few milliseconds
// (frames reach the workers only once the capture is installed), and
// returns the pcapng body and the trailers.
func (e *env) capture(path string, send func()) ([]byte, http.Header) {
	e.t.Helper()
	type result struct {
		body    []byte
		trailer http.Header
		code    int
		err     error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := e.hc.Post(e.base+path, "", nil)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{b, resp.Trailer, resp.StatusCode, err}
	}()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case r := <-done:
			if r.err != nil || r.code != 200 {
				e.t.Fatalf("POST %s: %d %v %s", path, r.code, r.err, r.body)
			}
			return r.body, r.trailer
		case <-deadline:
			e.t.Fatalf("POST %s: no answer in 15 s", path)
		default:
			send()
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// pcapngComments reads the opt_comment of every Enhanced Packet Block, an
// independent walk of the blocks (pcapgo's reader skips packet options).
func pcapngComments(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	le := binary.LittleEndian
	for len(b) >= 12 {
		typ, n := le.Uint32(b), int(le.Uint32(b[4:]))
		if n < 12 || n > len(b) || n%4 != 0 || le.Uint32(b[n-4:]) != uint32(n) {
			t.Fatalf("bad pcapng block: type %#x length %d of %d", typ, n, len(b))
		}
		if typ == 6 {
			capLen := int(le.Uint32(b[20:]))
			opts := b[28+(capLen+3)&^3 : n-4]
			comment := ""
			for len(opts) >= 4 {
				code, l := le.Uint16(opts), int(le.Uint16(opts[2:]))
				if code == 0 {
					break
				}
				if code == 1 {
					comment = string(opts[4 : 4+l])
				}
				opts = opts[4+(l+3)&^3:]
			}
			out = append(out, comment)
		}
		b = b[n:]
	}
	return out
}

// TestCapture: a capture of a drop reason holds exactly the dropped frames,
// with the reason in each comment; a capture of a VIP holds its frames as
// received and as sent; the answer is pcapng that pcapgo reads.
func TestCapture(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	noSvc := admintest.TCP(t, 9, netip.AddrPortFrom(webVIP.Addr(), 81), "S")
	dns := admintest.UDP(t, 9, dnsVIP)

	body, trailer := e.capture(api.CaptureQuery("", "", false, "no-service", 3, 0), func() {
		e.plane.Send(dns) // forwarded: not in a drops capture
		e.plane.Send(noSvc)
	})
	r, err := pcapgo.NewNgReader(bytes.NewReader(body), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ci.Length != len(noSvc) {
			t.Errorf("frame length %d, want %d", ci.Length, len(noSvc))
		}
		frames = append(frames, append([]byte(nil), data...))
	}
	if len(frames) != 3 {
		t.Fatalf("%d frames, want 3", len(frames))
	}
	for i, f := range frames {
		if !bytes.Equal(f, noSvc) {
			t.Errorf("frame %d is not the dropped frame", i)
		}
	}
	comments := pcapngComments(t, body)
	if len(comments) != 3 {
		t.Fatalf("%d packet blocks, want 3", len(comments))
	}
	for _, c := range comments {
		if c != "drop no-service worker 0" {
			t.Errorf("comment %q", c)
		}
	}
	if trailer.Get(api.TrailerCaptureFrames) != "3" || trailer.Get(api.TrailerCaptureMissed) != "0" {
		t.Errorf("trailers %v", trailer)
	}

	// A VIP's frames: as received and as sent (encapsulated), nothing of
	// the other VIP.
	body, _ = e.capture(api.CaptureQuery("dns", "", false, "", 4, 0), func() {
		e.plane.Send(noSvc)
		e.plane.Send(dns)
	})
	comments = pcapngComments(t, body)
	if len(comments) != 4 || comments[0] != "rx worker 0" || comments[1] != "tx worker 0" || comments[2] != "rx worker 0" {
		t.Errorf("dns capture comments %q, want rx, tx, rx, tx", comments)
	}
	r, _ = pcapgo.NewNgReader(bytes.NewReader(body), pcapgo.DefaultNgReaderOptions)
	data, _, err := r.ReadPacketData()
	if err != nil || !bytes.Equal(data, dns) {
		t.Errorf("first frame of the dns capture is not the query as received (%v)", err)
	}

	e.fails("POST", api.CaptureQuery("", "", false, "bogus", 0, 0), "", 400, "reason")
	e.fails("POST", api.CaptureQuery("nope", "", false, "", 0, 0), "", 404)
	e.fails("POST", api.CapturePath+"?duration=1h", "", 400, "duration")
	e.fails("GET", api.CapturePath, "", 405)
}
