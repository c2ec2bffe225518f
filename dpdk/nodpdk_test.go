//go:build !dpdk

package dpdk

import (
	"os/exec"
	"testing"
)

// TestDPDKTestsCompiledIn fails where libdpdk is installed but the tests
// were built without the dpdk tag: every DPDK test of the module would
// otherwise be left out and the run would look green.
func TestDPDKTestsCompiledIn(t *testing.T) {
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Skip("no pkg-config, so no libdpdk either: the DPDK tests cannot build here")
	}
	if exec.Command("pkg-config", "--exists", "libdpdk").Run() == nil {
		t.Fatal("libdpdk is installed but these tests were built without DPDK: run them with -tags dpdk (make test does)")
	}
	t.Log("libdpdk is not installed: the DPDK tests are left out (scripts/setup.sh installs it)")
}
