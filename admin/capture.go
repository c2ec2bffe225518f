package admin

// POST /api/v1/capture: frames the workers receive, send and drop,
// streamed as pcapng (Wireshark, tcpdump -r) with each frame's direction,
// worker and drop reason in its packet comment. The capture runs until it
// has --count frames, --duration passed or the client hangs up, and only
// one runs at a time. It is a mutation in the API's access rules (a token
// if one is set): frames carry the clients' payloads.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// Capture limits.
const (
	defaultCaptureDuration = 10 * time.Second
	maxCaptureDuration     = 10 * time.Minute
	maxCaptureCount        = 10_000_000
	// capturePoll is how often the rings are drained: a worker's ring
	// (dataplane.CaptureRingFrames) holds 1024 frames, about 0.1 ms of a
	// busy lcore's traffic with no filter; a filter or drops-only keeps
	// far fewer.
	capturePoll = 2 * time.Millisecond
	// captureWriteGrace is how long the answer may take to reach the
	// client after the capture's duration: a client that stops reading
	// holds its connection (the capture is already detached) no longer.
	captureWriteGrace = 30 * time.Second
)

func (s *Server) postCapture(w http.ResponseWriter, r *http.Request) {
	if err := s.cop.Check(r); err != nil {
		s.writeError(w, r, &httpError{http.StatusForbidden, "cross-origin request refused: " + err.Error()})
		return
	}
	if !s.authorized(r) {
		s.unauthorized(w, r)
		return
	}
	// No body: net/http notices a client that hangs up only once the
	// request's body is read, so a capture with a body still to come
	// would run to its duration for a client long gone.
	if r.ContentLength != 0 {
		// Closing: net/http would otherwise wait for the body to discard it.
		w.Header().Set("Connection", "close")
		s.writeError(w, r, badRequest("capture: the request takes no body (the query selects)"))
		return
	}
	q, count, duration, err := s.captureQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cp, err := s.plane.StartCapture(q)
	if errors.Is(err, dataplane.ErrBusy) {
		err = &httpError{http.StatusConflict, "capture: another capture is running"}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer cp.Stop()
	// The ring leaves the workers at the duration even if the writes
	// below are blocked by a client that does not read: the lcores must
	// not keep copying frames for it until the write deadline.
	detach := time.AfterFunc(duration, cp.Stop)
	defer detach.Stop()
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(duration + captureWriteGrace))
	h := w.Header()
	h.Set("Content-Type", "application/vnd.tcpdump.pcapng")
	h.Set("Cache-Control", "no-store")
	h.Set("Trailer", api.TrailerCaptureFrames+", "+api.TrailerCaptureMissed)
	w.WriteHeader(http.StatusOK)

	frames, werr := writeCapture(w, rc, cp, count, duration, r.Context().Done())
	h.Set(api.TrailerCaptureFrames, strconv.Itoa(frames))
	h.Set(api.TrailerCaptureMissed, strconv.FormatUint(cp.Missed(), 10))
	s.log.Info("admin API call", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery, "remote", r.RemoteAddr,
		"status", http.StatusOK, "frames", frames, "missed", cp.Missed(), "err", werr)
}

func (s *Server) captureQuery(r *http.Request) (q control.CaptureQuery, count int, duration time.Duration, err error) {
	v := r.URL.Query()
	duration = defaultCaptureDuration
	if d := v.Get("duration"); d != "" {
		if duration, err = time.ParseDuration(d); err != nil || duration <= 0 || duration > maxCaptureDuration {
			return q, 0, 0, badRequest("duration %q: not a duration in (0, %v]", d, maxCaptureDuration)
		}
	}
	if c := v.Get("count"); c != "" {
		if count, err = strconv.Atoi(c); err != nil || count < 1 || count > maxCaptureCount {
			return q, 0, 0, badRequest("count %q: not a number in 1..%d", c, maxCaptureCount)
		}
	}
	if vip := v.Get("vip"); vip != "" {
		if q.VIP, err = s.resolveVIP(vip); err != nil {
			return q, 0, 0, err
		}
	}
	if b := v.Get("backend"); b != "" {
		if q.VIP == "" {
			return q, 0, 0, badRequest("backend %q: name its vip too (vip=...)", b)
		}
		if _, q.Backend, err = s.resolveBackend(q.VIP, b); err != nil {
			return q, 0, 0, err
		}
	}
	if d := v.Get("drops"); d != "" {
		if q.DropsOnly, err = strconv.ParseBool(d); err != nil {
			return q, 0, 0, badRequest("drops %q: not true or false", d)
		}
	}
	if reason := v.Get("reason"); reason != "" {
		known := false
		dataplane.ForEachDrop(&dataplane.Counters{}, func(name string, _ uint64) { known = known || name == reason })
		if !known {
			return q, 0, 0, badRequest("reason %q: not a drop reason (docs/drop-reasons.md)", reason)
		}
		q.DropsOnly, q.DropReason = true, reason
	}
	if q.DropsOnly && q.Backend != "" {
		return q, 0, 0, badRequest("drops and backend: frames to a backend are forwarded, not dropped")
	}
	return q, count, duration, nil
}

// writeCapture streams the capture as pcapng until count frames (0: no
// limit), the duration or done, and returns the frames written.
func writeCapture(w http.ResponseWriter, rc *http.ResponseController, cp *dataplane.Capture, count int, duration time.Duration, done <-chan struct{}) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	ng, err := pcapgo.NewNgWriterInterface(bw, pcapgo.NgInterface{Name: "fulcrum", LinkType: layers.LinkTypeEthernet,
		SnapLength: dataplane.CaptureSnapLen, TimestampResolution: 9},
		pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "fulcrum"}})
	if err != nil {
		return 0, err
	}
	// The status line, the header and the section header go out now:
	// the client learns that the capture runs (and its ring is installed)
	// before the first frame, which a filter may make wait for long.
	if err := ng.Flush(); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	if err := rc.Flush(); err != nil {
		return 0, err
	}
	start := time.Now()
	deadline := time.NewTimer(duration)
	defer deadline.Stop()
	tick := time.NewTicker(capturePoll)
	defer tick.Stop()
	var buf []dataplane.CapturedFrame
	n := 0
	finish := func() (int, error) {
		// Interface statistics: frames the rings had no room for.
		if err := ng.WriteInterfaceStats(0, pcapgo.NgInterfaceStatistics{LastUpdate: time.Now(), StartTime: start, EndTime: time.Now(),
			PacketsReceived: uint64(n), PacketsDropped: cp.Missed()}); err != nil {
			return n, err
		}
		if err := ng.Flush(); err != nil {
			return n, err
		}
		return n, bw.Flush()
	}
	for {
		stop := false
		select {
		case <-done:
			return n, nil
		case <-deadline.C:
			stop = true
		case <-tick.C:
		}
		if stop {
			// Leave the workers before the last drain, so that what
			// they captured up to then is in it: draining first lost
			// the frames captured in between, counted nowhere.
			cp.Stop()
		}
		buf = cp.Drain(buf[:0])
		for i := range buf {
			if count > 0 && n >= count {
				break
			}
			if err := writeEPB(bw, &buf[i]); err != nil {
				return n, err
			}
			n++
		}
		if len(buf) > 0 {
			if err := bw.Flush(); err != nil {
				return n, err
			}
			rc.Flush()
		}
		if stop || count > 0 && n >= count {
			cp.Stop()
			return finish()
		}
	}
}

// writeEPB writes one pcapng Enhanced Packet Block (interface 0,
// nanosecond timestamps) with the frame's direction, worker and drop
// reason as its comment (opt_comment). pcapgo's writer has no
// per-packet options.
func writeEPB(w *bufio.Writer, f *dataplane.CapturedFrame) error {
	comment := f.Kind.String() + " worker " + strconv.Itoa(f.Worker)
	if f.Kind == dataplane.CaptureDrop {
		comment = fmt.Sprintf("drop %s worker %d", f.Reason, f.Worker)
	}
	pad := func(n int) int { return (n + 3) &^ 3 }
	optLen := 4 + pad(len(comment)) + 4 // comment option, then opt_endofopt
	total := 28 + pad(len(f.Data)) + optLen + 4
	var hdr [28]byte
	le := binary.LittleEndian
	le.PutUint32(hdr[0:], 6) // EPB
	le.PutUint32(hdr[4:], uint32(total))
	le.PutUint32(hdr[8:], 0) // interface
	ts := uint64(f.Time.UnixNano())
	le.PutUint32(hdr[12:], uint32(ts>>32))
	le.PutUint32(hdr[16:], uint32(ts))
	le.PutUint32(hdr[20:], uint32(len(f.Data)))
	le.PutUint32(hdr[24:], uint32(f.OrigLen))
	w.Write(hdr[:])
	w.Write(f.Data)
	var zeros [4]byte
	w.Write(zeros[:pad(len(f.Data))-len(f.Data)])
	var opt [4]byte
	le.PutUint16(opt[0:], 1) // opt_comment
	le.PutUint16(opt[2:], uint16(len(comment)))
	w.Write(opt[:])
	w.WriteString(comment)
	w.Write(zeros[:pad(len(comment))-len(comment)])
	w.Write(zeros[:4]) // opt_endofopt
	var tail [4]byte
	le.PutUint32(tail[:], uint32(total))
	_, err := w.Write(tail[:])
	return err
}
