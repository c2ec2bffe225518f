package scripts

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLabDownLeavesForeignNamespaces: `lab.sh down` (also the first step
// of every `lab.sh up`, and the demo's EXIT trap) must remove the lab's
// namespaces (fl-router, fl-client, fl-lbN, fl-beN) and nothing else. It
// removed every namespace whose name begins with "fl-" and SIGKILLed every
// process in it: a namespace of another program that merely shares the
// two letters (here fl-vpn433, with a process in it) went with the lab.
// The test runs in a mount namespace of its own with a private
// /run/netns, so no namespace of the host's, or of another run, is seen.
func TestLabDownLeavesForeignNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	holdLabLock(t)
	sh := `set -u
mkdir -p /run/netns && mount -t tmpfs collide /run/netns || exit 3
ip netns add fl-vpn433 || exit 3
ip netns add fl-lb1 || exit 3
ip netns exec fl-vpn433 sleep 600 &
pid=$!
sleep 0.2
LAB_DIR="$1" FULCRUM_LAB_LOCKED=1 ./lab/lab.sh down >/dev/null 2>&1
echo "netns: $(ip netns list | awk '{print $1}' | sort | tr '\n' ' ')"
if kill -0 $pid 2>/dev/null; then echo "process: alive"; else echo "process: killed"; fi
kill $pid 2>/dev/null
ip netns del fl-vpn433 2>/dev/null
ip netns del fl-lb1 2>/dev/null
exit 0`
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "bash", "-c", sh, "sh", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("harness: %v: %s", err, out)
	}
	got := string(out)
	if strings.Contains(got, "fl-lb1") {
		t.Fatalf("harness: lab.sh down left the lab's own fl-lb1: %q", got)
	}
	if !strings.Contains(got, "netns: fl-vpn433 ") {
		t.Errorf("lab.sh down deleted a namespace that is not the lab's (fl-vpn433): %q", got)
	}
	if !strings.Contains(got, "process: alive") {
		t.Errorf("lab.sh down killed a process in a namespace that is not the lab's: %q", got)
	}
}
