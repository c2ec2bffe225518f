package admin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

var (
	webVIP = netip.MustParseAddrPort("203.0.113.7:80")
	dnsVIP = netip.MustParseAddrPort("203.0.113.8:53")
)

// env is a running plane with its admin API on a real listener.
type env struct {
	t     *testing.T
	plane *admintest.Plane
	srv   *admin.Server
	base  string // http://host:port, or http://localhost for a unix socket
	hc    *http.Client
}

// start serves the admin API of a fresh plane on listen ("127.0.0.1:0" or
// "unix:" + a path) through admin.Server.Listen and Serve.
func start(t *testing.T, toml string, ac config.Admin) *env {
	t.Helper()
	p := admintest.New(t, toml)
	return serve(t, p, ac, p.File)
}

func serve(t *testing.T, p *admintest.Plane, ac config.Admin, reloadPath string, setup ...func(*admin.Server)) *env {
	t.Helper()
	return serveLog(t, p, ac, reloadPath, slog.New(slog.DiscardHandler), setup...)
}

func serveLog(t *testing.T, p *admintest.Plane, ac config.Admin, reloadPath string, log *slog.Logger, setup ...func(*admin.Server)) *env {
	t.Helper()
	srv := admin.New(p.Plane, ac, reloadPath, log)
	for _, f := range setup {
		f(srv)
	}
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	e := &env{t: t, plane: p, srv: srv, hc: &http.Client{Timeout: 20 * time.Second}}
	if path, ok := strings.CutPrefix(ac.Listen, "unix:"); ok {
		e.base = "http://localhost"
		e.hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}
	} else {
		e.base = "http://" + ln.Addr().String()
	}
	return e
}

func loopback() config.Admin { return config.Admin{Listen: "127.0.0.1:0"} }

// call makes a request and returns the status and body; hdr holds extra
// headers ("Authorization", ...).
func (e *env) call(method, path string, body string, hdr ...string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); path != api.MetricsPath && ct != "application/json" {
		e.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, b
}

// get decodes a 200 answer into out.
func (e *env) get(path string, out any) {
	e.t.Helper()
	e.ok(http.MethodGet, path, "", out)
}

func (e *env) ok(method, path, body string, out any, hdr ...string) {
	e.t.Helper()
	code, b := e.call(method, path, body, hdr...)
	if code != http.StatusOK {
		e.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
	}
}

// fails checks a JSON error answer: its status and words of its message.
func (e *env) fails(method, path, body string, code int, words ...string) {
	e.t.Helper()
	e.failsWith(method, path, body, code, nil, words...)
}

func (e *env) failsWith(method, path, body string, code int, hdr []string, words ...string) {
	e.t.Helper()
	got, b := e.call(method, path, body, hdr...)
	var ae api.Error
	if err := json.Unmarshal(b, &ae); err != nil || ae.Error == "" {
		e.t.Errorf("%s %s: body %q is not a JSON error (%v)", method, path, b, err)
	}
	if got != code {
		e.t.Errorf("%s %s: status %d (%s), want %d", method, path, got, ae.Error, code)
	}
	for _, w := range words {
		if !strings.Contains(ae.Error, w) {
			e.t.Errorf("%s %s: error %q does not mention %q", method, path, ae.Error, w)
		}
	}
}

// traffic sends n new TCP flows to web (source ports from sport) and
// returns how many went to each backend name, as the frames' outer
// destination says.
func (e *env) traffic(sport uint16, n int) map[string]int {
	e.t.Helper()
	byAddr := map[netip.Addr]string{}
	for _, v := range e.plane.Config().VIPs {
		for _, b := range v.Backends {
			byAddr[b.Address.Addr] = b.Name
		}
	}
	got := map[string]int{}
	for i := range n {
		r := e.plane.Send(admintest.TCP(e.t, sport+uint16(i), webVIP, "S"))
		if r.Verdict != dataplane.Tx {
			e.t.Fatalf("flow %d: verdict %v", i, r.Verdict)
		}
		got[byAddr[r.Backend]]++
	}
	return got
}

func (e *env) backend(vip, name string) control.BackendStatus {
	e.t.Helper()
	for _, v := range e.plane.Status(true).VIPs {
		for _, b := range v.Backends {
			if v.Name == vip && b.Name == name {
				return b
			}
		}
	}
	e.t.Fatalf("no backend %s/%s", vip, name)
	return control.BackendStatus{}
}

func findBackend(t *testing.T, v api.VIP, name string) api.Backend {
	t.Helper()
	for _, b := range v.Backends {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("vip %s has no backend %s", v.Name, name)
	return api.Backend{}
}

func TestStatusVIPsAndBackends(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	const n = 300
	sent := e.traffic(1000, n)
	for i := range 5 {
		if r := e.plane.Send(admintest.UDP(t, uint16(5000+i), dnsVIP)); r.Verdict != dataplane.Tx {
			t.Fatalf("udp %d: verdict %v", i, r.Verdict)
		}
	}
	// To a VIP address, but a port no VIP serves: a counted drop.
	if r := e.plane.Send(admintest.TCP(t, 9, netip.AddrPortFrom(webVIP.Addr(), 81), "S")); r.Verdict != dataplane.Drop {
		t.Fatalf("port 81: verdict %v", r.Verdict)
	}

	var st api.Status
	e.get(api.StatusPath, &st)
	want := e.plane.Status(false)
	if st.Generation != want.Generation || st.Rebuilds != want.Rebuilds || st.VIPs != 2 || st.ConfigFile != e.plane.File {
		t.Errorf("status %+v; plane generation %d rebuilds %d", st, want.Generation, want.Rebuilds)
	}
	// dns's checks have given no verdict: the instance is converging, and
	// every new flow so far was forwarded while converging.
	if len(st.PanicVIPs) != 0 || !st.Converging || st.ConvergingNewFlows != n+5 {
		t.Errorf("panic VIPs %v, converging %v with %d new flows; want none, true, %d", st.PanicVIPs, st.Converging, st.ConvergingNewFlows, n+5)
	}
	if len(st.Workers) != 1 {
		t.Fatalf("%d workers", len(st.Workers))
	}
	w := st.Workers[0]
	const pkts = n + 5 + 1
	if w.Worker != 0 || w.RxPackets != pkts || w.Forwarded != n+5 || w.TxPackets != n+5 || w.Dropped != 1 ||
		w.Drops["no-service"] != 1 || len(w.Drops) != 1 || w.Conntrack.Flows != n+5 || w.Conntrack.Misses != n+5 {
		t.Errorf("worker 0: %+v", w)
	}
	if _, ok := w.Conntrack.Evictions["established"]; !ok {
		t.Errorf("evictions by state %v lack established", w.Conntrack.Evictions)
	}
	if st.Total.Worker != -1 || st.Total.RxPackets != w.RxPackets || st.Total.Drops["no-service"] != 1 {
		t.Errorf("total %+v", st.Total)
	}

	var vips []api.VIP
	e.get(api.VIPsPath, &vips)
	if len(vips) != 2 || vips[0].Name != "dns" || vips[1].Name != "web" {
		t.Fatalf("vips %+v", vips)
	}
	dns, web := vips[0], vips[1]
	if dns.Panic || dns.Healthy != 2 || dns.Usable != 2 || dns.BackendCount != 2 || dns.Protocol != "udp" || dns.Packets != 5 || dns.NewFlows != 5 || dns.ActiveFlows != 5 {
		t.Errorf("dns %+v", dns)
	}
	if web.Panic || web.Healthy != 4 || web.Usable != 4 || web.Packets != n || web.NewFlows != n || web.ActiveFlows != n ||
		web.Address != "203.0.113.7" || web.Port != 80 || web.Backends != nil {
		t.Errorf("web %+v", web)
	}

	var detail api.VIP
	e.get(api.VIPPath("web"), &detail)
	ps := e.plane.Status(true)
	var slots int
	var share float64
	for _, b := range detail.Backends {
		want := e.backend("web", b.Name)
		if b.Packets != uint64(sent[b.Name]) || b.ActiveFlows != uint64(sent[b.Name]) || b.NewFlows != uint64(sent[b.Name]) {
			t.Errorf("%s: packets %d flows %d new %d; %d were sent to it", b.Name, b.Packets, b.ActiveFlows, b.NewFlows, sent[b.Name])
		}
		if b.TableSlots != want.Slots || b.TableShare != want.Share || b.Health != "unchecked" || b.Drained ||
			float64(b.Weight) != b.EffectiveWeight || b.Address != want.Address || b.ID != want.ID {
			t.Errorf("%s: %+v; plane %+v", b.Name, b, want)
		}
		slots += b.TableSlots
		share += b.TableShare
	}
	if len(detail.Backends) != 4 || slots != detail.TableSize || math.Abs(share-1) > 1e-9 || detail.TableSize != ps.VIPs[1].TableSize {
		t.Errorf("web: %d backends, %d slots, share %v, table size %d", len(detail.Backends), slots, share, detail.TableSize)
	}
	// be4 has twice the weight of the others: 2/5 of the table, roughly.
	if s := findBackend(t, detail, "be4").TableShare; s < 0.35 || s > 0.45 {
		t.Errorf("be4 (weight 2 of 5) has table share %v", s)
	}
	ns1 := findBackend(t, func() api.VIP { var v api.VIP; e.get(api.VIPPath("dns"), &v); return v }(), "ns1")
	if ns1.Health != "unknown" || ns1.Reason != "not checked yet" || ns1.EffectiveWeight != 1 || ns1.Down || ns1.TableSlots == 0 {
		t.Errorf("ns1 (checked, no verdict yet: routed like up) %+v", ns1)
	}

	// A VIP may be named by address:port or by address; a backend by address.
	var byAddr api.VIP
	e.get(api.VIPPath("203.0.113.7:80"), &byAddr)
	if byAddr.Name != "web" {
		t.Errorf("vip 203.0.113.7:80 resolved to %q", byAddr.Name)
	}
	e.get(api.VIPPath("203.0.113.8"), &byAddr)
	if byAddr.Name != "dns" {
		t.Errorf("vip 203.0.113.8 resolved to %q", byAddr.Name)
	}
	var be api.Backend
	e.get(api.BackendPath("web", "10.0.1.2"), &be)
	if be.Name != "be2" || be.Packets != uint64(sent["be2"]) {
		t.Errorf("backend 10.0.1.2: %+v", be)
	}
	e.fails("GET", api.VIPPath("nope"), "", 404, `"nope"`, "not found")
	e.fails("GET", api.VIPPath("203.0.113.7:81"), "", 404, "203.0.113.7:81")
	e.fails("GET", api.BackendPath("web", "be9"), "", 404, "be9")
	e.fails("GET", api.BackendPath("nope", "be1"), "", 404, "nope")
}

// TestVerdictsPanicAndDown drives health verdicts through the control
// plane: both dns backends down put the VIP in panic mode (fail open, both
// still take new flows); one back up ends it, and the other, down under
// on_down = "keep", gets weight 0 but keeps its flows (Down stays false).
func TestVerdictsPanicAndDown(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	for i := range 4 {
		if r := e.plane.Send(admintest.UDP(t, uint16(5000+i), dnsVIP)); r.Verdict != dataplane.Tx {
			t.Fatalf("udp %d: verdict %v", i, r.Verdict)
		}
	}
	dns := func() api.VIP {
		t.Helper()
		var v api.VIP
		e.get(api.VIPPath("dns"), &v)
		return v
	}
	status := func() api.Status {
		t.Helper()
		var st api.Status
		e.get(api.StatusPath, &st)
		return st
	}
	if st := status(); !st.Converging || len(st.PanicVIPs) != 0 {
		t.Fatalf("before any verdict: converging %v, panic %v", st.Converging, st.PanicVIPs)
	}

	e.plane.Verdict(t, "dns", "ns1", false)
	if st := status(); !st.Converging {
		t.Error("converged with ns2 still waiting for its first verdict")
	}
	e.plane.Verdict(t, "dns", "ns2", false)
	st := status()
	if st.Converging || !slices.Equal(st.PanicVIPs, []string{"dns"}) {
		t.Errorf("both down: converging %v, panic VIPs %v; want false, [dns]", st.Converging, st.PanicVIPs)
	}
	v := dns()
	if !v.Panic || v.Healthy != 0 || v.Usable != 2 || !v.Serving {
		t.Errorf("dns, both down: %+v; want panic, 0 healthy, 2 usable", v)
	}
	for _, name := range []string{"ns1", "ns2"} {
		if b := findBackend(t, v, name); b.Health != "down" || b.Reason != "test: check failed" || b.EffectiveWeight != 1 || b.Down || b.TableSlots == 0 {
			t.Errorf("%s (down, used by panic mode) %+v", name, b)
		}
	}
	if r := e.plane.Send(admintest.UDP(t, 6000, dnsVIP)); r.Verdict != dataplane.Tx {
		t.Errorf("new flow to dns in panic mode: verdict %v, want forwarded", r.Verdict)
	}

	e.plane.Verdict(t, "dns", "ns2", true)
	v = dns()
	if st := status(); len(st.PanicVIPs) != 0 || v.Panic || v.Healthy != 1 || v.Usable != 1 {
		t.Errorf("ns2 up: panic VIPs %v; dns %+v; want no panic, 1 healthy, 1 usable", st.PanicVIPs, v)
	}
	ns1, ns2 := findBackend(t, v, "ns1"), findBackend(t, v, "ns2")
	// ns1 took new flows in panic mode: they stay with it (on_down keep).
	if ns1.Health != "down" || ns1.EffectiveWeight != 0 || ns1.TableSlots != 0 || ns1.Down || ns1.ActiveFlows == 0 {
		t.Errorf("ns1 (down, keep) %+v; want weight 0, no slots, not Down, its flows kept", ns1)
	}
	if ns2.Health != "up" || ns2.EffectiveWeight != 1 || ns2.TableShare != 1 {
		t.Errorf("ns2 (up) %+v", ns2)
	}
}

func TestDrainUndrainWeightOverUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "fulcrum-admin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "admin.sock")
	e := start(t, admintest.Config, config.Admin{Listen: "unix:" + sock})
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket %v: %v", fi, err)
	}
	sent := e.traffic(1000, 200)
	if sent["be1"] == 0 {
		t.Fatal("no flow on be1")
	}

	var b api.Backend
	e.ok("POST", api.ActionPath("web", "be1", api.ActionDrain), "", &b)
	if !b.Drained || b.TableShare != 0 || b.TableSlots != 0 || b.EffectiveWeight != 0 || b.ActiveFlows != uint64(sent["be1"]) {
		t.Errorf("after drain: %+v; want drained, no slots, %d flows kept", b, sent["be1"])
	}
	if ps := e.backend("web", "be1"); !ps.Drained || ps.Slots != 0 {
		t.Errorf("plane after drain: %+v", ps)
	}
	if got := e.traffic(20000, 200); got["be1"] != 0 {
		t.Errorf("%d new flows went to drained be1", got["be1"])
	}
	// Draining twice is fine (idempotent), by address too.
	e.ok("POST", api.ActionPath("web", "10.0.1.1", api.ActionDrain), "", &b)

	e.ok("POST", api.ActionPath("web", "be1", api.ActionUndrain), "", &b)
	if b.Drained || b.TableShare == 0 || e.backend("web", "be1").Drained {
		t.Errorf("after undrain: %+v", b)
	}

	e.ok("POST", api.ActionPath("web", "be2", api.ActionWeight), `{"weight": 3}`, &b)
	if b.Weight != 3 || b.EffectiveWeight != 3 || e.backend("web", "be2").Weight != 3 {
		t.Errorf("after weight 3: %+v", b)
	}
	e.ok("POST", api.ActionPath("web", "be2", api.ActionWeight)+"?weight=0", "", &b)
	if b.Weight != 0 || b.EffectiveWeight != 0 || b.TableSlots != 0 {
		t.Errorf("after weight 0: %+v", b)
	}

	wpath := api.ActionPath("web", "be2", api.ActionWeight)
	for _, tc := range []struct{ query, body, word string }{
		{"", "", "missing"},
		{"", `{"weight": -1}`, "-1"},
		{"", `{"weight": 65536}`, "65536"},
		{"", `{"weight": 1.5}`, "body"},
		{"", `{"weight": "2"}`, "body"},
		{"", `{"wieght": 2}`, "wieght"},
		{"", `{}`, "missing"},
		{"", `{"weight": 1} {"weight": 2}`, "trailing"},
		{"", `[`, "body"},
		{"", strings.Repeat(" ", 5000) + `{"weight":1}`, "larger"},
		{"?weight=abc", "", `"abc"`},
		{"?weight=", "", "weight"},
		{"?weight=2", `{"weight": 2}`, "not both"},
		{"?weight=1&weight=70000", "", "once"}, // not the first of two
		{"?weight=70000&weight=1", "", "once"},
	} {
		e.fails("POST", wpath+tc.query, tc.body, 400, tc.word)
	}
	if ps := e.backend("web", "be2"); ps.Weight != 0 {
		t.Errorf("bad weight requests changed be2: %+v", ps)
	}

	e.fails("POST", api.ActionPath("web", "be9", api.ActionDrain), "", 404, "be9")
	e.fails("POST", api.ActionPath("nope", "be1", api.ActionDrain), "", 404, "nope")
	e.fails("POST", api.ActionPath("web", "be1", "explode"), "", 404, "explode")
	e.fails("GET", api.ActionPath("web", "be1", api.ActionDrain), "", 405, "POST")
	if code, _ := e.call("PUT", api.ReloadPath, ""); code != 405 {
		t.Errorf("PUT reload: %d", code)
	}
}

func TestLookup(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	r := e.plane.Send(admintest.TCP(t, 4000, webVIP, "S"))
	lookup := func(src string, sport uint16, dst netip.AddrPort, proto string) api.Lookup {
		var l api.Lookup
		e.get(api.LookupQuery(src, dst.Addr().String(), sport, dst.Port(), proto), &l)
		return l
	}
	cases := []struct {
		sport  uint16
		dst    netip.AddrPort
		proto  string
		reason string
	}{
		{4000, webVIP, "tcp", "conntrack"},
		{4001, webVIP, "tcp", "table"},
		{4001, dnsVIP, "udp", "table"},
		{4001, netip.MustParseAddrPort("192.0.2.99:80"), "tcp", "not-a-vip"},
		{4001, webVIP, "udp", "not-a-vip"},
	}
	for _, tc := range cases {
		got := lookup(admintest.Client.String(), tc.sport, tc.dst, tc.proto)
		proto := uint8(6)
		if tc.proto == "udp" {
			proto = 17
		}
		want, err := e.plane.Lookup(admintest.Client, tc.dst.Addr(), tc.sport, tc.dst.Port(), proto)
		if err != nil {
			t.Fatal(err)
		}
		if got.Reason != tc.reason || got.Reason != want.Reason || got.Backend != want.Backend || got.Address != want.Address ||
			got.Slot != want.Slot || got.Hash != want.Hash || got.VIP != want.VIP || got.Proto != tc.proto {
			t.Errorf("lookup %d -> %v/%s: %+v; plane says %+v", tc.sport, tc.dst, tc.proto, got, want)
		}
		if tc.reason == "conntrack" && (got.Address != r.Backend.String() || got.Worker != 0 || got.State != "new") {
			t.Errorf("conntrack lookup %+v; the flow went to %v", got, r.Backend)
		}
		if tc.reason == "table" && (got.Worker != -1 || got.Slot < 0) {
			t.Errorf("table lookup %+v", got)
		}
	}
	// proto defaults to tcp; IPv4-mapped addresses are IPv4.
	var l api.Lookup
	e.get(api.LookupPath+"?src=::ffff:198.51.100.10&dst=203.0.113.7&sport=4000&dport=80", &l)
	if l.Reason != "conntrack" || l.Proto != "tcp" || l.Src != "198.51.100.10" {
		t.Errorf("lookup with defaults: %+v", l)
	}

	for _, tc := range []struct{ query, word string }{
		{"dst=203.0.113.7&sport=1&dport=80", "src"},
		{"src=bogus&dst=203.0.113.7&sport=1&dport=80", `src "bogus"`},
		{"src=198.51.100.10&sport=1&dport=80", "dst"},
		{"src=198.51.100.10&dst=203.0.113.7&dport=80", "sport"},
		{"src=198.51.100.10&dst=203.0.113.7&sport=1&dport=65536", `dport "65536"`},
		{"src=198.51.100.10&dst=203.0.113.7&sport=-1&dport=80", "sport"},
		{"src=198.51.100.10&dst=203.0.113.7&sport=1&dport=80&proto=icmp", `proto "icmp"`},
		{"src=2001:db8::1&dst=203.0.113.7&sport=1&dport=80", "families"},
		{"src=fe80::1%25eth0&dst=fe80::2&sport=1&dport=80", "src"},
	} {
		e.fails("GET", api.LookupPath+"?"+tc.query, "", 400, tc.word)
	}
}

// TestLookupScheduler: for a VIP whose scheduler is not Maglev the lookup
// names the scheduler and its candidates, weights in configured units (as
// every other weight of the API), and no slot; a tracked flow still names
// its backend.
func TestLookupScheduler(t *testing.T) {
	e := start(t, strings.Replace(admintest.Config, "port = 80\n", "port = 80\nscheduler = \"p2c\"\n", 1), loopback())
	var b api.Backend
	e.ok("POST", api.ActionPath("web", "be3", api.ActionWeight), `{"weight": 0}`, &b)
	lookup := func(dst netip.AddrPort, proto string) (l api.Lookup) {
		t.Helper()
		e.get(api.LookupQuery(admintest.Client.String(), dst.Addr().String(), 4343, dst.Port(), proto), &l)
		return l
	}
	l := lookup(webVIP, "tcp")
	if l.Reason != "scheduler" || l.Scheduler != "p2c" || l.Backend != "" || l.Address != "" || l.Slot != -1 || l.Worker != -1 {
		t.Errorf("new flow of a p2c VIP: %+v", l)
	}
	want := map[string]float64{"be1": 1, "be2": 1, "be3": 0, "be4": 2}
	if len(l.Candidates) != len(want) {
		t.Fatalf("candidates %+v, want %d", l.Candidates, len(want))
	}
	for _, c := range l.Candidates {
		if w, ok := want[c.Backend]; !ok || c.Weight != w || c.Address != e.plane.Backend(t, "web", c.Backend).String() || c.Active < 0 {
			t.Errorf("candidate %+v, want weight %v", c, want[c.Backend])
		}
	}

	r := e.plane.Send(admintest.TCP(t, 4343, webVIP, "S"))
	l = lookup(webVIP, "tcp")
	if l.Reason != "conntrack" || l.Scheduler != "p2c" || l.Address != r.Backend.String() || l.Worker != 0 {
		t.Errorf("tracked flow of a p2c VIP: %+v; it went to %v", l, r.Backend)
	}
	// Maglev VIPs name the scheduler too, and list no candidates.
	l = lookup(dnsVIP, "udp")
	if l.Reason != "table" || l.Scheduler != "maglev" || l.Candidates != nil || l.Slot < 0 {
		t.Errorf("maglev VIP: %+v", l)
	}
}

func TestTable(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	var tb api.Table
	e.get(api.TablePath("web"), &tb)
	keys, err := e.plane.Table("web")
	if err != nil {
		t.Fatal(err)
	}
	if tb.VIP != "web" || tb.Size != len(keys) || len(tb.Slots) != len(keys) || tb.Size == 0 {
		t.Fatalf("table: vip %q size %d, %d slots; plane has %d", tb.VIP, tb.Size, len(tb.Slots), len(keys))
	}
	h := sha256.New()
	h.Write([]byte("hash 5-tuple\n"))
	addr := map[string]string{"be1": "10.0.1.1", "be2": "10.0.1.2", "be3": "10.0.1.3", "be4": "10.0.1.4"}
	count := map[string]int{}
	for i, k := range keys {
		if tb.Slots[i] != strings.TrimPrefix(k, "web/") {
			t.Fatalf("slot %d: %q, plane %q", i, tb.Slots[i], k)
		}
		h.Write([]byte(tb.Slots[i] + " " + addr[tb.Slots[i]] + "\n"))
		count[tb.Slots[i]]++
	}
	if tb.Digest != hex.EncodeToString(h.Sum(nil)) {
		t.Errorf("digest %s", tb.Digest)
	}
	var v api.VIP
	e.get(api.VIPPath("web"), &v)
	for _, b := range v.Backends {
		if count[b.Name] != b.TableSlots {
			t.Errorf("%s: %d slots in the table, status says %d", b.Name, count[b.Name], b.TableSlots)
		}
	}
	// Same backends, same table: a second instance agrees slot for slot.
	other := start(t, admintest.Config, loopback())
	var tb2 api.Table
	other.get(api.TablePath("web"), &tb2)
	if tb2.Digest != tb.Digest {
		t.Errorf("two instances with the same config disagree: %s vs %s", tb.Digest, tb2.Digest)
	}
	e.fails("GET", api.TablePath("nope"), "", 404, "nope")

	// A VIP whose every backend is drained has no table.
	for _, b := range []string{"ns1", "ns2"} {
		var ab api.Backend
		e.ok("POST", api.ActionPath("dns", b, api.ActionDrain), "", &ab)
	}
	e.get(api.TablePath("dns"), &tb)
	if tb.Size != 0 || len(tb.Slots) != 0 {
		t.Errorf("dns fully drained: table %+v", tb)
	}
}

func TestReload(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	gen := e.plane.Status(false).Generation

	added := admintest.Config + "\n  [[vip.backend]]\n  name = \"ns3\"\n  address = \"10.0.2.3\"\n"
	if err := os.WriteFile(e.plane.File, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	var rl api.Reload
	e.ok("POST", api.ReloadPath, "", &rl)
	now := e.plane.Status(false).Generation
	if rl.File != e.plane.File || rl.VIPs != 2 || rl.Generation != now || now <= gen {
		t.Errorf("reload: %+v; generation %d -> %d", rl, gen, now)
	}
	var dns api.VIP
	e.get(api.VIPPath("dns"), &dns)
	if dns.BackendCount != 3 {
		t.Errorf("after reload dns has %d backends", dns.BackendCount)
	}

	for _, tc := range []struct{ name, file, word string }{
		{"syntax", added + "\n[[vip\n", "fulcrum.toml"},
		{"unknown key", added + "\nbogus = 1\n", "bogus"},
		{"bad weight", strings.Replace(added, "weight = 2", "weight = -2", 1), "weight"},
		{"needs a restart", strings.Replace(added, "000102030405060708090a0b0c0d0e0f", "0f0e0d0c0b0a09080706050403020100", 1), "hash_key"},
	} {
		if err := os.WriteFile(e.plane.File, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		e.fails("POST", api.ReloadPath, "", 422, tc.word, "running configuration stays")
		if g := e.plane.Status(false).Generation; g != now {
			t.Errorf("%s: a rejected reload changed the generation %d -> %d", tc.name, now, g)
		}
		if n := len(e.plane.Config().VIPs[1].Backends); n != 3 {
			t.Errorf("%s: running config changed: dns has %d backends", tc.name, n)
		}
	}
	os.Remove(e.plane.File)
	e.fails("POST", api.ReloadPath, "", 422, "no such file")
	e.fails("GET", api.ReloadPath, "", 405)

	noFile := serve(t, e.plane, loopback(), "")
	noFile.fails("POST", api.ReloadPath, "", 409, "configuration file")

	// Every reload is counted by its result: one applied, four refused
	// configurations, one file that could not be read.
	fams := e.scrape()
	for _, c := range []struct {
		result string
		want   float64
	}{{"ok", 1}, {"refused", 4}, {"error", 1}} {
		if got, ok := value(fams, "fulcrum_reloads_total", "result", c.result); !ok || got != c.want {
			t.Errorf("fulcrum_reloads_total{result=%q} = %v (found %v), want %v", c.result, got, ok, c.want)
		}
	}
	if got, _ := value(fams, "fulcrum_config_generation"); got != 2 {
		t.Errorf("fulcrum_config_generation = %v, want 2", got)
	}
}

func TestToken(t *testing.T) {
	const token = "s3cret-token"
	e := start(t, admintest.Config, config.Admin{Listen: "127.0.0.1:0", Token: token})
	drain := api.ActionPath("web", "be1", api.ActionDrain)
	for _, hdr := range [][]string{
		nil,
		{"Authorization", "Bearer wrong"},
		{"Authorization", "Bearer " + token + "x"},
		{"Authorization", "Bearer"},
		{"Authorization", "Basic " + token},
		{"Authorization", token},
	} {
		code, b := e.call("POST", drain, "", hdr...)
		if code != 401 || !strings.Contains(string(b), "token") {
			t.Errorf("drain with %q: %d %s", hdr, code, b)
		}
		code, _ = e.call("POST", api.ReloadPath, "", hdr...)
		if code != 401 {
			t.Errorf("reload with %q: %d", hdr, code)
		}
	}
	if e.backend("web", "be1").Drained {
		t.Fatal("an unauthorized drain took effect")
	}
	var b api.Backend
	e.ok("POST", drain, "", &b, "Authorization", "Bearer "+token)
	if !b.Drained || !e.backend("web", "be1").Drained {
		t.Errorf("authorized drain: %+v", b)
	}
	e.ok("POST", api.ActionPath("web", "be1", api.ActionUndrain), "", &b, "authorization", "bearer "+token)
	// Reads need no token on loopback, so the DNS-rebinding guard stays:
	// a page on evil.example resolving to 127.0.0.1 reads nothing.
	var st api.Status
	e.get(api.StatusPath, &st)
	if code, _ := e.call("GET", api.MetricsPath, ""); code != 200 {
		t.Errorf("GET /metrics without token: %d", code)
	}
	for _, p := range []string{api.ConnsPath, api.StatusPath, api.VIPsPath, api.TablePath("web"), api.MetricsPath} {
		if code, b := e.call("GET", p, "", "Host", "evil.example:9180"); code != 403 || !strings.Contains(string(b), "rebinding") {
			t.Errorf("GET %s with Host evil.example on a loopback token server: %d %.80s; want 403", p, code, b)
		}
	}
	e.failsWith("POST", drain, "", 403, []string{"Host", "evil.example", "Authorization", "Bearer " + token}, "rebinding")
	// Beyond loopback every call needs the token, and any Host is served
	// (it may listen under a DNS name). Configured as a network listener;
	// bound, for the test, on loopback.
	p := admintest.New(t, admintest.Config)
	srv := admin.New(p.Plane, config.Admin{Listen: "192.0.2.10:9180", Token: token}, "", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	off := &env{t: t, plane: p, srv: srv, base: "http://" + ln.Addr().String(), hc: &http.Client{Timeout: 20 * time.Second}}
	if code, b := off.call("GET", api.VIPsPath, "", "Host", "lb1.example.net:9180", "Authorization", "Bearer "+token); code != 200 {
		t.Errorf("GET with a DNS Host and the token off loopback: %d %.80s", code, b)
	}
}

func TestBrowserGuards(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	drain := api.ActionPath("web", "be1", api.ActionDrain)
	e.failsWith("POST", drain, "", 403, []string{"Sec-Fetch-Site", "cross-site"}, "cross-origin")
	e.failsWith("POST", drain, "", 403, []string{"Origin", "http://evil.example"}, "cross-origin")
	// DNS rebinding: a page on evil.example resolving to 127.0.0.1.
	e.failsWith("POST", drain, "", 403, []string{"Host", "evil.example:9180"}, "Host")
	e.failsWith("GET", api.VIPsPath, "", 403, []string{"Host", "evil.example"}, "rebinding")
	if e.backend("web", "be1").Drained {
		t.Fatal("a refused request drained be1")
	}
	var v []api.VIP
	e.ok("GET", api.VIPsPath, "", &v, "Host", "localhost:9180")
	e.ok("GET", api.VIPsPath, "", &v, "Host", "[::1]:9180")
}

func TestRoutesAndEscapedNames(t *testing.T) {
	// A VIP without a name is named "address:port/protocol": the slash
	// travels escaped.
	toml := admintest.Config + `
[[vip]]
address = "203.0.113.9"
port = 443
  [[vip.backend]]
  address = "10.0.3.1"
`
	e := start(t, toml, loopback())
	name := "203.0.113.9:443/tcp"
	var v api.VIP
	e.get(api.VIPPath(name), &v)
	if v.Name != name || len(v.Backends) != 1 || v.Backends[0].Name != "10.0.3.1" {
		t.Fatalf("unnamed VIP: %+v", v)
	}
	var b api.Backend
	e.ok("POST", api.ActionPath(name, "10.0.3.1", api.ActionDrain), "", &b)
	if !b.Drained {
		t.Errorf("drain by escaped names: %+v", b)
	}
	var tb api.Table
	e.get(api.TablePath("203.0.113.9:443"), &tb)
	if tb.VIP != name || tb.Size != 0 {
		t.Errorf("table of the drained unnamed VIP: %+v", tb)
	}

	e.fails("GET", "/nope", "", 404, "/nope")
	e.fails("GET", api.Prefix+"/vips/web/bogus", "", 404)
	e.fails("POST", api.StatusPath, "", 405, "GET")
	e.fails("DELETE", api.VIPPath("web"), "", 405)
	e.fails("POST", api.MetricsPath, "", 405)
	if code, body := e.call("HEAD", api.StatusPath, ""); code != 200 || len(body) != 0 {
		t.Errorf("HEAD status: %d, %d bytes", code, len(body))
	}
}

// TestConcurrentReaders runs scrapes and API calls at once: the plane's
// counter snapshots must not interleave (run with -race).
func TestConcurrentReaders(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	e.traffic(1000, 50)
	var wg sync.WaitGroup
	paths := []string{api.StatusPath, api.VIPsPath, api.VIPPath("web"), api.MetricsPath, api.TablePath("web"),
		api.LookupQuery("198.51.100.10", "203.0.113.7", 1000, 80, "tcp")}
	for i := range 12 {
		wg.Go(func() {
			for j := range 5 {
				p := paths[(i+j)%len(paths)]
				if code, b := e.call("GET", p, ""); code != 200 {
					t.Errorf("GET %s: %d %s", p, code, b)
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			var b api.Backend
			e.ok("POST", api.ActionPath("web", "be3", api.ActionDrain), "", &b)
			e.ok("POST", api.ActionPath("web", "be3", api.ActionUndrain), "", &b)
		}
	})
	wg.Wait()
	var st api.Status
	e.get(api.StatusPath, &st)
	if st.Workers[0].RxPackets != 50 {
		t.Errorf("rx %d after concurrent reads", st.Workers[0].RxPackets)
	}
}

func TestListen(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	dir, err := os.MkdirTemp("", "fulcrum-admin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	// A socket left by a killed daemon is replaced.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(stale); err != nil {
		t.Fatal(err)
	}
	e := serve(t, p, config.Admin{Listen: "unix:" + stale}, "")
	var st api.Status
	e.get(api.StatusPath, &st)

	// A socket another process serves, or a file that is not a socket, is
	// left alone.
	srv := admin.New(p.Plane, config.Admin{Listen: "unix:" + stale}, "", nil)
	if _, err := srv.Listen(); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("listen on a served socket: %v", err)
	}
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, []byte("keep me"), 0o600)
	srv = admin.New(p.Plane, config.Admin{Listen: "unix:" + regular}, "", nil)
	if _, err := srv.Listen(); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("listen on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "keep me" {
		t.Error("the regular file was touched")
	}

	srv = admin.New(p.Plane, config.Admin{Listen: "192.0.2.1:9180"}, "", nil)
	if _, err := srv.Listen(); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("non-loopback listen without a token: %v", err)
	}
	srv = admin.New(p.Plane, config.Admin{Listen: "off"}, "", nil)
	if _, err := srv.Listen(); !errors.Is(err, admin.ErrDisabled) {
		t.Errorf("listen off: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.ListenAndServe(ctx); err != nil {
		t.Errorf("ListenAndServe with listen off: %v", err)
	}

	// ListenAndServe stops when its context ends, and removes its socket.
	sock := filepath.Join(dir, "las.sock")
	srv = admin.New(p.Plane, config.Admin{Listen: "unix:" + sock}, "", nil)
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ListenAndServe did not listen")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("the socket file is left behind")
	}
}

// FuzzHandler throws arbitrary requests at the API: every answer is JSON
// (or metrics, the HTML status page at /, a capture's pcapng), never a 500
// and never a panic.
func FuzzHandler(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/api/v1/vips/web", ""},
		{"GET", "/api/v1/lookup?src=1.2.3.4&dst=203.0.113.7&sport=1&dport=80&proto=tcp", ""},
		{"POST", "/api/v1/vips/web/backends/be1/weight?weight=2", ""},
		{"POST", "/api/v1/vips/web/backends/be1/weight", `{"weight": 99999999999999999999}`},
		{"GET", "/api/v1/vips/%00/table", ""},
		{"POST", "/api/v1/vips/203.0.113.7:80/backends/10.0.1.1/undrain", ""},
		{"GET", "/api/v1/vips/::ffff:203.0.113.7/backends/be1", ""},
		{"POST", "/api/v1/capture?duration=10m", ""},
		{"GET", "/", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	p := admintest.New(f, admintest.Config)
	h := admin.New(p.Plane, loopback(), "", nil).Handler()
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if method != "GET" && method != "POST" && method != "HEAD" {
			method = "GET"
		}
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequest(method, "http://127.0.0.1"+target, strings.NewReader(body))
		if err != nil || req.URL.Path == api.MetricsPath {
			return
		}
		if req.URL.Path == api.CapturePath {
			// A capture runs for its duration, or until its client
			// leaves: this client leaves after 100 ms.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			req = req.WithContext(ctx)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, target, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code/100 == 3 && rec.Header().Get("Location") != "" {
			return // ServeMux's redirect to the clean path
		}
		switch {
		case method == "HEAD":
		case req.URL.Path == "/" && rec.Code == http.StatusOK:
			// The status page: HTML.
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Fatalf("%s %s: status page as %q", method, target, ct)
			}
		case req.URL.Path == api.CapturePath && rec.Code == http.StatusOK:
			// A pcapng stream.
		case !json.Valid(rec.Body.Bytes()):
			t.Fatalf("%s %s: not JSON: %q", method, target, rec.Body.Bytes())
		}
	})
}
