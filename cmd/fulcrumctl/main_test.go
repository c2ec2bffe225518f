package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
)

var webVIP = netip.MustParseAddrPort("203.0.113.7:80")

// daemon serves the admin API of a real plane on listen and returns the
// --addr that reaches it.
func daemon(t *testing.T, p *admintest.Plane, ac config.Admin) string {
	t.Helper()
	srv := admin.New(p.Plane, ac, p.File, nil)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	if strings.HasPrefix(ac.Listen, "unix:") {
		return ac.Listen
	}
	return ln.Addr().String()
}

// ctl runs fulcrumctl and returns its exit code, stdout and stderr.
func ctl(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := ctl(args...)
	if code != 0 {
		t.Fatalf("fulcrumctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	if errs != "" {
		t.Errorf("fulcrumctl %s wrote to stderr: %s", strings.Join(args, " "), errs)
	}
	return out
}

// rowOf finds the line of a table whose first column is name.
func rowOf(t *testing.T, out, name string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no row %q in\n%s", name, out)
	return nil
}

func sendFlows(t *testing.T, p *admintest.Plane, sport uint16, n int) map[netip.Addr]int {
	got := map[netip.Addr]int{}
	for i := range n {
		got[p.Send(admintest.TCP(t, sport+uint16(i), webVIP, "S")).Backend]++
	}
	return got
}

func TestReadCommands(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_ADDR", "")
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	sent := sendFlows(t, p, 1000, 100)

	out := mustRun(t, "--addr", addr, "backends", "web")
	header := rowOf(t, out, "BACKEND")
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		r := rowOf(t, out, b)
		if len(r) < len(header)-1 { // REASON is empty
			t.Fatalf("row %v is short of %v", r, header)
		}
		addr := p.Backend(t, "web", b)
		if r[col["ADDRESS"]] != addr.String() || r[col["STATE"]] != "ready" || r[col["HEALTH"]] != "unchecked" ||
			r[col["PACKETS"]] != strconv.Itoa(sent[addr]) || r[col["FLOWS"]] != strconv.Itoa(sent[addr]) {
			t.Errorf("row %v; %d flows were sent to %v", r, sent[addr], addr)
		}
	}
	if r := rowOf(t, out, "be4"); r[col["WEIGHT"]] != "2" || r[col["EFFECTIVE"]] != "2" {
		t.Errorf("be4 row %v", r)
	}
	if strings.Contains(out, " \n") {
		t.Errorf("trailing blanks in\n%s", out)
	}
	if r := rowOf(t, mustRun(t, "--addr", addr, "backends", "dns"), "ns1"); r[2] != "panic" || r[3] != "down" {
		t.Errorf("ns1 (down, VIP in panic mode) row %v", r)
	}
	// Aligned: every row's second column starts where the header's does.
	lines := strings.Split(out, "\n")
	at := strings.Index(lines[1], "ADDRESS")
	for _, l := range lines[2:6] {
		if !strings.HasPrefix(l[at:], "10.0.1.") {
			t.Errorf("column ADDRESS not aligned at %d in %q", at, l)
		}
	}

	// Flags may follow the command.
	var v api.VIP
	if err := json.Unmarshal([]byte(mustRun(t, "backends", "web", "--addr", addr, "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Name != "web" || len(v.Backends) != 4 || v.Packets != 100 {
		t.Errorf("--json backends: %+v", v)
	}

	out = mustRun(t, "--addr", addr, "vips")
	if r := rowOf(t, out, "dns"); r[1] != "203.0.113.8:53/udp" || r[6] != "yes" {
		t.Errorf("dns row %v (want panic yes)", r)
	}
	if r := rowOf(t, out, "web"); r[1] != "203.0.113.7:80/tcp" || r[9] != "100" {
		t.Errorf("web row %v", r)
	}

	out = mustRun(t, "--addr", addr, "status")
	if !strings.Contains(out, "PANIC MODE (fail open): dns") || rowOf(t, out, "0")[1] != "100" || rowOf(t, out, "total")[1] != "100" {
		t.Errorf("status:\n%s", out)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(mustRun(t, "--json", "--addr", addr, "status")), &st); err != nil || st.Workers[0].RxPackets != 100 {
		t.Errorf("--json status: %+v %v", st, err)
	}

	// The first flow is pinned: lookup says where, and why.
	first := p.Send(admintest.TCP(t, 1000, webVIP, "A")).Backend
	out = mustRun(t, "--addr", addr, "lookup", admintest.Client.String(), "203.0.113.7", "1000", "80")
	if !strings.Contains(out, "("+first.String()+")") || !strings.Contains(out, "conntrack on worker 0") {
		t.Errorf("lookup of a pinned flow (to %v):\n%s", first, out)
	}
	var l api.Lookup
	json.Unmarshal([]byte(mustRun(t, "--addr", addr, "--json", "lookup", "198.51.100.10", "203.0.113.7", "9999", "80", "tcp")), &l)
	want, _ := p.Lookup(admintest.Client, webVIP.Addr(), 9999, 80, 6)
	if l.Reason != "table" || l.Backend != want.Backend || l.Slot != want.Slot {
		t.Errorf("lookup of a new flow: %+v; plane %+v", l, want)
	}
	if out := mustRun(t, "--addr", addr, "lookup", "198.51.100.10", "203.0.113.7", "1", "80", "udp"); !strings.Contains(out, "not a VIP") {
		t.Errorf("lookup udp to a tcp VIP: %s", out)
	}

	out = mustRun(t, "--addr", addr, "table", "web")
	keys, _ := p.Table("web")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(keys)+1 || !strings.HasPrefix(lines[0], "# vip web: "+strconv.Itoa(len(keys))+" slots") {
		t.Fatalf("table: %d lines for %d slots; first %q", len(lines), len(keys), lines[0])
	}
	if lines[1] != "0\t"+strings.TrimPrefix(keys[0], "web/") {
		t.Errorf("slot 0: %q, plane %q", lines[1], keys[0])
	}
}

func TestWriteCommandsOverUnixSocketWithToken(t *testing.T) {
	t.Setenv("FULCRUM_ADDR", "")
	dir, err := os.MkdirTemp("", "fulcrumctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "unix:" + filepath.Join(dir, "admin.sock"), Token: "tok"})
	sendFlows(t, p, 1000, 50)

	backend := func(name string) api.Backend {
		var v api.VIP
		json.Unmarshal([]byte(mustRun(t, "--addr", addr, "--json", "backends", "web")), &v)
		for _, b := range v.Backends {
			if b.Name == name {
				return b
			}
		}
		t.Fatalf("no backend %s", name)
		return api.Backend{}
	}

	t.Setenv("FULCRUM_TOKEN", "")
	code, _, errs := ctl("--addr", addr, "drain", "web", "be1")
	if code != 1 || !strings.Contains(errs, "401") || !strings.Contains(errs, "FULCRUM_TOKEN") {
		t.Errorf("drain without token: exit %d, %s", code, errs)
	}
	if code, _, _ := ctl("--addr", addr, "--token", "nope", "drain", "web", "be1"); code != 1 || backend("be1").Drained {
		t.Errorf("drain with a wrong token: exit %d", code)
	}

	out := mustRun(t, "--addr", addr, "--token", "tok", "drain", "web", "be1")
	if !strings.Contains(out, "web/be1: drained") || !backend("be1").Drained {
		t.Errorf("drain: %s", out)
	}
	t.Setenv("FULCRUM_TOKEN", "tok")
	mustRun(t, "--addr", addr, "undrain", "web", "be1")
	if backend("be1").Drained {
		t.Error("undrain did not take effect")
	}
	out = mustRun(t, "--addr", addr, "weight", "web", "be2", "5")
	if b := backend("be2"); b.Weight != 5 || !strings.Contains(out, "weight 5") {
		t.Errorf("weight: %s; %+v", out, b)
	}
	var b api.Backend
	json.Unmarshal([]byte(mustRun(t, "--addr", addr, "--json", "weight", "web", "10.0.1.3", "0")), &b)
	if b.Name != "be3" || b.TableShare != 0 {
		t.Errorf("--json weight 0 by address: %+v", b)
	}

	if out := mustRun(t, "--addr", addr, "reload"); !strings.Contains(out, "reloaded "+p.File) {
		t.Errorf("reload: %s", out)
	}
	os.WriteFile(p.File, []byte("[[vip]]\nname = 1\n"), 0o644)
	gen := p.Status(false).Generation
	code, _, errs = ctl("--addr", addr, "reload")
	if code != 1 || !strings.Contains(errs, "rejected") || !strings.Contains(errs, "422") || p.Status(false).Generation != gen {
		t.Errorf("reload of a broken file: exit %d, %s", code, errs)
	}
}

func TestExitCodes(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_ADDR", "")
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	// A port nothing listens on.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()

	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "no command"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"--bogus", "status"}, 2, "bogus"},
		{[]string{"backends"}, 2, "backends VIP"},
		{[]string{"drain", "web"}, 2, "drain VIP BACKEND"},
		{[]string{"status", "extra"}, 2, "usage"},
		{[]string{"--addr", addr, "weight", "web", "be1", "heavy"}, 2, `"heavy"`},
		{[]string{"--addr", addr, "lookup", "x", "203.0.113.7", "1", "80"}, 2, "SRC"},
		{[]string{"--addr", addr, "lookup", "198.51.100.1", "203.0.113.7", "1", "99999"}, 2, "DPORT"},
		{[]string{"--addr", addr, "lookup", "198.51.100.1", "203.0.113.7", "1", "80", "sctp"}, 2, "sctp"},
		{[]string{"--addr", "nonsense", "status"}, 2, "--addr"},
		{[]string{"--addr", "unix:", "status"}, 2, "--addr"},
		{[]string{"--timeout", "0s", "status"}, 2, "timeout"},
		{[]string{"--addr", addr, "backends", "nope"}, 1, `vip "nope": not found (HTTP 404)`},
		{[]string{"--addr", addr, "drain", "web", "be9"}, 1, "be9"},
		{[]string{"--addr", addr, "table", "nope"}, 1, "404"},
		{[]string{"--addr", addr, "weight", "web", "be1", "70000"}, 1, "70000"},
		{[]string{"--addr", addr, "lookup", "2001:db8::1", "203.0.113.7", "1", "80"}, 1, "families"},
		{[]string{"--addr", dead, "status"}, 1, "cannot reach"},
	} {
		code, out, errs := ctl(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.err) {
			t.Errorf("fulcrumctl %q: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, errs, tc.code, tc.err)
		}
		if out != "" {
			t.Errorf("fulcrumctl %q wrote to stdout on error: %q", tc.args, out)
		}
	}
	if code, out, _ := ctl("help"); code != 0 || !strings.Contains(out, "backends VIP") {
		t.Errorf("help: exit %d", code)
	}
	if code, _, _ := ctl("-h"); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	// FULCRUM_ADDR is the default address.
	t.Setenv("FULCRUM_ADDR", addr)
	if code, _, errs := ctl("vips"); code != 0 {
		t.Errorf("vips with FULCRUM_ADDR: exit %d %s", code, errs)
	}
}
