package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
)

// TestShowConnsFlush: show lists every VIP and backend in one table with
// flows; conns lists every connection (paged underneath) or a backend's;
// flush drops a backend's and conns then lists none of them.
func TestShowConnsFlush(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	got := sendFlows(t, p, 6000, 30)
	be1 := got[p.Backend(t, "web", "be1")]
	if be1 == 0 {
		t.Fatal("no flow went to be1")
	}

	out := mustRun(t, "--addr", addr, "show")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+2+6 {
		t.Fatalf("show: %d lines, want a header, 2 VIPs, 6 backends:\n%s", len(lines), out)
	}
	web := rowOf(t, out, "web")
	if web[1] != "203.0.113.7:80/tcp" || web[2] != "serving" || web[3] != "30" {
		t.Errorf("show: web row %q", web)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 2 && f[0] == "->" && f[1] == "be1" {
			if f[3] != "ready" || f[4] != "1" || f[6] != strconv.Itoa(be1) {
				t.Errorf("show: be1 row %q, want ready, weight 1, %d flows", f, be1)
			}
		}
	}
	if !strings.Contains(out, "  -> ns2") {
		t.Errorf("show: no ns2 row:\n%s", out)
	}

	out = mustRun(t, "--addr", addr, "conns", "--limit", "1000")
	if n := len(strings.Split(strings.TrimSpace(out), "\n")) - 1; n != 30 {
		t.Errorf("conns: %d rows, want 30:\n%s", n, out)
	}
	out = mustRun(t, "--addr", addr, "conns", "--limit", "10")
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 1+10+1 || !strings.Contains(out, "first 10 shown") {
		t.Errorf("conns --limit 10: %d lines:\n%s", n, out)
	}
	var js api.Conns
	if err := json.Unmarshal([]byte(mustRun(t, "--addr", addr, "--json", "conns", "--backend", "be1")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Conns) != be1 {
		t.Errorf("conns --backend be1: %d, want %d", len(js.Conns), be1)
	}
	for _, c := range js.Conns {
		if c.VIP != "web" || c.Backend != "be1" || c.State != "new" {
			t.Errorf("conns --backend be1: %+v", c)
		}
	}

	out = mustRun(t, "--addr", addr, "flush", "--backend", "10.0.1.1")
	if want := "web/be1: " + strconv.Itoa(be1) + " connections flushed"; !strings.HasPrefix(out, want) {
		t.Errorf("flush: %q, want %q...", out, want)
	}
	out = mustRun(t, "--addr", addr, "conns", "--vip", "web", "--backend", "be1")
	if n := len(strings.Split(strings.TrimSpace(out), "\n")) - 1; n != 0 {
		t.Errorf("conns after flush: %d rows:\n%s", n, out)
	}
	if code, _, errs := ctl("--addr", addr, "flush"); code != exitUsage || !strings.Contains(errs, "--backend") {
		t.Errorf("flush without --backend: exit %d, %q", code, errs)
	}
	if code, _, _ := ctl("--addr", addr, "flush", "--backend", "nope"); code != exitAPI {
		t.Errorf("flush of an unknown backend: exit %d", code)
	}
}
