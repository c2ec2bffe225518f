package main

// Operator probes: everyday use and everyday mistakes of fulcrumctl against
// a real admin server (admintest plane), and against stub servers that are
// not Fulcrum or never answer. Asserts on bytes, exit codes and the plane's
// state only.

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/control"
)

const probeToken = "0123456789abcdef-probe"

func probeEnv(t *testing.T) {
	t.Helper()
	t.Setenv("FULCRUM_ADDR", "")
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_CA", "")
}

// probeDaemon is a real plane served on a unix socket with a token; it
// returns the plane and the base args (--addr, --token, --timeout).
func probeDaemon(t *testing.T, toml string) (*admintest.Plane, []string) {
	t.Helper()
	probeEnv(t)
	dir, err := os.MkdirTemp("", "fctlprobe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := admintest.New(t, toml)
	addr := daemon(t, p, config.Admin{Listen: "unix:" + filepath.Join(dir, "a.sock"), Token: probeToken})
	return p, []string{"--addr", addr, "--token", probeToken, "--timeout", "5s"}
}

func probeBE(t *testing.T, p *admintest.Plane, vip, name string) control.BackendStatus {
	t.Helper()
	st := p.Status(false)
	for _, v := range st.VIPs {
		if v.Name != vip {
			continue
		}
		for _, b := range v.Backends {
			if b.Name == name {
				return b
			}
		}
	}
	t.Fatalf("no backend %s/%s", vip, name)
	return control.BackendStatus{}
}

func with(base []string, args ...string) []string {
	return append(append([]string{}, base...), args...)
}

// failClean checks a failing call: the exit code, nothing on stdout (a
// script reading stdout gets nothing), a message on stderr.
func failClean(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errs := ctl(args...)
	if code != want {
		t.Errorf("fulcrumctl %q: exit %d, want %d\nstdout: %q\nstderr: %q", args, code, want, out, errs)
	}
	if out != "" {
		t.Errorf("fulcrumctl %q failed but wrote to stdout: %q", args, out)
	}
	if strings.TrimSpace(errs) == "" {
		t.Errorf("fulcrumctl %q failed with nothing on stderr", args)
	}
	return errs
}

// A name of "", "." or ".." is sent as a path segment; the daemon's mux
// cleans the path and answers 301, and net/http follows it as a GET of
// another path. The operator is told about an object they never named.
func TestProbeDotAndEmptyNamesNameAnotherObject(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config)
	cases := []struct {
		args    []string
		foreign string // a name the operator did not type
	}{
		{[]string{"backends", ""}, "/api/v1/vips/"},
		{[]string{"table", "."}, `"table"`},
		{[]string{"drain", "web", "."}, `"drain"`},
		{[]string{"drain", "web", ""}, `"drain"`},
		{[]string{"undrain", "web", "."}, `"undrain"`},
		{[]string{"weight", "web", ".", "3"}, `"weight"`},
	}
	for _, c := range cases {
		code, out, errs := ctl(with(base, c.args...)...)
		t.Logf("%q -> exit %d stdout %q stderr %q", c.args, code, out, errs)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d (a name that cannot be a path segment is bad usage)", c.args, code, exitUsage)
		}
		if strings.Contains(errs, c.foreign) {
			t.Errorf("%q: the error names %s, which the operator never typed: %q", c.args, c.foreign, errs)
		}
	}
}

// Worse: when the cleaned path lands on something that exists, the POST
// becomes a GET that succeeds, and fulcrumctl reports an action it never
// performed. A backend named "drain" makes "drain web ." print "drained"
// with exit 0 while nothing is drained.
func TestProbeRedirectTurnsDrainIntoARead(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 4096").
		Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`).
		Web(2).
		Backend("drain", "10.0.1.9").
		String()
	p, base := probeDaemon(t, toml)
	code, out, errs := ctl(with(base, "drain", "web", ".")...)
	t.Logf("drain web . -> exit %d stdout %q stderr %q", code, out, errs)
	if code == exitOK && !probeBE(t, p, "web", "drain").Drained {
		t.Errorf(`"drain web ." exited 0 and printed %q, but no backend was drained (the POST was redirected and replayed as a GET)`, out)
	}

	// A stub that redirects a POST: fulcrumctl must not replay it as a
	// GET elsewhere (nor carry the token there).
	var mu sync.Mutex
	var seen []string
	srv := stub(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Method == http.MethodPost {
			http.Redirect(w, r, "/elsewhere", http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"vip":"web","name":"be1","drained":true}`))
	}))
	code, out, errs = ctl("--addr", srv, "--token", "secret-token-xyz", "--timeout", "3s", "drain", "web", "be1")
	mu.Lock()
	t.Logf("stub redirect: exit %d stdout %q stderr %q requests %q", code, out, errs, seen)
	mu.Unlock()
	if code == exitOK {
		t.Errorf("drain answered by a 301 exited 0 printing %q: a redirect was followed as a GET", out)
	}
}

// stub serves h on a loopback port and returns host:port.
func stub(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

func TestProbeWeights(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	for _, w := range []struct {
		arg  string
		want int
	}{{"0", 0}, {"65535", 65535}, {"+7", 7}, {"007", 7}} {
		out := mustRun(t, with(base, "weight", "web", "be1", w.arg)...)
		if got := probeBE(t, p, "web", "be1").Weight; got != w.want {
			t.Errorf("weight %q: plane has %d, want %d (out %q)", w.arg, got, w.want, out)
		}
	}
	before := probeBE(t, p, "web", "be1").Weight
	for _, bad := range []string{"-1", "1e3", "0x10", "10 ", " 10", "", "1.5", "ten", "99999999999999999999", "65536"} {
		errs := failClean(t, exitUsage, with(base, "weight", "web", "be1", bad)...)
		if !strings.Contains(errs, "65535") {
			t.Errorf("weight %q: the message does not give the range: %q", bad, errs)
		}
		if got := probeBE(t, p, "web", "be1").Weight; got != before {
			t.Errorf("weight %q changed the weight to %d", bad, got)
		}
	}
}

func TestProbeDrainUndrainIdempotent(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	o1 := mustRun(t, with(base, "drain", "web", "be2")...)
	o2 := mustRun(t, with(base, "drain", "web", "be2")...)
	if !probeBE(t, p, "web", "be2").Drained {
		t.Fatal("be2 not drained")
	}
	t.Logf("drain twice: %q / %q", o1, o2)
	u1 := mustRun(t, with(base, "undrain", "web", "be3")...) // never drained
	t.Logf("undrain never drained: %q", u1)
	if probeBE(t, p, "web", "be3").Drained {
		t.Error("be3 drained by an undrain")
	}
	mustRun(t, with(base, "undrain", "web", "be2")...)
	mustRun(t, with(base, "undrain", "web", "be2")...)
	if probeBE(t, p, "web", "be2").Drained {
		t.Error("be2 still drained")
	}
	// Drained and then given a weight: the answer says "effective weight
	// 0" and should say why.
	mustRun(t, with(base, "drain", "web", "be1")...)
	w := mustRun(t, with(base, "weight", "web", "be1", "5")...)
	t.Logf("weight of a drained backend: %q", w)
	if !strings.Contains(w, "drain") {
		t.Errorf("weight on a drained backend prints %q: effective weight 0 with no word that it is still drained", w)
	}
}

func TestProbeNamesThatDoNotExist(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	for _, c := range []struct {
		args  []string
		typed string
	}{
		{[]string{"backends", "WEB"}, "WEB"}, {[]string{"backends", "web "}, "web "}, {[]string{"backends", "we/b"}, "we/b"},
		{[]string{"backends", "we%b"}, "we%b"}, {[]string{"backends", "we%2Fb"}, "we%2Fb"}, {[]string{"table", "nope"}, "nope"},
		{[]string{"drain", "web", "BE1"}, "BE1"}, {[]string{"drain", "web", "be1 "}, "be1 "}, {[]string{"drain", "web", "be/1"}, "be/1"},
		{[]string{"drain", "web", "be%1"}, "be%1"}, {[]string{"undrain", "nope", "be1"}, "nope"},
		{[]string{"weight", "web", "nope", "3"}, "nope"},
		{[]string{"drain", "be1", "web"}, "be1"}, // misordered
	} {
		errs := failClean(t, exitAPI, with(base, c.args...)...)
		if !strings.Contains(errs, `"`+c.typed+`"`) {
			t.Errorf("%q: the error does not quote the name typed (%q): %q", c.args, c.typed, errs)
		}
	}
	for _, n := range []string{"be1", "be2", "be3", "be4"} {
		if b := probeBE(t, p, "web", n); b.Drained {
			t.Errorf("%s drained by a failing call", n)
		}
	}
}

func TestProbeUsageMistakes(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config)
	for _, c := range [][]string{
		{}, {"drian", "web", "be1"}, {"status", "extra"}, {"drain", "web"}, {"drain", "web", "be1", "be2"},
		{"weight", "web", "5", "be1"}, {"lookup", "1.2.3.4", "203.0.113.7", "1"},
		{"--jsno", "status"}, {"status", "--timeout"}, {"status", "--timeout", "0s"}, {"status", "--timeout", "fast"},
		{"conns", "--limit", "0"}, {"conns", "--limit", "x"}, {"conns", "web"},
		{"flush"}, {"flush", "--vip", "web"}, {"flush", "be1"},
	} {
		failClean(t, exitUsage, with(base, c...)...)
	}
}

// Flags that mean nothing to a command are silently dropped: "drain web
// be1 --backend be2" drains be1 and says nothing of --backend.
func TestProbeIgnoredFlags(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	code, out, errs := ctl(with(base, "drain", "web", "be1", "--backend", "be2")...)
	t.Logf("drain web be1 --backend be2: exit %d %q %q", code, out, errs)
	if code == exitOK {
		t.Errorf("drain web be1 --backend be2: exit 0 (drained be1=%v be2=%v): a selector the command ignores should be refused",
			probeBE(t, p, "web", "be1").Drained, probeBE(t, p, "web", "be2").Drained)
	}
	code, _, _ = ctl(with(base, "status", "--vip", "nosuch")...)
	if code == exitOK {
		t.Errorf("status --vip nosuch: exit 0; the filter was silently ignored")
	}
}

func TestProbeLookupTuples(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config)
	ok := [][]string{
		{"198.51.100.10", "203.0.113.7", "40000", "80"},
		{"198.51.100.10", "203.0.113.7", "0", "80", "TCP"},
		{"198.51.100.10", "203.0.113.7", "40000", "0", "udp"},
		{"2001:db8::1", "2001:db8::2", "1", "2"},
	}
	for _, a := range ok {
		out := mustRun(t, with(base, append([]string{"lookup"}, a...)...)...)
		if strings.Contains(out, "\x1b") {
			t.Errorf("lookup %q: escape in output", a)
		}
	}
	usage := [][]string{
		{"[2001:db8::1]", "2001:db8::2", "1", "2"},
		{"198.51.100.10", "203.0.113.7:80", "40000", "80"},
		{"198.51.100.10", "203.0.113.7", "70000", "80"},
		{"198.51.100.10", "203.0.113.7", "-1", "80"},
		{"198.51.100.10", "203.0.113.7", "40000", "http"},
		{"198.51.100.10", "203.0.113.7", "40000", "80", "icmp"},
		{"198.51.100.10", "203.0.113.7", "40000", "80", "tcp "},
		{"198.51.100.10", "203.0.113.7", "40000", "80", "tcp", "extra"},
		{"198.51.100.10", "2001:db8::2", "1", "2"}, // mixed families
		{"fe80::1%eth0", "2001:db8::2", "1", "2"},  // zone
	}
	for _, a := range usage {
		code, out, errs := ctl(with(base, append([]string{"lookup"}, a...)...)...)
		if code != exitUsage || out != "" {
			t.Errorf("lookup %q: exit %d stdout %q stderr %q; want exit 2 and nothing on stdout", a, code, out, errs)
		}
	}
}

func TestProbeConnsPaging(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	const n = 30
	sendFlows(t, p, 41000, n)
	rows := func(out string) []string {
		var r []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if !strings.HasPrefix(l, "(") {
				r = append(r, l)
			}
		}
		return r
	}
	out5 := mustRun(t, with(base, "conns", "--limit", "5")...)
	if got := len(rows(out5)); got != 5 || !strings.Contains(out5, "(first 5 shown") {
		t.Errorf("conns --limit 5: %d rows, want 5 and a 'first 5 shown' line:\n%s", got, out5)
	}
	for _, lim := range []string{"1000", "31", "30"} {
		out := mustRun(t, with(base, "conns", "--limit", lim)...)
		r := rows(out)
		seen := map[string]bool{}
		for _, l := range r {
			seen[strings.Fields(l)[0]] = true
		}
		if len(r) != n || len(seen) != n {
			t.Errorf("conns --limit %s: %d rows (%d distinct), want %d", lim, len(r), len(seen), n)
		}
		if strings.Contains(out, "first") {
			t.Errorf("conns --limit %s with exactly %d connections says there are more: %q", lim, n, out[strings.LastIndex(out, "("):])
		}
	}
	for _, lim := range []string{"5", "30", "1000"} {
		code, out, errs := ctl(with(base, "--json", "conns", "--limit", lim)...)
		var c struct {
			Conns []json.RawMessage `json:"conns"`
			Next  string            `json:"next"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &c) != nil {
			t.Errorf("--json conns --limit %s: exit %d, invalid JSON %q %q", lim, code, out, errs)
			continue
		}
		t.Logf("--json conns --limit %s: %d conns next %q", lim, len(c.Conns), c.Next)
	}
	// By backend, alone (resolved) and by address.
	code, out, errs := ctl(with(base, "conns", "--backend", "10.0.1.1")...)
	if code != 0 {
		t.Errorf("conns --backend 10.0.1.1: exit %d %q", code, errs)
	}
	_ = out
	failClean(t, exitAPI, with(base, "conns", "--backend", "nope")...)
	failClean(t, exitAPI, with(base, "conns", "--vip", "nope")...)
}

func TestProbeFlush(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	got := sendFlows(t, p, 42000, 40)
	be1 := got[p.Backend(t, "web", "be1")]
	out := mustRun(t, with(base, "--json", "flush", "--backend", "be1")...)
	var f struct {
		VIP, Backend string
		Flushed      int
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil || f.Flushed != be1 || f.VIP != "web" {
		t.Errorf("flush --backend be1 --json: %q (err %v), want %d flushed of web", out, err, be1)
	}
	out = mustRun(t, with(base, "flush", "--backend", "be1", "--vip", "web")...)
	if !strings.Contains(out, " 0 connections") {
		t.Errorf("second flush: %q, want 0", out)
	}
	failClean(t, exitAPI, with(base, "flush", "--backend", "nope")...)
	failClean(t, exitAPI, with(base, "flush", "--backend", "be1", "--vip", "dns")...)
	failClean(t, exitAPI, with(base, "flush", "--backend", "BE1", "--vip", "web")...)
}

func TestProbeCaptureMistakes(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config)
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep.pcapng")
	os.WriteFile(keep, []byte("precious"), 0o644)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"capture", "--duration", "-1s", "-w", keep}, exitUsage},
		{[]string{"capture", "--duration", "soon", "-w", keep}, exitUsage},
		{[]string{"capture", "--count", "-3", "-w", keep}, exitUsage},
		{[]string{"capture", "--duration", "1s"}, exitUsage},
		{[]string{"capture", "bogus", "-w", keep}, exitUsage},
		{[]string{"capture", "--duration", "1000h", "-w", keep}, exitAPI},
		{[]string{"capture", "--drops", "no-such-reason", "--duration", "1s", "-w", keep}, exitAPI},
		{[]string{"capture", "--vip", "nope", "--duration", "1s", "-w", keep}, exitAPI},
		{[]string{"capture", "--duration", "1s", "-w", filepath.Join(dir, "no", "such", "dir.pcapng")}, exitAPI},
	} {
		code, out, errs := ctl(with(base, c.args...)...)
		if code != c.code || out != "" {
			t.Errorf("%q: exit %d stdout %q stderr %q; want exit %d, stdout empty", c.args, code, out, errs, c.code)
		}
		if b, _ := os.ReadFile(keep); string(b) != "precious" {
			t.Errorf("%q: the existing file was changed to %q", c.args, b)
			os.WriteFile(keep, []byte("precious"), 0o644)
		}
	}
	// --json: stdout must be JSON or nothing.
	code, out, errs := ctl(with(base, "--json", "capture", "--duration", "200ms", "-w", filepath.Join(dir, "c.pcapng"))...)
	if code != 0 {
		t.Fatalf("capture: exit %d %q", code, errs)
	}
	if out != "" && !json.Valid([]byte(out)) {
		t.Errorf("--json capture printed non-JSON on stdout: %q", out)
	}
}

// Every command's --json output is valid JSON; every human output has no
// terminal escape; every refusal leaves stdout empty with exit 1.
func TestProbeJSONAndPipeOutput(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	sendFlows(t, p, 43000, 5)
	cmds := [][]string{
		{"status"}, {"vips"}, {"backends", "web"}, {"backends", "203.0.113.7:80"}, {"drain", "web", "be1"}, {"undrain", "web", "be1"},
		{"weight", "web", "be1", "2"}, {"lookup", "198.51.100.10", "203.0.113.7", "40000", "80"},
		{"table", "dns"}, {"reload"}, {"show"}, {"conns"}, {"flush", "--backend", "be2"},
	}
	for _, c := range cmds {
		for _, js := range []bool{false, true} {
			args := with(base, c...)
			if js {
				args = append(args, "--json")
			}
			code, out, errs := ctl(args...)
			if code != 0 {
				t.Errorf("%q: exit %d %q", args, code, errs)
				continue
			}
			if errs != "" {
				t.Errorf("%q: stderr %q on success", c, errs)
			}
			if strings.ContainsAny(out, "\x1b\r") {
				t.Errorf("%q: escape or CR in output", c)
			}
			if js && !json.Valid([]byte(out)) {
				t.Errorf("%q --json: invalid JSON: %.200q", c, out)
			}
		}
	}
}

func TestProbeTokens(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config)
	addr := base[1]
	errs := failClean(t, exitAPI, "--addr", addr, "drain", "web", "be1")
	if !strings.Contains(errs, "--token") {
		t.Errorf("no token: the hint is missing: %q", errs)
	}
	errs = failClean(t, exitAPI, "--addr", addr, "--token", "wrong", "drain", "web", "be1")
	if !strings.Contains(errs, "401") {
		t.Errorf("wrong token: %q", errs)
	}
	// A token read from a file with its newline (FULCRUM_TOKEN=$(cat f)
	// strips it, other ways do not): the daemon trims spaces, the client
	// cannot send a newline. The message must not blame reachability.
	t.Setenv("FULCRUM_TOKEN", probeToken+"\n")
	code, out, errs := ctl("--addr", addr, "drain", "web", "be1")
	t.Logf("token with newline: exit %d %q %q", code, out, errs)
	if code != 0 && strings.Contains(errs, "cannot reach") {
		t.Errorf("token with a trailing newline: exit %d, the message blames the connection: %q", code, errs)
	}
	t.Setenv("FULCRUM_TOKEN", probeToken+" ")
	if code, _, errs := ctl("--addr", addr, "drain", "web", "be1"); code != 0 {
		t.Errorf("token with a trailing space: exit %d %q", code, errs)
	}
}

func TestProbeAddrAtNothing(t *testing.T) {
	probeEnv(t)
	dir := t.TempDir()
	errs := failClean(t, exitAPI, "--addr", "unix:"+filepath.Join(dir, "none.sock"), "--timeout", "2s", "status")
	if !strings.Contains(errs, "cannot reach") {
		t.Errorf("no socket: %q", errs)
	}
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, nil, 0o644)
	failClean(t, exitAPI, "--addr", "unix:"+regular, "--timeout", "2s", "status")
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	failClean(t, exitAPI, "--addr", closed, "--timeout", "2s", "vips")
	for _, a := range []string{"unix:", "localhost", "http://", "ftp://127.0.0.1:1", "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:http-alt"} {
		code, out, errs := ctl("--addr", a, "--timeout", "2s", "status")
		t.Logf("--addr %q: exit %d %q", a, code, errs)
		if code != exitUsage || out != "" {
			t.Errorf("--addr %q: exit %d stdout %q stderr %q; want 2 (an address that cannot be dialled is bad usage)", a, code, out, errs)
		}
	}
	t.Setenv("FULCRUM_ADDR", "localhost")
	code, _, errs := ctl("status")
	t.Logf("FULCRUM_ADDR=localhost: exit %d %q", code, errs)
	if !strings.Contains(errs, "FULCRUM_ADDR") {
		t.Errorf("FULCRUM_ADDR=localhost: the message blames --addr, which the operator never gave: %q", errs)
	}
}

// A web server that is not Fulcrum answers 200 to everything.
func TestProbeAddrAtAnotherHTTPServer(t *testing.T) {
	probeEnv(t)
	plain := stub(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>It works!</body></html>\n"))
	}))
	empty := stub(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}\n"))
	}))
	for _, c := range [][]string{{"status"}, {"drain", "web", "be1"}, {"table", "web"}} {
		code, out, errs := ctl(with([]string{"--addr", plain, "--timeout", "3s"}, c...)...)
		if code == 0 {
			t.Errorf("%q at an HTML server: exit 0 %q", c, out)
		}
		code, out, errs = ctl(with([]string{"--addr", plain, "--timeout", "3s", "--json"}, c...)...)
		if code == 0 {
			t.Errorf("--json %q at an HTML server: exit 0, stdout %q (stderr %q)", c, out, errs)
		}
		code, out, errs = ctl(with([]string{"--addr", empty, "--timeout", "3s"}, c...)...)
		if code == 0 {
			t.Errorf("%q at a server answering {}: exit 0, stdout %q", c, out)
		}
	}
}

// A daemon that accepts and never answers: fulcrumctl gives up within
// --timeout and says so.
func TestProbeHangingDaemon(t *testing.T) {
	probeEnv(t)
	dir, err := os.MkdirTemp("", "fctlhang")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var conns []net.Conn
	var mu sync.Mutex
	hang := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unix, err := net.Listen("unix", filepath.Join(dir, "h.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go hang(tcp)
	go hang(unix)
	t.Cleanup(func() {
		tcp.Close()
		unix.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	for _, addr := range []string{tcp.Addr().String(), "unix:" + filepath.Join(dir, "h.sock")} {
		for _, c := range [][]string{{"status"}, {"show"}, {"drain", "web", "be1"}, {"conns", "--backend", "be1"},
			{"capture", "--duration", "1s", "-w", filepath.Join(dir, "c.pcapng")}} {
			start := time.Now()
			code, out, errs := ctl(with([]string{"--addr", addr, "--timeout", "1s"}, c...)...)
			el := time.Since(start)
			if code != exitAPI || out != "" {
				t.Errorf("%s %q: exit %d stdout %q", addr, c, code, out)
			}
			if el > 4*time.Second {
				t.Errorf("%s %q: took %v with --timeout 1s", addr, c, el)
			}
			low := strings.ToLower(errs)
			if !strings.Contains(low, "timeout") && !strings.Contains(low, "timed out") && !strings.Contains(low, "deadline") {
				t.Errorf("%s %q: the message does not say it timed out: %q", addr, c, errs)
			}
			// It connected: the daemon did not answer in time. "cannot
			// reach" sends the operator looking at the socket path.
			if strings.Contains(errs, "cannot reach") || !strings.Contains(errs, "--timeout") {
				t.Errorf("%s %q: a daemon that accepts and does not answer is reported as unreachable, without naming --timeout: %q", addr, c, errs)
			}
			t.Logf("%q: %v %q", c, el.Round(time.Millisecond), errs)
		}
	}
}

// The "next" cursor of "--json conns --limit N" is the daemon's cursor
// after the page fetched, not after the N entries printed: resuming from
// it skips the entries fetched and cut.
func TestProbeConnsJSONNextCursorSkips(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	const n = 30
	sendFlows(t, p, 44000, n)
	code, out, errs := ctl(with(base, "--json", "conns", "--limit", "5")...)
	if code != 0 {
		t.Fatalf("exit %d %q", code, errs)
	}
	var first api.Conns
	if err := json.Unmarshal([]byte(out), &first); err != nil {
		t.Fatal(err)
	}
	if first.Next == "" {
		t.Fatalf("no next cursor with %d conns and --limit 5", n)
	}
	c, err := newClient(base[1], probeToken, 5*time.Second, tlsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	total, cursor := len(first.Conns), first.Next
	for i := 0; cursor != "" && i < 100; i++ {
		raw, err := c.do(context.Background(), "GET", api.ConnsQuery("", "", 1000, cursor), nil)
		if err != nil {
			t.Fatal(err)
		}
		var pg api.Conns
		if err := json.Unmarshal(raw, &pg); err != nil {
			t.Fatal(err)
		}
		total += len(pg.Conns)
		cursor = pg.Next
	}
	if total != n {
		t.Errorf("5 from --json conns --limit 5, then the API from its next cursor %q: %d connections in all, want %d (entries skipped)", first.Next, total, n)
	}
}

// A capture refused for want of the token leaves no file behind.
func TestProbeCaptureWithoutTokenLeavesNoFile(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config)
	f := filepath.Join(t.TempDir(), "new.pcapng")
	errs := failClean(t, exitAPI, "--addr", base[1], "capture", "--duration", "1s", "-w", f)
	if _, err := os.Stat(f); err == nil {
		t.Errorf("refused capture left %s behind (%q)", f, errs)
	}
}
