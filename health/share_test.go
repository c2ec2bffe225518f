package health

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// countProber answers every probe at once and counts them by prober.
type countProber struct {
	mu    *sync.Mutex
	calls map[string]int // by the key the prober was built for
	key   string
}

func (p countProber) Probe(context.Context, netip.AddrPort) (time.Duration, error) {
	p.mu.Lock()
	p.calls[p.key]++
	p.mu.Unlock()
	return time.Millisecond, nil
}

// Backends of several VIPs at one address, checked the same way, are
// probed once a round (4,096 VIPs over 16 servers ran 65,536 checks a
// round); each keeps its own verdict with its own rise and fall. A
// different question (another path) or another port is a check of its
// own; leaving members do not stop the others' checks, and the last one
// ends them.
func TestManagerSharesEqualChecks(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	m := NewManager(ManagerOptions{NewProber: func(key string, _ Target) (Prober, error) {
		return countProber{&mu, calls, key}, nil
	}})
	defer m.Close()
	cfg := fastConfig(KindHTTP)
	addr := netip.MustParseAddrPort("192.0.2.1:80")
	slow := cfg
	slow.Rise = cfg.Rise + 3
	other := cfg
	other.Path = "/other"
	ported := cfg
	ported.Port = 8080
	targets := map[string]Target{
		"web/be1":   {Addr: addr, Config: cfg},
		"api/be1":   {Addr: addr, Config: cfg},
		"slow/be1":  {Addr: addr, Config: slow},                                       // rise is the checker's own: shared
		"other/be1": {Addr: addr, Config: other},                                      // another question: its own
		"tls/be1":   {Addr: netip.MustParseAddrPort("192.0.2.1:443"), Config: ported}, // port 8080 for both
		"alt/be1":   {Addr: netip.MustParseAddrPort("192.0.2.1:80"), Config: ported},
	}
	if err := m.Set(targets); err != nil {
		t.Fatal(err)
	}
	if n := m.Probes(); n != 3 {
		t.Fatalf("%d checks a round for 6 backends over 3 questions, want 3", n)
	}
	// Each answer is judged by every member of its share: the members'
	// checks count the share's probes (polled: a probe is counted just
	// before its members judge it).
	shares := [][]string{{"api/be1", "slow/be1", "web/be1"}, {"other/be1"}, {"alt/be1", "tls/be1"}}
	poll(t, "each share's members judged each of its 5+ probes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		st := m.States()
		for _, keys := range shares {
			n := calls[keys[0]] // the share's prober: its first member's (Set starts them in key order)
			if n < 5 {
				return false
			}
			for _, k := range keys {
				if st[k].Checks != uint64(n) {
					return false
				}
			}
		}
		return len(calls) == 3
	})
	st := m.States()
	if st["web/be1"].State != Up || st["slow/be1"].State != Up {
		t.Errorf("after 5 passing checks: web/be1 %v (rise %d), slow/be1 %v (rise %d), want both up", st["web/be1"].State, cfg.Rise, st["slow/be1"].State, slow.Rise)
	}

	// One member leaves: the others of its share go on being checked.
	delete(targets, "web/be1")
	if err := m.Set(targets); err != nil {
		t.Fatal(err)
	}
	if n := m.Probes(); n != 3 {
		t.Fatalf("%d checks a round after one of three members left, want 3", n)
	}
	before, _ := m.Status("api/be1")
	poll(t, "api/be1 checked after web/be1 left", func() bool { s, _ := m.Status("api/be1"); return s.Checks > before.Checks })
	// The last member leaves: its checks end.
	delete(targets, "other/be1")
	if err := m.Set(targets); err != nil {
		t.Fatal(err)
	}
	if n := m.Probes(); n != 2 {
		t.Fatalf("%d checks a round after other/be1 left, want 2", n)
	}
	mu.Lock()
	ended := calls["other/be1"]
	mu.Unlock()
	poll(t, "api/be1 checked twice more", func() bool { s, _ := m.Status("api/be1"); return s.Checks > before.Checks+2 })
	mu.Lock()
	defer mu.Unlock()
	if calls["other/be1"] != ended {
		t.Errorf("other/be1's check ran %d times after its only backend left", calls["other/be1"]-ended)
	}
}

// A tcp check sends no request: its path, host and expect (left over from
// an http check, or inherited from [health]) do not make it another
// check. An http check's do.
func TestShareKeyIgnoresRequestOfTCP(t *testing.T) {
	addr := netip.MustParseAddrPort("192.0.2.1:80")
	for _, kind := range []string{KindTCP, KindHTTP} {
		a, b := DefaultConfig(), DefaultConfig()
		a.Kind, b.Kind = kind, kind
		a.Path, b.Path = "/", "/ready"
		a.Host, b.Host = "a.example", "b.example"
		same := ShareKey(Target{Addr: addr, Config: a}) == ShareKey(Target{Addr: addr, Config: b})
		if same != (kind == KindTCP) {
			t.Errorf("%s checks differing only in path and host: shared %v, want %v", kind, same, kind == KindTCP)
		}
	}
}
