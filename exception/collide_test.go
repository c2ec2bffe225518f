package exception

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// TestStaleForwardRuleOfAnotherKindReplaced: README: "another rule of
// Fulcrum's at that priority, a leftover or one edited by hand, is
// replaced". A rule at priority 241 for the interface with Fulcrum's
// protocol that blackholes nothing (a "nop" someone left while debugging,
// or one narrowed to a source) has no table and no goto either, so
// noForwarding took it for its blackhole and added none: the kernel
// forwarded what the dataplane punted. After Configure, each family must
// have a blackhole for all packets arriving on the interface, and no
// other rule of Fulcrum's there.
func TestStaleForwardRuleNopReplaced(t *testing.T) { staleForwardRule(t, "nop") }

func TestStaleForwardRuleNarrowReplaced(t *testing.T) {
	staleForwardRule(t, "from", "10.0.0.0/8", "blackhole")
}

func staleForwardRule(t *testing.T, stale ...string) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("no ip(8)")
	}
	{
		{
			const ifc = "flrule433"
			ns, _ := testNetns(t, ifc)
			args := append([]string{"-n", ns, "-4", "rule", "add", "priority", "241", "iif", ifc, "protocol", "0xf1"}, stale...)
			if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
				t.Skipf("ip rule add %v: %v %s", stale, err, out)
			}
			if err := Configure(Iface{Name: ifc, MAC: [6]byte{2, 0xf1, 0, 0, 4, 33}, MTU: 1500,
				Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}}, ns); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(ip, "-n", ns, "-4", "rule", "show", "priority", "241").CombinedOutput()
			if err != nil {
				t.Fatalf("ip rule show: %v %s", err, out)
			}
			rules := strings.Split(strings.TrimSpace(string(out)), "\n")
			want := "241:\tfrom all iif " + ifc + " blackhole proto 241"
			if len(rules) != 1 || strings.TrimSpace(rules[0]) != want {
				t.Errorf("after Configure beside a stale %v rule: IPv4 rules at 241 %q, want exactly [%q]", stale, rules, want)
			}
		}
	}
}
