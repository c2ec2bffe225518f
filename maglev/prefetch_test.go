package maglev

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// SlotLine is the address of the very slot Lookup reads: the value there
// is Lookup's answer for 10,000 random hashes.
func TestSlotLineIsLookupsSlot(t *testing.T) {
	tab, err := Build(names("b", 37, equal), 65537)
	if err != nil {
		t.Fatal(err)
	}
	if tab.slots16 == nil {
		t.Fatal("a 37-backend table has no 16-bit slots")
	}
	rng := rand.New(rand.NewPCG(3, 7))
	for range 10_000 {
		h := rng.Uint64()
		if got := int(*(*uint16)(unsafe.Pointer(tab.SlotLine(h)))); got != tab.Lookup(h) {
			t.Fatalf("hash %#x: the slot at SlotLine holds %d, Lookup says %d", h, got, tab.Lookup(h))
		}
	}
}
