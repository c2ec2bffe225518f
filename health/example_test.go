package health_test

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/fulcrumlb/fulcrum/health"
)

// A Manager checks a set of backends and reports their state changes.
func ExampleManager() {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a backend
	if err != nil {
		panic(err)
	}
	defer ln.Close()

	cfg := health.DefaultConfig() // tcp, every 2s, rise 2, fall 3
	cfg.Interval, cfg.Timeout = 50*time.Millisecond, 40*time.Millisecond

	m := health.NewManager(health.ManagerOptions{})
	defer m.Close()
	err = m.Set(map[string]health.Target{
		"web/10.0.0.5": {Addr: netip.MustParseAddrPort(ln.Addr().String()), Config: cfg},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("routable at first:", m.States()["web/10.0.0.5"].Routable())
	e := <-m.Events()
	fmt.Printf("%s: %v -> %v after %d checks\n", e.Key, e.Old, e.New, e.Status.Checks)
	// Output:
	// routable at first: false
	// web/10.0.0.5: unknown -> up after 2 checks
}
