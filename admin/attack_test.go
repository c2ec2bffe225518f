package admin_test

// Attacks on the operator endpoints (conns, flush, capture) as a hostile
// client or a careless operator would make them.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestConnsHostileCursors: a forged cursor is refused with 400 or, when
// it is well-formed but past the end, answers an empty last page; never
// a panic or a 500.
func TestConnsHostileCursors(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	e.traffic(5000, 20)
	for _, c := range []struct {
		cursor string
		code   int
	}{
		{"-1.0", 400},
		{"0.-5", 400},
		{"-0.0", 200}, // Atoi("-0") is 0: the start
		{"x", 400},
		{"1", 400},
		{"1.", 400},
		{".1", 400},
		{"1.2.3", 400},
		{"0x1.0", 400},
		{"1.99999999999999999999999", 400},
		{"99999999999999999999999.0", 400},
		{"9223372036854775807.9223372036854775807", 400},
		{"99999.0", 400},
		{"1.0", 400}, // one worker: index 1 is past the end
		{"0.99999999999", 400},
		{"0.9223372036854775807", 400},
		{"0.8192", 400}, // 65536 entries: 8192 buckets
		{"0.8191", 200},
		{"0.0", 200},
		{" 0.0", 400},
	} {
		path := api.ConnsPath + "?cursor=" + strings.ReplaceAll(c.cursor, " ", "%20")
		if c.code != 200 {
			e.fails("GET", path, "", c.code, "cursor")
			continue
		}
		var page api.Conns
		e.get(path, &page)
		if c.cursor == "0.8191" && page.Next != "" {
			t.Errorf("cursor %q at the last bucket: next %q; want the last page", c.cursor, page.Next)
		}
	}
	for _, l := range []string{"0", "-1", "-9223372036854775808", "10001", "99999999999999999999", "1e3", "x", ""} {
		if l == "" {
			var page api.Conns
			e.get(api.ConnsPath+"?limit=", &page)
			continue
		}
		e.fails("GET", api.ConnsPath+"?limit="+l, "", 400, "limit")
	}
	e.fails("GET", api.ConnsQuery("nope", "", 0, ""), "", 404, "nope")
	e.fails("GET", api.ConnsQuery("web", "nope", 0, ""), "", 404, "nope")
	e.fails("GET", api.ConnsQuery("web", "10.9.9.9", 0, ""), "", 404)
	e.fails("GET", api.ConnsQuery("dns", "be1", 0, ""), "", 404) // be1 is web's
}

// TestConnsPagingWhileFlowsChange: flows added and flushed between pages
// are listed at most once per pass, and every flow that lived through
// the whole pass is listed.
func TestConnsPagingWhileFlowsChange(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	e.traffic(10000, 200)
	seen := map[string]int{}
	cursor, pages, sport := "", 0, uint16(20000)
	for {
		var page api.Conns
		e.get(api.ConnsQuery("", "", 16, cursor), &page)
		for _, c := range page.Conns {
			seen[c.Client+">"+c.VIPAddress]++
		}
		pages++
		// Churn: new flows, and a flush of one backend (its flows go and
		// the next packet of some of them would bring them back).
		e.traffic(sport, 5)
		sport += 5
		if pages == 3 {
			var f api.Flush
			e.ok("POST", api.ActionPath("web", "be2", api.ActionFlush), "", &f)
		}
		if page.Next == "" {
			break
		}
		if pages > 1000 {
			t.Fatal("the listing does not end")
		}
		cursor = page.Next
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("flow %s listed %d times in one pass", k, n)
		}
	}
	// Flows of the first batch on be1, be3, be4 were never removed.
	byAddr := map[string]bool{}
	for i := range 200 {
		byAddr[netip.AddrPortFrom(admintest.Client, uint16(10000+i)).String()] = true
	}
	var all []api.Conn
	all, _ = e.listAll("", "", 1000)
	for _, c := range all {
		if byAddr[c.Client] && c.Backend != "be2" && seen[c.Client+">"+c.VIPAddress] != 1 {
			t.Errorf("flow %s (on %s) lived through the pass but was listed %d times", c.Client, c.Backend, seen[c.Client+">"+c.VIPAddress])
		}
	}
}

// TestConnsConcurrentWithFlush: several listings and flushes at once all
// finish (no deadlock: each worker runs one op at a time and the others
// wait their turn), with consistent answers.
func TestConnsConcurrentWithFlush(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	sent := e.traffic(5000, 100)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 6 {
		wg.Go(func() {
			for range 5 {
				req, _ := http.NewRequest("GET", e.base+api.ConnsQuery("", "", 8+i, ""), nil)
				resp, err := e.hc.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("listing: %d", resp.StatusCode)
				}
			}
		})
	}
	flushed := make(chan uint64, 2)
	for _, be := range []string{"be1", "be3"} {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", e.base+api.ActionPath("web", be, api.ActionFlush), nil)
			resp, err := e.hc.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			var f api.Flush
			if resp.StatusCode != 200 {
				errs <- fmt.Sprintf("flush %s: %d", be, resp.StatusCode)
				return
			}
			if err := jsonDecode(resp.Body, &f); err != nil {
				errs <- err.Error()
				return
			}
			flushed <- f.Flushed
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	close(flushed)
	var n uint64
	for f := range flushed {
		n += f
	}
	if n != uint64(sent["be1"]+sent["be3"]) {
		t.Errorf("flushed %d, sent %d to be1 and be3", n, sent["be1"]+sent["be3"])
	}
	if all, _ := e.listAll("", "", 1000); len(all) != 100-int(n) {
		t.Errorf("%d connections left, want %d", len(all), 100-int(n))
	}
	if e.plane.Worker.Capturing() {
		t.Error("a capture is installed")
	}
}

// TestFlushSameBackendNameInTwoVIPs: a flush names a VIP's backend; a
// backend of the same name and address under another VIP keeps its flows.
func TestFlushSameBackendNameInTwoVIPs(t *testing.T) {
	// dns's first backend is "be1" at web's be1 address too.
	cfg := strings.Replace(admintest.Config, "name = \"ns1\"\n  address = \"10.0.2.1\"", "name = \"be1\"\n  address = \"10.0.1.1\"", 1)
	if cfg == admintest.Config {
		t.Fatal("config not rewritten")
	}
	e := start(t, cfg, loopback())
	sent := e.traffic(5000, 40)
	dnsBe1 := 0
	for i := range 40 {
		if r := e.plane.Send(admintest.UDP(t, uint16(7000+i), dnsVIP)); r.Verdict == dataplane.Tx && r.Backend == netip.MustParseAddr("10.0.1.1") {
			dnsBe1++
		}
	}
	if dnsBe1 == 0 || sent["be1"] == 0 {
		t.Fatalf("no flows on dns/be1 (%d) or web/be1 (%d)", dnsBe1, sent["be1"])
	}
	var f api.Flush
	e.ok("POST", api.ActionPath("web", "be1", api.ActionFlush), "", &f)
	if f.Flushed != uint64(sent["be1"]) {
		t.Errorf("flushed %d, web/be1 had %d", f.Flushed, sent["be1"])
	}
	if left, _ := e.listAll("dns", "be1", 1000); len(left) != dnsBe1 {
		t.Errorf("dns/be1 has %d connections after flushing web/be1, want %d", len(left), dnsBe1)
	}
	// By address: 10.0.1.1 is one backend of each VIP, so it resolves.
	e.ok("POST", api.ActionPath("dns", "10.0.1.1", api.ActionFlush), "", &f)
	if f.Flushed != uint64(dnsBe1) || f.VIP != "dns" || f.Backend != "be1" {
		t.Errorf("flush of dns/10.0.1.1: %+v, want %d of dns/be1", f, dnsBe1)
	}
	e.fails("POST", api.ActionPath("nope", "be1", api.ActionFlush), "", 404, "nope")
	e.fails("POST", api.ActionPath("web", "ns2", api.ActionFlush), "", 404, "ns2")
	e.fails("GET", api.ActionPath("web", "be1", api.ActionFlush), "", 405)
}

// TestFlushAndCaptureLogged: the log records of a flush and a capture,
// applied or refused, carry the caller's address and the outcome.
func TestFlushAndCaptureLogged(t *testing.T) {
	var buf syncBuffer
	p := admintest.New(t, admintest.Config)
	e := serveLog(t, p, loopback(), p.File, slog.New(slog.NewJSONHandler(&buf, nil)))
	sent := e.traffic(5000, 10)
	var f api.Flush
	e.ok("POST", api.ActionPath("web", "be1", api.ActionFlush), "", &f)
	e.fails("POST", api.ActionPath("web", "zz", api.ActionFlush), "", 404)
	e.capture(api.CaptureQuery("", "", false, "", 1, 0), func() { e.plane.Send(admintest.UDP(t, 9, dnsVIP)) })
	e.fails("POST", api.CapturePath+"?count=0", "", 400)

	want := []struct {
		path, level string
		status      float64
		extra       map[string]any
	}{
		{api.ActionPath("web", "be1", api.ActionFlush), "INFO", 200, map[string]any{"flushed": float64(sent["be1"])}},
		{api.ActionPath("web", "zz", api.ActionFlush), "WARN", 404, nil},
		{api.CapturePath, "INFO", 200, map[string]any{"frames": float64(1)}},
		{api.CapturePath, "WARN", 400, nil},
	}
	var calls []map[string]any
	for _, r := range buf.records(t) {
		if r["path"] != nil {
			calls = append(calls, r)
		}
	}
	if len(calls) != len(want) {
		t.Fatalf("%d call records, want %d: %v", len(calls), len(want), calls)
	}
	for i, w := range want {
		r := calls[i]
		remote, _ := r["remote"].(string)
		if r["path"] != w.path || r["level"] != w.level || r["status"] != w.status || !strings.HasPrefix(remote, "127.0.0.1:") {
			t.Errorf("record %d: %v; want %s %s %v from 127.0.0.1", i, r, w.level, w.path, w.status)
		}
		for k, v := range w.extra {
			if r[k] != v {
				t.Errorf("record %d: %s = %v, want %v", i, k, r[k], v)
			}
		}
	}
}

// TestCaptureArguments: bad durations, counts and reasons are refused
// with 400 before anything is installed.
func TestCaptureArguments(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	for _, q := range []string{
		"duration=0s", "duration=-1s", "duration=11m", "duration=10000h", "duration=1", "duration=x",
		"duration=9223372036854775807ns0h", "count=0", "count=-1", "count=10000001", "count=99999999999999999999", "count=x",
		"reason=bogus", "reason=%3Cscript%3E", "reason=NO-SERVICE", "drops=maybe",
		"backend=be1", "vip=web&backend=be1&drops=true",
	} {
		e.fails("POST", api.CapturePath+"?"+q, "", 400)
		if e.plane.Worker.Capturing() {
			t.Fatalf("%s: refused, but a capture is installed", q)
		}
	}
	e.fails("POST", api.CapturePath+"?vip=nope", "", 404)
	e.fails("POST", api.CapturePath+"?vip=web&backend=nope", "", 404)
	if e.plane.Worker.Capturing() {
		t.Fatal("a refused capture left its hook installed")
	}
}

// startCapture sends a capture request on a raw connection and reads the
// answer's header; the caller decides whether to read the rest.
func startCapture(t *testing.T, addr, query string, hdr ...string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "POST " + query + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
	for i := 0; i+1 < len(hdr); i += 2 {
		req += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

// TestCaptureOneAtATime: a second capture while one runs is refused with
// 409; once the first ends, the next one is served.
func TestCaptureOneAtATime(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	addr := strings.TrimPrefix(e.base, "http://")
	_, _, resp := startCapture(t, addr, api.CaptureQuery("", "", false, "", 0, 2*time.Second))
	if resp.StatusCode != 200 || !e.plane.Worker.Capturing() {
		t.Fatalf("first capture: %d, installed %v", resp.StatusCode, e.plane.Worker.Capturing())
	}
	e.fails("POST", api.CapturePath, "", 409, "another capture")
	waitFor(t, "the first capture did not end at its duration", 10*time.Second, func() bool { return !e.plane.Worker.Capturing() })
	e.capture(api.CaptureQuery("", "", false, "", 1, 0), func() { e.plane.Send(admintest.UDP(t, 9, dnsVIP)) })
}

// TestCaptureClientGone: a client that hangs up ends the capture and
// detaches the ring from the worker (the hook's pointer is nil again).
func TestCaptureClientGone(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	addr := strings.TrimPrefix(e.base, "http://")
	c, _, resp := startCapture(t, addr, api.CaptureQuery("", "", false, "", 0, 5*time.Minute))
	if resp.StatusCode != 200 || !e.plane.Worker.Capturing() {
		t.Fatalf("capture: %d, installed %v", resp.StatusCode, e.plane.Worker.Capturing())
	}
	e.plane.Send(admintest.UDP(t, 9, dnsVIP))
	c.Close()
	waitFor(t, "the capture outlived its client", 10*time.Second, func() bool { return !e.plane.Worker.Capturing() })
	e.capture(api.CaptureQuery("", "", false, "", 1, 0), func() { e.plane.Send(admintest.UDP(t, 9, dnsVIP)) })
}

// TestCaptureWithBodyRefused: a capture request announcing a body (that
// may never come, and keeps net/http from noticing the client leave) is
// refused before a ring is installed.
func TestCaptureWithBodyRefused(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	addr := strings.TrimPrefix(e.base, "http://")
	for _, hdr := range [][]string{{"Content-Length", "100000"}, {"Transfer-Encoding", "chunked"}} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST "+api.CapturePath+"?duration=5m HTTP/1.1\r\nHost: 127.0.0.1\r\n"+hdr[0]+": "+hdr[1]+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || e.plane.Worker.Capturing() {
			t.Errorf("%s: %d, capturing %v; want 400 and no capture", hdr[0], resp.StatusCode, e.plane.Worker.Capturing())
		}
	}
}

// TestCaptureClientNeverReads: a client that reads nothing does not make
// the worker wait (frames the ring has no room for are missed), and the
// ring is detached at the capture's duration even while the answer's
// writes are blocked (they may take the write grace to fail), and at its
// count.
func TestCaptureClientNeverReads(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	addr := strings.TrimPrefix(e.base, "http://")
	// A 1400-byte frame (the padding follows the UDP datagram): the
	// capture's answer outgrows the sockets' buffers in a few thousand.
	big := append(admintest.UDP(t, 9, dnsVIP), make([]byte, 1400)...)
	for _, q := range []string{
		api.CaptureQuery("", "", false, "", 0, time.Second),
		api.CaptureQuery("", "", false, "", 5, time.Minute),
	} {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST "+q+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
		waitFor(t, q+": the capture did not start", 10*time.Second, e.plane.Worker.Capturing)
		start := time.Now()
		sent := 0
		for e.plane.Worker.Capturing() && sent < 100000 {
			e.plane.Send(big) // returns: the worker never waits for the reader
			sent++
		}
		// Far below the write grace (30 s): the ring went at the duration.
		waitFor(t, q+": the ring stayed installed while the answer's writes were blocked", 10*time.Second,
			func() bool { return !e.plane.Worker.Capturing() })
		t.Logf("%s: %d frames sent, detached after %v", q, sent, time.Since(start))
	}
}

// TestCaptureLongerThanReadTimeout: a capture runs for its duration even
// when that is longer than the server's request read timeout (the
// request is read; the connection's read deadline must not end the
// stream).
func TestCaptureLongerThanReadTimeout(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	srv := admin.New(p.Plane, config.Admin{Listen: "127.0.0.1:0"}, "", nil)
	srv.SetTimeouts(time.Second, time.Second, 2*time.Second, time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	start := time.Now()
	_, br, resp := startCapture(t, ln.Addr().String(), api.CaptureQuery("", "", false, "", 0, 4*time.Second))
	if resp.StatusCode != 200 {
		t.Fatalf("capture: %d", resp.StatusCode)
	}
	go func() {
		for p.Worker.Capturing() {
			p.Send(admintest.UDP(t, 9, dnsVIP))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	body, err := io.ReadAll(resp.Body)
	_ = br
	if err != nil {
		t.Fatalf("reading the capture: %v after %v", err, time.Since(start))
	}
	if el := time.Since(start); el < 4*time.Second {
		t.Errorf("a 4 s capture ended after %v (read timeout 1 s, write timeout 2 s)", el)
	}
	if resp.Trailer.Get(api.TrailerCaptureFrames) == "" {
		t.Errorf("no frames trailer: the capture was cut (%d bytes)", len(body))
	}
	comments := pcapngComments(t, body)
	if len(comments) < 4 {
		t.Errorf("%d frames in a 4 s capture with a frame every 50 ms", len(comments))
	}
}

// TestCaptureOutlivesReload: a reload that removes the captured VIP
// neither breaks the capture nor the reload; the capture ends at its
// duration and detaches.
func TestCaptureOutlivesReload(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	addr := strings.TrimPrefix(e.base, "http://")
	_, _, resp := startCapture(t, addr, api.CaptureQuery("dns", "ns1", false, "", 0, 2*time.Second))
	if resp.StatusCode != 200 {
		t.Fatalf("capture: %d", resp.StatusCode)
	}
	noDNS := admintest.Config[:strings.Index(admintest.Config, "[[vip]]\nname = \"dns\"")]
	if err := writeFile(e.plane.File, noDNS); err != nil {
		t.Fatal(err)
	}
	var rl api.Reload
	e.ok("POST", api.ReloadPath, "", &rl)
	if rl.VIPs != 1 {
		t.Fatalf("reload: %+v", rl)
	}
	e.plane.Send(admintest.UDP(t, 9, dnsVIP))
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pcapngComments(t, body)); n != 0 {
		t.Errorf("%d frames of a removed VIP", n)
	}
	waitFor(t, "the capture did not detach", 10*time.Second, func() bool { return !e.plane.Worker.Capturing() })
}

// TestCaptureTokenRules: with a token, a capture needs it on loopback too
// (frames carry payloads); off loopback every conns, flush and capture
// call needs it.
func TestCaptureTokenRules(t *testing.T) {
	const token = "0123456789abcdef-admin"
	e := start(t, admintest.Config, config.Admin{Listen: "127.0.0.1:0", Token: token})
	e.failsWith("POST", api.CaptureQuery("", "", false, "", 1, time.Second), "", 401, nil)
	e.failsWith("POST", api.ActionPath("web", "be1", api.ActionFlush), "", 401, nil)
	var page api.Conns
	e.get(api.ConnsPath, &page) // reads stay open on loopback
	if e.plane.Worker.Capturing() {
		t.Fatal("an unauthorized capture was installed")
	}

	p := admintest.New(t, admintest.Config)
	srv := admin.New(p.Plane, config.Admin{Listen: "192.0.2.10:9180", Token: token}, "", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	o := &env{t: t, plane: p, srv: srv, base: "http://" + ln.Addr().String(), hc: &http.Client{Timeout: 20 * time.Second}}
	for _, c := range []struct{ method, path string }{
		{"GET", api.ConnsPath},
		{"GET", api.ConnsQuery("web", "be1", 8, "0.0")},
		{"POST", api.ActionPath("web", "be1", api.ActionFlush)},
		{"POST", api.CaptureQuery("", "", false, "", 1, time.Second)},
		{"GET", "/"},
	} {
		o.failsWith(c.method, c.path, "", 401, []string{"Authorization", "Bearer nope-0123456789abcdef"})
		o.failsWith(c.method, c.path, "", 401, nil)
	}
	if p.Worker.Capturing() {
		t.Fatal("an unauthorized capture was installed")
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// TestConnsPagingWhileFlowsExpire: flows that expire in the middle of a
// pass are not listed after they expired, flows added meanwhile at most
// once, and no flow twice.
func TestConnsPagingWhileFlowsExpire(t *testing.T) {
	cfg := strings.Replace(admintest.Config, "capacity = 65536", "capacity = 65536\ntcp_syn = \"1s\"", 1)
	e := start(t, cfg, loopback())
	e.traffic(10000, 100) // batch A: SYNs, idle timeout 1 s
	isA := func(c api.Conn) bool {
		ap, err := netip.ParseAddrPort(c.Client)
		return err == nil && ap.Port() >= 10000 && ap.Port() < 10100
	}
	seen := map[string]int{}
	var page api.Conns
	e.get(api.ConnsQuery("", "", 8, ""), &page)
	for _, c := range page.Conns {
		seen[c.Client]++
	}
	// Every batch A flow expires (flow counts leave expired entries out).
	waitFor(t, "batch A did not expire", 15*time.Second, func() bool {
		for _, v := range e.plane.Status(true).VIPs {
			for _, b := range v.Backends {
				if b.Flows != 0 {
					return false
				}
			}
		}
		return true
	})
	e.traffic(20000, 50) // batch B
	cursor, pages := page.Next, 1
	for cursor != "" {
		page = api.Conns{}
		e.get(api.ConnsQuery("", "", 8, cursor), &page)
		for _, c := range page.Conns {
			seen[c.Client]++
			if isA(c) {
				t.Errorf("flow %s listed after it expired", c.Client)
			}
		}
		if pages++; pages > 10000 {
			t.Fatal("the listing does not end")
		}
		cursor = page.Next
	}
	b := 0
	for k, n := range seen {
		if n > 1 {
			t.Errorf("flow %s listed %d times", k, n)
		}
		if ap, _ := netip.ParseAddrPort(k); ap.Port() >= 20000 {
			b++
		}
	}
	if b > 50 {
		t.Errorf("%d batch B flows listed, 50 sent", b)
	}
}
