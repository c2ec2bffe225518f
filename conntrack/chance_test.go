package conntrack

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// TestEntryChance: the second chance is stored beside the pin, survives a
// Repin and a Touch, is cleared by ClearChance and by a new Insert in the
// slot, and ids that do not fit clear it.
func TestEntryChance(t *testing.T) {
	tb := newTable(t, 64)
	k := tuple4(1)
	h := uint64(0x1234567)
	e := tb.Insert(h, &k, Initial(packet.ProtoTCP, packet.TCPAck), 1, 2, 3, 0)
	if e == nil {
		t.Fatal("insert failed")
	}
	if id, ok := e.Chance(); ok || id != 0 {
		t.Fatalf("new entry: chance %d %v, want none", id, ok)
	}
	e.SetChance(65535)
	tb.Repin(e, 4, 5)
	tb.Touch(e, 10, packet.TCPAck)
	if id, ok := e.Chance(); !ok || id != 65535 || e.Backend() != 4 || e.Gen() != 5 {
		t.Fatalf("chance %d %v pin %d/%d, want 65535 true 4/5", id, ok, e.Backend(), e.Gen())
	}
	e.SetChance(0)
	if id, ok := e.Chance(); !ok || id != 0 {
		t.Fatalf("chance %d %v, want 0 true", id, ok)
	}
	e.SetChance(MaxBackends)
	if _, ok := e.Chance(); ok {
		t.Fatal("an id beyond MaxBackends was stored")
	}
	e.SetChance(7)
	e.ClearChance()
	if _, ok := e.Chance(); ok {
		t.Fatal("ClearChance left a chance")
	}
	e.SetChance(7)
	tb.Delete(h, &k)
	e = tb.Insert(h, &k, Initial(packet.ProtoTCP, packet.TCPAck), 1, 2, 3, 20)
	if _, ok := e.Chance(); ok {
		t.Fatal("a new entry inherited the old chance")
	}
}
