package main

// fulcrumctl against daemons that answer too much, nonsense or escape
// sequences, and command lines that must fail before a request.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// fakeAPI serves h on loopback, counts its requests and returns its
// host:port.
func fakeAPI(t *testing.T, h http.HandlerFunc) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &n
}

// hasControl reports a control character other than newline and tab.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && r != '\t' && unicode.IsControl(r) })
}

// TestAnswerOverLimitRefused: an answer larger than the limit is an error
// (exit 1, nothing printed), with or without a Content-Length; it was cut
// at the limit, and table --json printed the cut document with exit 0.
// An answer of exactly the limit is read whole.
func TestAnswerOverLimitRefused(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	tb := api.Table{VIP: "web", Size: 300, Digest: "x"}
	for range 300 {
		tb.Slots = append(tb.Slots, "backend-00001")
	}
	body, _ := json.MarshalIndent(tb, "", "  ")
	body = append(body, '\n')
	defer func(l int64) { answerLimit = l }(answerLimit)
	for _, chunked := range []bool{false, true} {
		addr, _ := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if !chunked {
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				w.Write(body)
				return
			}
			for b := body; len(b) > 0; {
				n := min(len(b), 1000)
				w.Write(b[:n])
				w.(http.Flusher).Flush()
				b = b[n:]
			}
		})
		answerLimit = int64(len(body)) - 1
		for _, args := range [][]string{{"--json", "table", "web"}, {"table", "web"}} {
			code, out, errs := ctl(append([]string{"--addr", addr}, args...)...)
			if code != exitAPI || out != "" || !strings.Contains(errs, "limit") {
				t.Errorf("chunked %v: %v of a %d-byte answer, limit %d: exit %d, %d bytes out, %q; want exit 1 naming the limit",
					chunked, args, len(body), answerLimit, code, len(out), strings.TrimSpace(errs))
			}
		}
		answerLimit = int64(len(body))
		if code, out, errs := ctl("--addr", addr, "--json", "table", "web"); code != 0 || out != string(body) {
			t.Errorf("chunked %v: an answer of exactly the limit: exit %d, %d of %d bytes, %s", chunked, code, len(out), len(body), errs)
		}
	}
}

// TestMaxAnswerCoversLargestTable: the limit holds the table of a VIP of
// maglev.MaxSize slots whose backends have names of config.MaxNameLen
// bytes, with a margin; a slot takes its name and 8 bytes, as a real
// daemon's answer shows.
func TestMaxAnswerCoversLargestTable(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	if maxNameLen != config.MaxNameLen {
		t.Errorf("maxNameLen %d, config.MaxNameLen %d", maxNameLen, config.MaxNameLen)
	}
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	raw := mustRun(t, "--addr", addr, "--json", "table", "web")
	var tb api.Table
	if err := json.Unmarshal([]byte(raw), &tb); err != nil || tb.Size == 0 {
		t.Fatalf("table: %v, %d slots", err, tb.Size)
	}
	names := 0
	for _, s := range tb.Slots {
		names += len(s)
	}
	head := len(raw) - names - tb.Size*(maxSlotJSON-maxNameLen)
	if head <= 0 || head > 200 {
		t.Fatalf("a %d-byte answer of %d slots (%d bytes of names): %d bytes besides %d a slot beyond its name",
			len(raw), tb.Size, names, head, maxSlotJSON-maxNameLen)
	}
	largest := head + maglev.MaxSize*maxSlotJSON
	if maxAnswer < largest*5/4 {
		t.Errorf("maxAnswer %d: the table of %d slots named with %d bytes is %d bytes; want a quarter more at least",
			maxAnswer, maglev.MaxSize, config.MaxNameLen, largest)
	}
}

// TestURLAddrRefused: an http(s) --addr without a host, or with a path,
// query, fragment or credentials, exits 2 before any request: "http://"
// alone sent the token to the host "api".
func TestURLAddrRefused(t *testing.T) {
	t.Setenv("FULCRUM_ADDR", "")
	addr, n := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) })
	for _, a := range []string{
		"http://", "https://", "http://:9180", "http://[::1",
		"http://" + addr + "/api", "http://" + addr + "/x/", "http://" + addr + "?q=1", "http://" + addr + "/?",
		"http://" + addr + "#f", "http://" + addr + "#", "http://user:pw@" + addr,
	} {
		code, out, errs := ctl("--addr", a, "--token", "0123456789abcdef-admin", "--timeout", "2s", "status")
		if code != exitUsage || out != "" || !strings.Contains(errs, "--addr") || strings.Contains(errs, "api/v1") {
			t.Errorf("--addr %q: exit %d, %q; want exit 2 naming --addr", a, code, strings.TrimSpace(errs))
		}
	}
	if n.Load() != 0 {
		t.Errorf("%d requests reached the daemon", n.Load())
	}
	p := admintest.New(t, admintest.Config)
	real := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	for _, a := range []string{"http://" + real, "http://" + real + "/"} {
		if code, _, errs := ctl("--addr", a, "vips"); code != 0 {
			t.Errorf("--addr %q: exit %d, %s", a, code, errs)
		}
	}
}

// TestDaemonErrorPrintable: the daemon's error text, JSON or not, reaches
// the terminal with its control characters escaped, from every command
// and from capture.
func TestDaemonErrorPrintable(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	const evil = "\x1b]0;pwned\x07\x1b[2J"
	for _, body := range []string{evil, `{"error": "` + strings.ReplaceAll(strings.ReplaceAll(evil, "\x1b", `\u001b`), "\x07", `\u0007`) + `"}`} {
		addr, _ := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			fmt.Fprint(w, body)
		})
		for _, args := range [][]string{{"status"}, {"table", "web"}, {"drain", "web", "be1"}, {"capture", "-w", "-"}} {
			code, out, errs := ctl(append([]string{"--addr", addr, "--timeout", "5s"}, args...)...)
			if code != exitAPI || hasControl(out+errs) || !strings.Contains(errs, `\x1b]0;pwned\a\x1b[2J`) {
				t.Errorf("%q %v: exit %d, %q; want exit 1 and the text escaped", body, args, code, errs)
			}
		}
	}
}

// TestConnsCursorMustAdvance: a daemon that gives back a cursor it gave
// before (the same one, or two in turn) ends the listing with an error at
// once; conns asked again until --timeout.
func TestConnsCursorMustAdvance(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	for _, cursors := range [][]string{{"0.0"}, {"0.8", "0.16"}} {
		var i atomic.Int64
		addr, n := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(api.Conns{Conns: []api.Conn{}, Next: cursors[int(i.Add(1)-1)%len(cursors)]})
		})
		start := time.Now()
		code, _, errs := ctl("--addr", addr, "--timeout", "2s", "conns")
		if code != exitAPI || !strings.Contains(errs, "cursor") || n.Load() > int64(len(cursors))+1 {
			t.Errorf("cursors %v: exit %d after %v and %d requests: %q; want exit 1 naming the cursor after %d requests",
				cursors, code, time.Since(start), n.Load(), strings.TrimSpace(errs), len(cursors)+1)
		}
	}
	// Cursors that advance page through, empty pages included.
	var i atomic.Int64
	addr, _ := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json") // as the daemon's; fulcrumctl refuses other answers
		k := i.Add(1)
		page := api.Conns{Conns: []api.Conn{}}
		if k < 5 {
			page.Next = fmt.Sprintf("0.%d", 8*k)
		} else {
			page.Conns = append(page.Conns, api.Conn{Client: "198.51.100.1:1000", VIP: "web"})
		}
		json.NewEncoder(w).Encode(page)
	})
	if code, out, errs := ctl("--addr", addr, "conns"); code != 0 || !strings.Contains(out, "198.51.100.1:1000") {
		t.Errorf("advancing cursors: exit %d, %q %s", code, out, errs)
	}
}

// TestNegativeNumbersArePositional: "weight web be1 -1" is refused as a
// weight (exit 2, naming it), not as an unknown flag "-1"; a negative
// number after a flag that takes a value is still that flag's value.
func TestNegativeNumbersArePositional(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_ADDR", "")
	addr, n := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) })
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"weight", "web", "be1", "-1"}, `weight "-1"`},
		{[]string{"weight", "web", "be1", "--", "-1"}, `weight "-1"`},
		{[]string{"--json", "weight", "web", "-5", "--timeout", "5s"}, "usage"},
		{[]string{"weight", "web", "be1", "--json", "-1"}, `weight "-1"`},
		{[]string{"lookup", "1.2.3.4", "5.6.7.8", "-1", "80"}, `SPORT "-1"`},
		{[]string{"conns", "--limit", "-5"}, "--limit -5"},
		{[]string{"--timeout", "-1s", "status"}, "--timeout -1s"},
	} {
		code, _, errs := ctl(append([]string{"--addr", addr}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.err) || strings.Contains(errs, "not defined") {
			t.Errorf("%q: exit %d, %q; want exit 2 mentioning %q", tc.args, code, strings.SplitN(errs, "\n", 2)[0], tc.err)
		}
	}
	if n.Load() != 0 {
		t.Errorf("%d requests reached the daemon", n.Load())
	}
}

// TestParseInterleaved: negative numbers are positional arguments
// wherever they stand, but the value of a flag that takes one; "--" ends
// the flags.
func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args, pos []string
		limit     int
		json      bool
	}{
		{[]string{"weight", "web", "be1", "-1"}, []string{"weight", "web", "be1", "-1"}, 0, false},
		{[]string{"--json", "weight", "-2", "web", "--limit", "-3", "-4"}, []string{"weight", "-2", "web", "-4"}, -3, true},
		{[]string{"--limit=-3", "conns", "-0.5", "--json"}, []string{"conns", "-0.5"}, -3, true},
		{[]string{"--", "--json", "-1"}, []string{"--json", "-1"}, 0, false},
		{[]string{"status", "--json", "--", "--limit", "5"}, []string{"status", "--limit", "5"}, 0, true},
	} {
		fs := newTestFlags()
		pos, err := parseInterleaved(fs.set, tc.args)
		if err != nil || !reflect.DeepEqual(pos, tc.pos) || *fs.limit != tc.limit || *fs.json != tc.json {
			t.Errorf("%q: %q, limit %d, json %v, %v; want %q, %d, %v", tc.args, pos, *fs.limit, *fs.json, err, tc.pos, tc.limit, tc.json)
		}
	}
}

type testFlags struct {
	set   *flag.FlagSet
	limit *int
	json  *bool
}

// newTestFlags is a flag set of the kinds run's has: an int, a bool, a
// duration.
func newTestFlags() testFlags {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("timeout", time.Second, "")
	return testFlags{set: fs, limit: fs.Int("limit", 0, ""), json: fs.Bool("json", false, "")}
}

// TestCaptureTimeoutSaturates: --duration plus --timeout beyond the
// largest duration (2562047h47m16s) saturates; it wrapped to a negative
// deadline and the capture failed at once.
func TestCaptureTimeoutSaturates(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	if got := addSaturating(10*time.Minute, math.MaxInt64-time.Second); got != math.MaxInt64 {
		t.Errorf("addSaturating near the maximum: %v", got)
	}
	if got := addSaturating(time.Minute, time.Second); got != time.Minute+time.Second {
		t.Errorf("addSaturating(1m, 1s): %v", got)
	}
	addr, _ := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.tcpdump.pcapng")
		w.Write([]byte("pcapng"))
	})
	code, out, errs := ctl("--addr", addr, "--timeout", "2562047h47m", "--duration", "10m", "capture", "-w", "-")
	if code != 0 || !bytes.Equal([]byte(out), []byte("pcapng")) {
		t.Errorf("capture with --timeout 2562047h47m: exit %d, %q, %s", code, out, errs)
	}
}
