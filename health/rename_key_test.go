package health

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// A checker renamed by SetRenamed (a VIP renamed by a reload) inherits its
// predecessor's machine, whose Status.Key is the old key: every later
// Status and Event still names the old key. Package control finds the
// backend of an event by its key (checkRef(ev.Key)), so the renamed VIP's
// backends never get another verdict: a backend that dies after the
// rename stays in the table.
func TestRenamedCheckerReportsNewKey(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ap := netip.MustParseAddrPort(ln.Addr().String())
	m := NewManager(ManagerOptions{})
	defer m.Close()
	cfg := fastConfig(KindTCP)
	cfg.Rise, cfg.Fall = 1, 1
	tg := Target{Addr: ap, Config: cfg}
	if err := m.Set(map[string]Target{"web/x": tg}); err != nil {
		t.Fatal(err)
	}
	waitUp(t, m, "web/x")
	if err := m.SetRenamed(map[string]Target{"www/x": tg}, map[string]string{"www/x": "web/x"}); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Status("www/x"); s.Key != "www/x" {
		t.Errorf("Status(\"www/x\").Key = %q after the rename", s.Key)
	}
	ln.Close() // the backend dies after the rename
	deadline := time.After(waitFor)
	for {
		select {
		case ev := <-m.Events():
			if ev.New != Down {
				continue
			}
			if ev.Key != "www/x" || ev.Status.Key != "www/x" {
				t.Fatalf("down event of the renamed checker has Key %q (Status.Key %q), want %q", ev.Key, ev.Status.Key, "www/x")
			}
			return
		case <-deadline:
			t.Fatal("no down event")
		}
	}
}
