package health

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
)

// Shares joined, left and ended by Sets while the checks run and readers
// read, then Close: no race, Close returns, no share goroutine is left.
func TestShareChurnThenClose(t *testing.T) {
	before := runtime.NumGoroutine()
	var mu sync.Mutex
	calls := map[string]int{}
	m := NewManager(ManagerOptions{NewProber: func(key string, _ Target) (Prober, error) {
		return countProber{&mu, calls, key}, nil
	}})
	cfg := DefaultConfig()
	cfg.Interval = MinInterval
	cfg.Timeout = MinInterval / 2
	cfg.Jitter = 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			m.Probes()
			m.States()
		}
	}()
	go func() {
		for range m.Events() {
		}
	}()
	for i := range 200 {
		targets := map[string]Target{}
		for v := range 1 + i%5 {
			c := cfg
			c.Rise = 1 + (i+v)%3
			targets[fmt.Sprintf("v%d/be", v)] = Target{Addr: netip.MustParseAddrPort(fmt.Sprintf("192.0.2.%d:80", 1+(i*v)%3)), Config: c}
		}
		if err := m.Set(targets); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	m.Close()
	if n := m.Probes(); n != 0 {
		t.Fatalf("Probes after Close: %d", n)
	}
	poll(t, "goroutines back", func() bool { return runtime.NumGoroutine() <= before+1 })
}
