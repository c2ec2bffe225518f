package control

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/health"
)

// backendServer is a real HTTP server on loopback standing in for one
// backend's health endpoint; it can be killed and restarted on its port.
type backendServer struct {
	mu   sync.Mutex
	addr string
	srv  *http.Server
}

func startBackend(t *testing.T, addr string) *backendServer {
	t.Helper()
	b := &backendServer{addr: addr}
	b.start(t)
	t.Cleanup(b.stop)
	return b
}

func (b *backendServer) start(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	addr := b.Addr()
	deadline := time.Now().Add(5 * time.Second)
	for { // the port may linger briefly after a close
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ok"))
	})}
	b.mu.Lock()
	b.srv = srv
	b.addr = ln.Addr().String()
	b.mu.Unlock()
	go srv.Serve(ln)
}

// Addr is the server's address (its port is fixed after the first start).
func (b *backendServer) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

func (b *backendServer) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		b.srv.Close()
		b.srv = nil
	}
}

// redirect is the real prober of a check, dialling the loopback server that
// stands in for the backend's address.
type redirect struct {
	inner health.Prober
	to    func(netip.AddrPort) netip.AddrPort
}

func (r redirect) Probe(ctx context.Context, t netip.AddrPort) (time.Duration, error) {
	return r.inner.Probe(ctx, r.to(t))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The checks run every 100 ms with an 80 ms timeout: with 20 ms, a loaded
// machine failed the healthy backends' checks too, the VIP went into panic
// mode and a new flow reached the down backend (a flaky failure).
func TestHealthChecksDriveTheTable(t *testing.T) {
	toml := strings.Replace(baseConfig, "[[vip]]", `[health]
kind = "http"
path = "/healthz"
interval = "100ms"
timeout = "80ms"
rise = 2
fall = 2
jitter = 0.1
flap_backoff = "300ms"
flap_backoff_max = "1s"

[[vip]]`, 1)
	toml = strings.Replace(toml, `slow_start = "10s"`, `slow_start = "300ms"`, 1)
	f := newFixture(t, toml)
	f.plane.now = time.Now // real time: the checks run on it
	servers := map[netip.Addr]*backendServer{}
	for _, b := range f.plane.Config().VIPs[0].Backends {
		servers[b.Address.Addr] = startBackend(t, "127.0.0.1:0")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.plane.Run(ctx.Done())
	err := f.plane.StartHealth(ctx, health.ManagerOptions{NewProber: func(key string, tg health.Target) (health.Prober, error) {
		inner, err := health.NewProber(tg.Config)
		if err != nil {
			return nil, err
		}
		return redirect{inner, func(a netip.AddrPort) netip.AddrPort {
			return netip.MustParseAddrPort(servers[a.Addr()].Addr())
		}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	status := func(name string) BackendStatus {
		for _, b := range f.plane.Status(false).VIPs[0].Backends {
			if b.Name == name {
				return b
			}
		}
		t.Fatalf("no backend %s", name)
		return BackendStatus{}
	}
	allUp := func() bool {
		for _, b := range f.plane.Status(false).VIPs[0].Backends {
			if b.Health != "up" || b.SlowStart {
				return false
			}
		}
		return true
	}
	waitFor(t, "every backend up after rise checks", allUp)

	// Kill be2's server: after fall failed checks it leaves the table.
	be2 := f.addr("be2")
	servers[be2].stop()
	// on_down keeps its tracked flows (the default): no slots, not down.
	waitFor(t, "be2 down", func() bool { s := status("be2"); return s.Health == "down" && s.Slots == 0 && !s.Down })
	if s := status("be2"); !strings.Contains(s.Reason, "connect") {
		t.Errorf("be2 down reason %q", s.Reason)
	}
	hs, ok := f.plane.HealthStatus("web", "be2")
	if !ok || hs.ConsecutiveFail < 2 {
		t.Errorf("be2 checker: %+v", hs)
	}
	// New flows avoid it meanwhile.
	for i := 0; i < 200; i++ {
		if d := f.lc.send(syn(t, uint16(9000+i), "S")).dst; d == be2 {
			t.Fatal("new flow to the down backend")
		}
	}

	// Restart it: it comes back after rise checks, slow-starting, then at
	// full weight.
	servers[be2].start(t)
	waitFor(t, "be2 back, ramping", func() bool { s := status("be2"); return s.Health == "up" && s.Slots > 0 })
	waitFor(t, "be2 at full weight", func() bool { s := status("be2"); return !s.SlowStart && s.Effective == 100 })

	// Flap it: down again right after coming up counts as a flap and
	// ejects it for a backoff before its checks may bring it back.
	servers[be2].stop()
	waitFor(t, "be2 down again", func() bool { return status("be2").Health == "down" })
	servers[be2].start(t)
	waitFor(t, "be2 up again", func() bool { return status("be2").Health == "up" })
	servers[be2].stop()
	waitFor(t, "be2 down after a short up", func() bool { return status("be2").Health == "down" })
	servers[be2].start(t)
	waitFor(t, "be2 ejected for flapping", func() bool {
		hs, _ := f.plane.HealthStatus("web", "be2")
		return hs.Ejections > 0 && strings.Contains(status("be2").Reason, "flapping")
	})
	hs, _ = f.plane.HealthStatus("web", "be2")
	if hs.Backoff <= 0 {
		t.Errorf("ejected without backoff: %+v", hs)
	}
	waitFor(t, "be2 trusted again after its backoff", func() bool { return status("be2").Health == "up" })
}

// flap_window reaches the checkers, in checks.
func TestHealthConfigFlapWindow(t *testing.T) {
	toml := strings.Replace(baseConfig, "[[vip]]", "[health]\nkind = \"tcp\"\nflap_window = 35\n\n[[vip]]", 1)
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	targets, err := healthTargets(cfg, nil)
	if err != nil || len(targets) == 0 {
		t.Fatalf("%d targets: %v", len(targets), err)
	}
	for k, tg := range targets {
		if got := tg.Config.EffectiveFlapWindow(); got != 35 {
			t.Fatalf("%s: flap window %d checks, want 35", k, got)
		}
	}
}

// A checker's key names its backend even when the VIP's name is its default,
// "address:port/protocol", which holds a '/'.
func TestCheckKeyRoundTrip(t *testing.T) {
	for _, r := range []dataplane.BackendRef{
		{VIP: "web", Backend: "be1"},
		{VIP: "203.0.113.7:80/tcp", Backend: "10.0.0.5"},
		{VIP: "2001:db8::7:443/tcp", Backend: "2001:db8::5"},
	} {
		if got := checkRef(checkKey(r)); got != r {
			t.Errorf("checkRef(checkKey(%#v)) = %#v", r, got)
		}
	}
}
