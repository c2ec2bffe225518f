//go:build dpdk

package dpdk

import "testing"

// TestPdumpInit: the pdump handler registers and unregisters (the tests'
// EAL runs without hugepages; the multi-process channel exists anyway).
func TestPdumpInit(t *testing.T) {
	if err := PdumpInit(); err != nil {
		t.Fatalf("PdumpInit: %v", err)
	}
	if err := PdumpUninit(); err != nil {
		t.Fatalf("PdumpUninit: %v", err)
	}
}
