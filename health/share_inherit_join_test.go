package health

import (
	"net/netip"
	"sync"
	"testing"
)

// A reload that moves a backend's check to another port (its checker is
// replaced by one that inherits its state, counts included) where another
// VIP already checks the same server the same way makes the successor join
// that share. Its first check of the new question must come within
// jitter×interval (firstDelay), as it does for a checker of its own (the
// control below) and as doc.go says of "a checker that joins one"; it
// waited for the share's next round instead (an hour at MaxInterval),
// judged meanwhile by the old port's verdict.
func TestInheritorJoiningShareCheckedAtOnce(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	newM := func() *Manager {
		m := NewManager(ManagerOptions{NewProber: func(key string, _ Target) (Prober, error) {
			return countProber{&mu, calls, key}, nil
		}})
		t.Cleanup(m.Close)
		return m
	}
	cfg := DefaultConfig()
	cfg.Interval = MaxInterval
	cfg.Jitter = 0 // firstDelay 0: a new checker checks at once
	cfg.Rise = 1
	addr := netip.MustParseAddrPort("192.0.2.1:80")
	at81 := cfg
	at81.Port = 81

	for _, shared := range []bool{false, true} {
		m := newM()
		targets := map[string]Target{"a/be": {Addr: addr, Config: at81}}
		if shared {
			targets["b/be"] = Target{Addr: addr, Config: cfg}
		}
		if err := m.Set(targets); err != nil {
			t.Fatal(err)
		}
		poll(t, "first checks", func() bool {
			for k := range targets {
				if s, _ := m.Status(k); s.Checks != 1 {
					return false
				}
			}
			return true
		})
		// a/be's check moves from port 81 to the service port (80).
		targets["a/be"] = Target{Addr: addr, Config: cfg}
		if err := m.Set(targets); err != nil {
			t.Fatal(err)
		}
		what := "a/be checked at its new port, alone"
		if shared {
			what = "a/be checked at its new port, joining b/be's check"
		}
		poll(t, what, func() bool { s, _ := m.Status("a/be"); return s.Checks == 2 })
	}
}
