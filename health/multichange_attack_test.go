package health

import (
	"testing"
	"time"
)

// An event says which run of checks reported it (Event.Checker), and
// CheckerID which run is current: a key removed and added back, or moved
// away and back, is a new run whose predecessor's queued events a consumer
// can tell apart; a config change at the same address continues the run
// (the state is inherited).
func TestCheckerIDAcrossRemoveReaddAndMoves(t *testing.T) {
	m := NewManager(ManagerOptions{})
	defer m.Close()
	cfg := fastConfig(KindTCP)
	a := Target{Addr: listener(t), Config: cfg}
	other := Target{Addr: listener(t), Config: cfg}
	if err := m.Set(map[string]Target{"k": a}); err != nil {
		t.Fatal(err)
	}
	var first Event
	deadline := time.After(waitFor)
	for first.Key == "" {
		select {
		case e := <-m.Events():
			if e.Key == "k" && e.New == Up {
				first = e
			}
		case <-deadline:
			t.Fatal("k never up")
		}
	}
	id1, ok := m.CheckerID("k")
	if !ok || id1 == 0 || first.Checker != id1 {
		t.Fatalf("first run: event checker %d, CheckerID %d %v", first.Checker, id1, ok)
	}
	// Same address, other config: the same run.
	cfg2 := cfg
	cfg2.Rise = 3
	if err := m.Set(map[string]Target{"k": {Addr: a.Addr, Config: cfg2}}); err != nil {
		t.Fatal(err)
	}
	if id, _ := m.CheckerID("k"); id != id1 {
		t.Errorf("config change at the same address: checker %d, want %d (inherited state)", id, id1)
	}
	// Removed and added back at the same address: a new run.
	if err := m.Set(map[string]Target{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.CheckerID("k"); ok {
		t.Error("CheckerID of a removed key")
	}
	if err := m.Set(map[string]Target{"k": a}); err != nil {
		t.Fatal(err)
	}
	id2, _ := m.CheckerID("k")
	if id2 == id1 {
		t.Errorf("re-added key kept checker %d: its predecessor's queued events would pass for its own", id2)
	}
	// Moved away and back: new runs each time.
	if err := m.Set(map[string]Target{"k": other}); err != nil {
		t.Fatal(err)
	}
	id3, _ := m.CheckerID("k")
	if err := m.Set(map[string]Target{"k": a}); err != nil {
		t.Fatal(err)
	}
	id4, _ := m.CheckerID("k")
	if id3 == id2 || id4 == id3 || id4 == id2 || id4 == id1 {
		t.Errorf("checker ids across moves: %d %d %d %d, want all different", id1, id2, id3, id4)
	}
	// The current run's events carry its id.
	deadline = time.After(waitFor)
	for {
		select {
		case e := <-m.Events():
			if e.Key == "k" && e.Checker == id4 {
				return
			}
		case <-deadline:
			t.Fatalf("no event of run %d", id4)
		}
	}
}
