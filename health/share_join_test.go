package health

import (
	"net/netip"
	"sync"
	"testing"
)

// A backend that a reload adds to a server already checked (the same way)
// for another VIP must be checked as a new checker is: within
// jitter×interval of the Set (firstDelay; "a new backend is still checked
// almost at once"), not at the share's next round, up to a whole interval
// later (an hour at the longest interval: a VIP added by a reload is not
// announced, and a backend added to a VIP takes no flows, until then).
func TestJoinerCheckedAtOnce(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	m := NewManager(ManagerOptions{NewProber: func(key string, _ Target) (Prober, error) {
		return countProber{&mu, calls, key}, nil
	}})
	defer m.Close()
	cfg := DefaultConfig()
	cfg.Interval = MaxInterval
	cfg.Jitter = 0 // firstDelay 0: a new checker checks at once
	cfg.Rise = 1
	addr := netip.MustParseAddrPort("192.0.2.1:80")
	targets := map[string]Target{"a/be": {Addr: addr, Config: cfg}}
	if err := m.Set(targets); err != nil {
		t.Fatal(err)
	}
	poll(t, "a/be's first check", func() bool { s, _ := m.Status("a/be"); return s.Checks == 1 })
	// Alone, b/be's checker checks at once: the control.
	alone := NewManager(ManagerOptions{NewProber: func(key string, _ Target) (Prober, error) {
		return countProber{&mu, calls, "alone"}, nil
	}})
	defer alone.Close()
	if err := alone.Set(map[string]Target{"b/be": {Addr: addr, Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	poll(t, "b/be's first check in a Manager of its own", func() bool { s, _ := alone.Status("b/be"); return s.State == Up })

	// The same backend added for VIP b next to a.
	targets["b/be"] = Target{Addr: addr, Config: cfg}
	if err := m.Set(targets); err != nil {
		t.Fatal(err)
	}
	poll(t, "b/be (sharing a/be's check) checked and up", func() bool { s, _ := m.Status("b/be"); return s.State == Up })
}
