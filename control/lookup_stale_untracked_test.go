package control

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
)

// TestLookupStalePinUntrackedIsWhereItGoes: on a TCP VIP of a load-based
// scheduler, lookup of a flow whose pin went stale (its backend down,
// on_down = "move") answers Untracked: "where a segment that is not a SYN
// goes when no worker tracks its connection (... its entry ... went
// stale)", and fulcrumctl prints it under the stale pin. The flow's next
// segment (an ACK) must then go to that backend.
func TestLookupStalePinUntrackedIsWhereItGoes(t *testing.T) {
	toml := strings.Replace(checkedConfig("move"), "port = 80\n", "port = 80\nscheduler = \"least-conn\"\n", 1)
	f := newFixture(t, toml)
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		f.setHealth(b, true)
	}
	vip := netip.MustParseAddrPort(configtest.Web + ":80")
	be2 := f.addr("be2")
	var onBe2 []uint16
	for sp := uint16(21000); sp < 21200; sp++ {
		if f.lc.send(syn(t, sp, "S")).dst == be2 {
			onBe2 = append(onBe2, sp)
		}
	}
	if len(onBe2) < 10 {
		t.Fatalf("%d flows on be2: the test shows little", len(onBe2))
	}
	f.setHealth("be2", false)
	checked, wrong := 0, 0
	for _, sp := range onBe2 {
		res, err := f.plane.Lookup(dptest.Client, vip.Addr(), sp, 80, 6)
		if err != nil {
			t.Fatal(err)
		}
		if res.Reason != "conntrack-stale" {
			continue
		}
		checked++
		got := f.lc.send(syn(t, sp, "A")).dst
		if res.Untracked != nil && got.String() != res.Untracked.Address {
			wrong++
			if wrong <= 3 {
				t.Errorf("sport %d: lookup says a stale pin, untracked segment -> %s (%s); its next ACK went to %v",
					sp, res.Untracked.Backend, res.Untracked.Address, got)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no lookup answered conntrack-stale")
	}
	if wrong > 0 {
		t.Errorf("%d of %d stale pins: the next segment did not go where lookup's untracked answer said", wrong, checked)
	}
}
