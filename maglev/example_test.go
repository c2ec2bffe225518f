package maglev_test

import (
	"fmt"
	"sync/atomic"

	"github.com/fulcrumlb/fulcrum/maglev"
)

// The control plane builds a table off to the side and publishes it with
// one atomic store; dataplane readers load the pointer once per burst and
// never see a table change under them. A flow already pinned in conntrack
// keeps its backend; only new flows look the table up.
func Example_publish() {
	var current atomic.Pointer[maglev.Table]

	publish := func(backends []maglev.Backend) error {
		t, err := maglev.Build(backends, maglev.DefaultSize)
		if err != nil {
			return err // the old table stays in service
		}
		current.Store(t)
		return nil
	}

	if err := publish([]maglev.Backend{{Key: "a", Weight: 1}, {Key: "b", Weight: 1}}); err != nil {
		fmt.Println(err)
	}
	old := current.Load()
	// Drain "a": it keeps its index in the backend list but owns no slots.
	if err := publish([]maglev.Backend{{Key: "a", Weight: 0}, {Key: "b", Weight: 1}}); err != nil {
		fmt.Println(err)
	}
	// A bad update is refused and the table in service does not change.
	fmt.Println(publish([]maglev.Backend{{Key: "a", Weight: 0}}))

	t := current.Load() // in the dataplane: once per burst
	fmt.Println(t.Backend(t.Lookup(0x0123456789abcdef)).Key)
	d, _ := maglev.Diff(old, t)
	fmt.Printf("%d of %d slots changed, %d needlessly\n", d.Changed, d.Size, d.Needless)
	// Output:
	// maglev: 1 backend(s): all weights are zero
	// b
	// 32769 of 65537 slots changed, 0 needlessly
}
