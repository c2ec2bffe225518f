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
	if r := rowOf(t, mustRun(t, "--addr", addr, "backends", "dns"), "ns1"); r[2] != "checking" || r[3] != "unknown" || r[5] != "1" {
		t.Errorf("ns1 (no verdict yet, routed like up) row %v", r)
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
	if r := rowOf(t, out, "dns"); r[1] != "203.0.113.8:53/udp" || r[4] != "2" || r[6] != "no" {
		t.Errorf("dns row %v (want 2 healthy, panic no)", r)
	}
	if r := rowOf(t, out, "web"); r[1] != "203.0.113.7:80/tcp" || r[9] != "100" {
		t.Errorf("web row %v", r)
	}

	out = mustRun(t, "--addr", addr, "status")
	if !strings.Contains(out, "CONVERGING") || !strings.Contains(out, "100 new flows forwarded meanwhile") || strings.Contains(out, "PANIC MODE") ||
		rowOf(t, out, "0")[1] != "100" || rowOf(t, out, "total")[1] != "100" {
		t.Errorf("status:\n%s", out)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(mustRun(t, "--json", "--addr", addr, "status")), &st); err != nil || st.Workers[0].RxPackets != 100 ||
		!st.Converging || st.ConvergingNewFlows != 100 {
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

// TestVerdicts: health verdicts driven through the control plane show in
// the backends, vips and status commands: both dns backends down is panic
// mode; one back up ends it and leaves the other "down" (on_down keep:
// weight 0, flows kept).
func TestVerdicts(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_ADDR", "")
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	p.Verdict(t, "dns", "ns1", false)
	p.Verdict(t, "dns", "ns2", false)

	out := mustRun(t, "--addr", addr, "backends", "dns")
	if !strings.Contains(out, "PANIC MODE (fail open)") {
		t.Errorf("backends dns, both down:\n%s", out)
	}
	for _, ns := range []string{"ns1", "ns2"} {
		if r := rowOf(t, out, ns); r[2] != "panic" || r[3] != "down" || r[5] != "1" {
			t.Errorf("%s (down, VIP in panic mode) row %v", ns, r)
		}
	}
	if r := rowOf(t, mustRun(t, "--addr", addr, "vips"), "dns"); r[4] != "0" || r[6] != "yes" {
		t.Errorf("dns row %v (want 0 healthy, panic yes)", r)
	}
	out = mustRun(t, "--addr", addr, "status")
	if !strings.Contains(out, "PANIC MODE (fail open): dns") || strings.Contains(out, "CONVERGING") {
		t.Errorf("status, both down, converged:\n%s", out)
	}

	p.Verdict(t, "dns", "ns2", true)
	out = mustRun(t, "--addr", addr, "backends", "dns")
	if strings.Contains(out, "PANIC MODE") {
		t.Errorf("backends dns, ns2 up:\n%s", out)
	}
	if r := rowOf(t, out, "ns1"); r[2] != "down" || r[3] != "down" || r[5] != "0" {
		t.Errorf("ns1 (down, keep) row %v", r)
	}
	if r := rowOf(t, out, "ns2"); r[2] != "ready" || r[3] != "up" {
		t.Errorf("ns2 (up) row %v", r)
	}
}

// TestLookupScheduler: a non-Maglev VIP's new flow is answered with the
// scheduler and its candidates; a tracked one with its backend.
func TestLookupScheduler(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_ADDR", "")
	p := admintest.New(t, strings.Replace(admintest.Config, "port = 80\n", "port = 80\nscheduler = \"least-conn\"\n", 1))
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	out := mustRun(t, "--addr", addr, "lookup", admintest.Client.String(), "203.0.113.7", "5000", "80")
	if !strings.Contains(out, "vip web (scheduler least-conn)") ||
		!strings.Contains(out, "new flow: chosen by least-conn among: be1 (w 1, 0 flows), be2 (w 1, 0 flows), be3 (w 1, 0 flows), be4 (w 2, 0 flows)\n") {
		t.Errorf("lookup of a new least-conn flow:\n%s", out)
	}
	to := p.Send(admintest.TCP(t, 5000, webVIP, "S")).Backend
	out = mustRun(t, "--addr", addr, "lookup", admintest.Client.String(), "203.0.113.7", "5000", "80")
	if !strings.Contains(out, "("+to.String()+")") || !strings.Contains(out, "conntrack on worker 0") || strings.Contains(out, "chosen by") {
		t.Errorf("lookup of a tracked least-conn flow (to %v):\n%s", to, out)
	}
}

// TestState covers every state the backends command shows, in priority.
func TestState(t *testing.T) {
	for _, tc := range []struct {
		want string
		b    api.Backend
	}{
		{"ready", api.Backend{Health: "up", EffectiveWeight: 1}},
		{"ready", api.Backend{Health: "unchecked", EffectiveWeight: 2}},
		{"checking", api.Backend{Health: "unknown", EffectiveWeight: 1}},
		{"slowstart", api.Backend{Health: "up", EffectiveWeight: 0.5, SlowStart: true}},
		{"weight-0", api.Backend{Health: "up", Weight: 0}},
		{"weight-0", api.Backend{Health: "unknown", Weight: 0}},
		{"drain", api.Backend{Health: "up", Drained: true}},
		{"drain", api.Backend{Health: "down", Drained: true, Down: true}},
		// on_down keep: weight 0, Down false.
		{"down", api.Backend{Health: "down", Weight: 1}},
		{"ejected", api.Backend{Health: "up", Weight: 1, Outlier: true}},
		{"ejected", api.Backend{Health: "down", Weight: 1, Outlier: true}},
		// on_down move: Down too.
		{"down", api.Backend{Health: "down", Weight: 1, Down: true}},
		{"ejected", api.Backend{Health: "up", Weight: 1, Outlier: true, Down: true}},
		// Panic mode: failing, but in the table.
		{"panic", api.Backend{Health: "down", Weight: 1, EffectiveWeight: 1}},
		{"panic", api.Backend{Health: "up", Weight: 1, EffectiveWeight: 1, Outlier: true}},
	} {
		if got := state(&tc.b); got != tc.want {
			t.Errorf("state(%+v) = %q, want %q", tc.b, got, tc.want)
		}
	}
}

// TestPrintLookup covers the lookup answers' wording, byte for byte.
func TestPrintLookup(t *testing.T) {
	base := api.Lookup{Src: "198.51.100.10", Dst: "203.0.113.7", Sport: 1000, Dport: 80, Proto: "tcp", VIP: "web", Worker: -1, Slot: -1, Hash: "00ff"}
	cands := []api.Candidate{
		{Backend: "be1", Address: "10.0.1.1", Weight: 1, Active: 3, LatencyUs: 1234},
		{Backend: "be2", Address: "10.0.1.2", Weight: 1.5, Active: 12},
		{Backend: "be3", Address: "10.0.1.3", Weight: 0, Active: 7, LatencyUs: 80},
	}
	const head = "198.51.100.10:1000 -> 203.0.113.7:80 tcp: "
	for _, tc := range []struct {
		name string
		edit func(l *api.Lookup)
		want string
	}{
		{"p2c new flow", func(l *api.Lookup) {
			l.Reason, l.Scheduler, l.Candidates = "scheduler", "p2c", cands
			l.Untracked = &api.LookupSlot{Slot: 17, Backend: "be1", Address: "10.0.1.1"}
		},
			head + "vip web (scheduler p2c)\n" +
				"  new flow: chosen by p2c among: be1 (w 1, 3 flows, 1.2 ms), be2 (w 1.5, 12 flows), be3 (w 0, 7 flows, 0.1 ms, not eligible)\n" +
				"  a segment no worker tracks (not a SYN): table slot 17 -> backend be1 (10.0.1.1)\n" +
				"  flow hash 00ff\n"},
		{"p2c stale pin", func(l *api.Lookup) {
			l.Reason, l.Scheduler, l.Candidates, l.Worker = "conntrack-stale", "peak-ewma", cands[:1], 1
		},
			head + "vip web (scheduler peak-ewma)\n" +
				"  pinned on worker 1 to a backend that is gone: the next packet, SYN or not, is placed again by the scheduler\n" +
				"  new flow: chosen by peak-ewma among: be1 (w 1, 3 flows, 1.2 ms)\n" +
				"  flow hash 00ff\n"},
		{"p2c tracked", func(l *api.Lookup) {
			l.Reason, l.Scheduler, l.Backend, l.Address, l.Worker, l.State, l.IdleMs = "conntrack", "p2c", "be2", "10.0.1.2", 0, "established", 7
		},
			head + "vip web -> backend be2 (10.0.1.2)\n" +
				"  pinned in conntrack on worker 0: state established, idle 7 ms\n" +
				"  flow hash 00ff\n"},
		{"maglev new flow", func(l *api.Lookup) {
			l.Reason, l.Scheduler, l.Backend, l.Address, l.Slot = "table", "maglev", "be1", "10.0.1.1", 42
		},
			head + "vip web -> backend be1 (10.0.1.1)\n" +
				"  new flow: Maglev table slot 42\n" +
				"  flow hash 00ff\n"},
		{"maglev 3-tuple", func(l *api.Lookup) {
			l.Reason, l.Scheduler, l.Backend, l.Address, l.Slot, l.HashFields = "table", "maglev", "be1", "10.0.1.1", 42, "3-tuple"
		},
			head + "vip web -> backend be1 (10.0.1.1)\n" +
				"  new flow: Maglev table slot 42\n" +
				"  flow hash 00ff (of the 3-tuple)\n"},
		{"maglev 5-tuple says nothing more", func(l *api.Lookup) {
			l.Reason, l.Scheduler, l.Backend, l.Address, l.Slot, l.HashFields = "table", "maglev", "be1", "10.0.1.1", 42, "5-tuple"
		},
			head + "vip web -> backend be1 (10.0.1.1)\n" +
				"  new flow: Maglev table slot 42\n" +
				"  flow hash 00ff\n"},
	} {
		l := base
		tc.edit(&l)
		var b bytes.Buffer
		printLookup(&b, &l)
		if b.String() != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, b.String(), tc.want)
		}
	}
}

// TestPrintStatusConverging: the header says when the instance converges.
func TestPrintStatusConverging(t *testing.T) {
	for _, tc := range []struct {
		st   api.Status
		want bool
	}{
		{api.Status{Converging: true, ConvergingNewFlows: 17}, true},
		{api.Status{Converging: false, ConvergingNewFlows: 17}, false},
	} {
		var b bytes.Buffer
		printStatus(&b, &tc.st)
		line := "CONVERGING: health checks have not all given a first verdict; nothing announced; 17 new flows forwarded meanwhile\n"
		if got := strings.Contains(b.String(), line); got != tc.want {
			t.Errorf("converging %v: line shown %v:\n%s", tc.st.Converging, got, b.String())
		}
	}
}

// TestPrintStatusHealthChecks: the header gives the health checks a round
// (shared checks counted once), which the API gives as health_probes.
func TestPrintStatusHealthChecks(t *testing.T) {
	var b bytes.Buffer
	printStatus(&b, &api.Status{VIPs: 4096, HealthProbes: 16})
	first, _, _ := strings.Cut(b.String(), "\n")
	if !strings.HasSuffix(first, "vips 4096  health checks 16") {
		t.Errorf("first line %q does not end with the VIPs and the health checks a round", first)
	}
}

// TestPrintFlowsIncomplete: the backends, VIPs and show listings and the
// drain's answer say when a worker's flows are missing from the counts
// (a drain-wait must not stop at 0 then), and nothing when none are.
func TestPrintFlowsIncomplete(t *testing.T) {
	const line = "FLOWS INCOMPLETE: workers [1]"
	for _, missing := range [][]int{nil, {1}} {
		v := api.VIP{Name: "web", FlowsMissingWorkers: missing,
			Backends: []api.Backend{{Name: "be1", FlowsMissingWorkers: missing}}}
		vips := []api.VIP{v}
		for name, print := range map[string]func(*bytes.Buffer){
			"backends": func(b *bytes.Buffer) { printBackends(b, &v) },
			"vips":     func(b *bytes.Buffer) { printVIPs(b, &vips) },
			"show":     func(b *bytes.Buffer) { printShow(b, &vips) },
			"drain":    func(b *bytes.Buffer) { printAction(b, api.ActionDrain, &v.Backends[0]) },
		} {
			var b bytes.Buffer
			print(&b)
			if got := strings.Contains(b.String(), line); got != (missing != nil) {
				t.Errorf("%s with workers %v missing: line shown %v:\n%s", name, missing, got, b.String())
			}
		}
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
		// Refused by fulcrumctl before a request, as bad usage.
		{[]string{"--addr", addr, "weight", "web", "be1", "70000"}, 2, "70000"},
		{[]string{"--addr", addr, "lookup", "2001:db8::1", "203.0.113.7", "1", "80"}, 2, "families"},
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
