package exception

import (
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestResolverSuppressedClaimReported: a claim at another MAC within a minute
// of the last warning is counted, but the count is written only with the
// next claim after the minute: a station that claims the gateway once,
// 30 s after a router's MAC change was warned of, is never in the log.
// (The minute is 2 s here.)
func TestResolverSuppressedClaimReported(t *testing.T) {
	was := claimLogEvery
	claimLogEvery = 2 * time.Second // the minute, shortened
	t.Cleanup(func() { claimLogEvery = was })
	l, warns := claimedLAN(t, "y9cl")
	wait := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	a, b := [6]byte{2, 0, 0, 0, 0, 0x61}, [6]byte{2, 0, 0, 0, 0, 0x62}
	l.send(t, arp(1, a, a, l.gwAddr, l.lbAddr))
	wait("first claim warned", func() bool { return warns.Load() == 1 })
	l.send(t, arp(1, b, b, l.gwAddr, l.lbAddr))
	wait("second claim seen", func() bool {
		m, st, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
		return ok && m == b && st&netlink.NUD_STALE == 0
	})
	deadline := time.Now().Add(claimLogEvery + 5*time.Second)
	for warns.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the claim at %x, %v after the last warning, never written (%d warnings)", b, claimLogEvery+5*time.Second, warns.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
