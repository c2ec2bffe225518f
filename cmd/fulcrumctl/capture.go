package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// captureDefault is the server's capture duration without --duration or
// --count (admin's defaultCaptureDuration).
const captureDefault = 10 * time.Second

// cmdCapture streams a capture into -w FILE. Ctrl-C ends it early; the
// file then holds every frame received so far.
func cmdCapture(ctx context.Context, c *client, out *output, args []string) error {
	sel := out.sel
	reason := ""
	if len(args) == 1 {
		if !sel.drops {
			return usagef("%q: a drop reason follows --drops", args[0])
		}
		reason = args[0]
	}
	if sel.file == "" {
		return usagef("-w FILE: missing (where the pcapng goes; - for stdout)")
	}
	if sel.count < 0 || sel.duration < 0 {
		return usagef("--count and --duration must be positive")
	}
	if err := resolveSelection(ctx, c, &sel); err != nil {
		return err
	}
	// The file first: an unwritable -w fails before a capture starts
	// (the daemon runs one at a time). Not truncated until the daemon
	// accepts the capture, and removed if it refuses and we made it. Made
	// 0600, as dumpcap makes its files: frames carry client payloads.
	var f *os.File
	if sel.file != "-" {
		_, statErr := os.Stat(sel.file)
		made := os.IsNotExist(statErr)
		var err error
		if f, err = os.OpenFile(sel.file, os.O_WRONLY|os.O_CREATE, 0o600); err != nil {
			return err
		}
		defer func() {
			if f != nil {
				f.Close()
				if made {
					os.Remove(sel.file)
				}
			}
		}()
	}
	d := sel.duration
	if d == 0 {
		d = captureDefault
	}
	// The capture outlives --timeout: it is the wait for the first byte
	// and the last, on top of the capture's duration.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), addSaturating(d, sel.timeout))
	defer cancel()
	cctx, stop := signal.NotifyContext(tctx, os.Interrupt)
	defer stop()

	req, err := http.NewRequestWithContext(cctx, "POST", c.base+api.CaptureQuery(sel.vip, sel.backend, sel.drops, reason, sel.count, sel.duration), nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.hc
	hc.Timeout = 0 // cctx bounds it
	resp, err := hc.Do(req)
	if err != nil {
		if isTimeout(err) {
			return fmt.Errorf("the daemon at %s did not answer within --timeout %v (after the capture's %v)", c.addr, sel.timeout, d)
		}
		return fmt.Errorf("cannot reach the admin API at %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return redirectError(resp)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var ae api.Error
		if json.Unmarshal(raw, &ae) != nil || ae.Error == "" {
			ae.Error = strings.TrimSpace(string(raw))
		}
		return &apiError{resp.StatusCode, printable(ae.Error)}
	}
	var w io.Writer = out.w
	if f != nil {
		// Only a regular file is truncated: /dev/null, /dev/stdout or a
		// FIFO a live Wireshark reads cannot be (EINVAL), nor need be.
		if fi, err := f.Stat(); err != nil {
			return err
		} else if fi.Mode().IsRegular() {
			if err := f.Truncate(0); err != nil {
				return err
			}
			// An existing file keeps its mode through O_CREATE: 0600
			// too, as the README says.
			if err := f.Chmod(0o600); err != nil {
				return err
			}
		}
		file := f
		f = nil // kept from here on, whatever happens
		defer file.Close()
		w = file
	}
	_, err = io.Copy(w, resp.Body)
	// Ctrl-C, whenever it came: ctx's --timeout has long passed in a
	// capture that runs longer than it.
	interrupted := cctx.Err() != nil && tctx.Err() == nil
	if err != nil && !interrupted {
		return fmt.Errorf("capture: %w", err)
	}
	if file, ok := w.(*os.File); ok {
		if err := file.Close(); err != nil {
			return err
		}
	}
	if sel.file != "-" {
		frames, missed := resp.Trailer.Get(api.TrailerCaptureFrames), resp.Trailer.Get(api.TrailerCaptureMissed)
		if out.json {
			return printCaptureJSON(out.w, sel.file, frames, missed)
		}
		if frames == "" {
			frames, missed = "?", "?" // ended early
		}
		fmt.Fprintf(out.w, "%s: %s frames (%s missed: the rings were full)\n", sel.file, frames, missed)
	}
	return nil
}

// printCaptureJSON is capture's summary with --json: the file and the
// daemon's counts, null when the capture ended before its trailers.
func printCaptureJSON(w io.Writer, file, frames, missed string) error {
	count := func(s string) *uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil
		}
		return &n
	}
	b, err := json.MarshalIndent(struct {
		File   string  `json:"file"`
		Frames *uint64 `json:"frames"`
		Missed *uint64 `json:"missed"`
	}{file, count(frames), count(missed)}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// addSaturating is a+b for non-negative durations, the largest duration
// where the sum overflows (--duration 10m --timeout 2562047h).
func addSaturating(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
