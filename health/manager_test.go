package health

import (
	"errors"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// listener returns a TCP listener on loopback that never accepts: the
// kernel completes handshakes into its backlog, which is all a TCP check
// needs, and no server goroutine muddles goroutine counts.
func listener(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return netip.MustParseAddrPort(ln.Addr().String())
}

// poll waits until cond holds, or fails the test after waitFor.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitFor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitUp reads events until every key in keys has come up.
func waitUp(t *testing.T, m *Manager, keys ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	deadline := time.After(waitFor)
	for len(want) > 0 {
		select {
		case e := <-m.Events():
			if e.New == Up {
				delete(want, e.Key)
			}
		case <-deadline:
			t.Fatalf("not up within %v: %v", waitFor, want)
		}
	}
}

func TestManagerSetKeepsState(t *testing.T) {
	m := NewManager(ManagerOptions{})
	defer m.Close()
	cfg := fastConfig(KindTCP)
	a, b, c := Target{Addr: listener(t), Config: cfg}, Target{Addr: listener(t), Config: cfg}, Target{Addr: listener(t), Config: cfg}
	if err := m.Set(map[string]Target{"a": a, "b": b}); err != nil {
		t.Fatal(err)
	}
	waitUp(t, m, "a", "b")
	before, _ := m.Status("a")

	// a unchanged, b removed, c added.
	if err := m.Set(map[string]Target{"a": a, "c": c}); err != nil {
		t.Fatal(err)
	}
	st := m.States()
	if _, ok := st["b"]; ok || len(st) != 2 {
		t.Fatalf("States after removing b: %v", keys(st))
	}
	if sa := st["a"]; sa.State != Up || sa.Checks < before.Checks || !sa.Since.Equal(before.Since) {
		t.Fatalf("a after a reload that kept it: %+v, before %+v", sa, before)
	}
	if sc := st["c"]; sc.State == Down {
		t.Fatalf("c is new and already down: %+v", sc)
	}
	waitUp(t, m, "c")

	// a's check parameters change, its address does not: a new checker
	// that inherits the state (no trip through Unknown).
	cfg2 := cfg
	cfg2.Interval, cfg2.Rise = 60*time.Millisecond, 5
	a2 := Target{Addr: a.Addr, Config: cfg2}
	before, _ = m.Status("a")
	if err := m.Set(map[string]Target{"a": a2, "c": c}); err != nil {
		t.Fatal(err)
	}
	if sa, _ := m.Status("a"); sa.State != Up || sa.Checks < before.Checks || sa.Ejections != before.Ejections {
		t.Fatalf("a after a config change: %+v, before %+v", sa, before)
	}
	poll(t, "a checked by its new checker", func() bool { s, _ := m.Status("a"); return s.Checks > before.Checks })

	// c moves to another address: a new backend under the same key.
	c2 := Target{Addr: listener(t), Config: cfg}
	if err := m.Set(map[string]Target{"a": a2, "c": c2}); err != nil {
		t.Fatal(err)
	}
	if sc, _ := m.Status("c"); sc.Addr != c2.Addr || sc.Checks > 1 || sc.State == Down {
		t.Fatalf("c at a new address: %+v, want a fresh start", sc)
	}
	// Through all of this, a never went back through Unknown.
	for {
		select {
		case e := <-m.Events():
			if e.Key == "a" {
				t.Fatalf("a changed state across reloads: %v>%v (%s)", e.Old, e.New, e.Reason)
			}
			continue
		default:
		}
		break
	}
}

func keys(m map[string]Status) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestManagerSetRejectsBadTarget(t *testing.T) {
	m := NewManager(ManagerOptions{})
	defer m.Close()
	good := Target{Addr: listener(t), Config: fastConfig(KindTCP)}
	if err := m.Set(map[string]Target{"good": good}); err != nil {
		t.Fatal(err)
	}
	bad := good
	bad.Config.Rise = 0
	noPort := Target{Addr: netip.AddrPortFrom(good.Addr.Addr(), 0), Config: fastConfig(KindTCP)}
	for _, set := range []map[string]Target{{"good": good, "bad": bad}, {"noport": noPort}, {"zero": {}}} {
		if err := m.Set(set); !errors.Is(err, ErrConfig) {
			t.Fatalf("Set(%v) = %v, want ErrConfig", set, err)
		}
	}
	if st := m.States(); len(st) != 1 || st["good"].Addr != good.Addr {
		t.Fatalf("a rejected Set changed the running set: %v", keys(st))
	}
}

func TestManagerNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	m := NewManager(ManagerOptions{})
	cfg := fastConfig(KindTCP)
	targets := map[string]Target{"a": {Addr: listener(t), Config: cfg}, "b": {Addr: listener(t), Config: cfg}, "c": {Addr: listener(t), Config: cfg}}
	if err := m.Set(targets); err != nil {
		t.Fatal(err)
	}
	poll(t, "every backend checked", func() bool {
		for _, s := range m.States() {
			if s.Checks == 0 {
				return false
			}
		}
		return true
	})
	if err := m.Set(map[string]Target{"a": targets["a"]}); err != nil {
		t.Fatal(err)
	}
	// One checker and the event forwarder remain.
	poll(t, "removed checkers' goroutines end", func() bool { return runtime.NumGoroutine() <= base+2 })
	m.Close()
	poll(t, "every goroutine ends after Close", func() bool { return runtime.NumGoroutine() <= base })
	if _, ok := <-m.Events(); ok {
		t.Fatal("Events not closed by Close")
	}
	if err := m.Set(targets); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close = %v, want ErrClosed", err)
	}
	m.Close() // twice is fine
}

// A consumer that does not read never blocks the checkers: changes of one
// backend are merged, and the last state always arrives.
func TestCoalescerNeverBlocks(t *testing.T) {
	q := newCoalescer(2)
	go q.run()
	defer q.close()
	const n = 10000
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		state := Unknown
		for i := range n {
			next := Up
			if i%2 == 1 {
				next = Down
			}
			for _, key := range []string{"a", "b"} {
				q.push(Event{Key: key, Old: state, New: next, Coalesced: 1, Status: Status{Checks: uint64(i + 1)}})
			}
			state = next
		}
	}()
	select {
	case <-pushed:
	case <-time.After(waitFor):
		t.Fatal("push blocked on a consumer that does not read")
	}
	// Read everything: per key, transitions chain (each Old is the last
	// New), the counts add up to n, and the last state is the last pushed.
	total := map[string]int{}
	last := map[string]Event{}
	deadline := time.After(waitFor)
	for total["a"] < n || total["b"] < n {
		select {
		case e := <-q.out:
			if p, ok := last[e.Key]; ok && e.Old != p.New {
				t.Fatalf("%s: event %v>%v after one that ended in %v", e.Key, e.Old, e.New, p.New)
			}
			last[e.Key] = e
			total[e.Key] += e.Coalesced
		case <-deadline:
			t.Fatalf("events for %v of %d changes", total, n)
		}
	}
	for _, k := range []string{"a", "b"} {
		if e := last[k]; total[k] != n || e.New != Down || e.Status.Checks != n {
			t.Fatalf("%s: %d changes, last %+v; want %d ending down at check %d", k, total[k], e, n, n)
		}
	}
}

func TestCoalescerDrop(t *testing.T) {
	q := newCoalescer(1)
	q.push(Event{Key: "a", Coalesced: 1})
	q.push(Event{Key: "b", Coalesced: 1})
	q.push(Event{Key: "a", Coalesced: 1})
	q.drop("a")
	if e, ok := q.next(); !ok || e.Key != "b" {
		t.Fatalf("next = %+v, %v; want b", e, ok)
	}
	if _, ok := q.next(); ok {
		t.Fatal("a dropped event came back")
	}
}

// TestManagerSetRenamedSwap: two VIPs swap names in one reload, their
// backends unchanged: each checker's run (its id, its count of checks, its
// address) goes on under the new key, in both directions, and a plain
// rename (the old key gone) carries its run too.
func TestManagerSetRenamedSwap(t *testing.T) {
	m := NewManager(ManagerOptions{})
	defer m.Close()
	cfg := fastConfig(KindTCP)
	a, b := Target{Addr: listener(t), Config: cfg}, Target{Addr: listener(t), Config: cfg}
	if err := m.Set(map[string]Target{"web/x": a, "www/x": b}); err != nil {
		t.Fatal(err)
	}
	poll(t, "both checked", func() bool { s := m.States(); return s["web/x"].Checks > 0 && s["www/x"].Checks > 0 })
	idA, _ := m.CheckerID("web/x")
	idB, _ := m.CheckerID("www/x")
	before := m.States()
	if err := m.SetRenamed(map[string]Target{"web/x": b, "www/x": a}, map[string]string{"web/x": "www/x", "www/x": "web/x"}); err != nil {
		t.Fatal(err)
	}
	after := m.States()
	if id, _ := m.CheckerID("web/x"); id != idB || after["web/x"].Addr != b.Addr || after["web/x"].Checks < before["www/x"].Checks {
		t.Errorf("web/x after the swap: checker %d at %v with %d checks; want www/x's run (%d at %v, %d checks so far)", id, after["web/x"].Addr, after["web/x"].Checks, idB, b.Addr, before["www/x"].Checks)
	}
	if id, _ := m.CheckerID("www/x"); id != idA || after["www/x"].Addr != a.Addr || after["www/x"].Checks < before["web/x"].Checks {
		t.Errorf("www/x after the swap: checker %d at %v with %d checks; want web/x's run (%d at %v, %d checks so far)", id, after["www/x"].Addr, after["www/x"].Checks, idA, a.Addr, before["web/x"].Checks)
	}
	if err := m.SetRenamed(map[string]Target{"api/x": b, "www/x": a}, map[string]string{"api/x": "web/x"}); err != nil {
		t.Fatal(err)
	}
	if id, _ := m.CheckerID("api/x"); id != idB {
		t.Errorf("api/x renamed from web/x: checker %d, want %d", id, idB)
	}
	if _, ok := m.CheckerID("web/x"); ok {
		t.Error("web/x still runs after its rename")
	}
}
