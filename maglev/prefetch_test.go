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
		// The slot at that address, found by its offset in the table.
		off := tab.SlotLine(h) - uintptr(unsafe.Pointer(&tab.slots16[0]))
		if off%2 != 0 || off/2 >= uintptr(len(tab.slots16)) {
			t.Fatalf("hash %#x: SlotLine is %d bytes into a table of %d slots", h, off, len(tab.slots16))
		}
		if got := int(tab.slots16[off/2]); got != tab.Lookup(h) {
			t.Fatalf("hash %#x: the slot at SlotLine holds %d, Lookup says %d", h, got, tab.Lookup(h))
		}
	}
}
