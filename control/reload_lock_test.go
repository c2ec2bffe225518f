package control

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// maxShapeConfig is a configuration of vips VIPs of per backends each at
// table_size size.
func maxShapeConfig(vips, per, size int, salt int) string {
	b := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("conntrack", "capacity = 4096")
	n := 0
	for i := 0; i < vips; i++ {
		b.VIP(fmt.Sprintf("v%d", i), fmt.Sprintf("198.%d.%d.%d", 18+i>>16, i>>8&255, i&255), 80, fmt.Sprintf("table_size = %d", size))
		for j := 0; j < per; j++ {
			b.Backend(fmt.Sprintf("b%d", j+salt), fmt.Sprintf("10.%d.%d.%d", 1+n>>16, n>>8&255, n&255))
			n++
		}
	}
	return b.String()
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// A reload validates the new configuration by building every table (the
// dry run) and then builds them again for the snapshot it publishes. The
// dry run needs nothing the control-plane lock guards but the next hop,
// yet it runs under the lock, so for a large configuration every health
// verdict, drain, admin status call and signal fold waited for two full
// builds of every Maglev table (at the limits, 10-24 s on the development
// VM), even for a reload of an unchanged file.
// Measured as bytes allocated while the lock is held: at most one table
// set (plus the rest of a snapshot) should be built under it.
func TestReloadBuildsTablesOnceUnderLock(t *testing.T) {
	const vips, per, size = 256, 16, 65537
	src := maxShapeConfig(vips, per, size, 0)
	f := newFixture(t, src)
	p := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(p, []byte(maxShapeConfig(vips, per, size, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	tableBytes := uint64(vips * size * 2)
	done := make(chan error, 1)
	go func() { done <- f.plane.Reload(p) }()
	// Wait until the reload holds the lock (nothing else takes it in
	// this fixture), then wait for the lock like a health event does.
	deadline := time.Now().Add(time.Minute)
	for f.plane.mu.TryLock() {
		f.plane.mu.Unlock()
		select {
		case err := <-done:
			t.Fatalf("the reload ended (%v) before it was seen holding the lock", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the reload never took the lock")
		}
		runtime.Gosched()
	}
	a := totalAlloc()
	t0 := time.Now()
	f.plane.Config() // waits for the lock, as healthEvent, Status and Drain do
	waited := time.Since(t0)
	b := totalAlloc()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d VIPs x %d slots: one table set is %d MiB; %d MiB allocated while a lock waiter waited %v", vips, size, tableBytes>>20, (b-a)>>20, waited)
	if b-a >= 2*tableBytes {
		t.Errorf("%d MiB allocated under the control-plane lock by one reload, %.1f table sets: the dry run's tables are built under the lock too", (b-a)>>20, float64(b-a)/float64(tableBytes))
	}
}
