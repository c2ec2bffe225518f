package control

// A lost next hop's grace across a pause of the whole process.

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// step runs Run's once-a-second step received d after the last one.
func (f *fixture) step(d time.Duration) {
	f.advance(d)
	f.plane.mu.Lock()
	defer f.plane.mu.Unlock()
	f.plane.holdGraceAcrossPauseLocked(f.plane.now())
	f.plane.announceAfterGraceLocked()
}

func gatewayedBase(t *testing.T) *fixture {
	f := newFixture(t, strings.Replace(baseConfig, `next_hop_mac = "02:00:00:00:00:fe"`, `gateway_ipv4 = "192.0.2.1"`, 1))
	f.step(0)
	return f
}

// The IPv4 next hop is lost, 5 s pass, and the process is stopped for a
// minute (SIGSTOP, a VM paused for migration). The minute does not count
// toward the grace: the address stays announced at the first step after
// the pause, and is withdrawn once the process has run 15 s without the
// next hop. Counting the pause withdrew it at once, while the resolver
// (which holds an entry that failed across a pause) had not looked again.
func TestNextHopGraceSkipsAPause(t *testing.T) {
	f := gatewayedBase(t)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	if len(lastAnnounced(*calls)) != 1 {
		t.Fatalf("not announced: %v", *calls)
	}
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	for range 5 {
		f.step(time.Second)
	}
	f.step(time.Minute)
	if got := lastAnnounced(*calls); len(got) != 1 {
		t.Fatalf("next hop lost 5 s before a 1 min pause: withdrawn (%v) at the first step after it", got)
	}
	ran := 6 * time.Second // 5 steps and the second before the pause
	for ran < NextHopGrace-time.Second {
		f.step(time.Second)
		ran += time.Second
	}
	if got := lastAnnounced(*calls); len(got) != 1 {
		t.Fatalf("next hop lost for %v of running time: withdrawn (%v) before the grace", ran, got)
	}
	f.step(time.Second)
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("next hop lost for %v of running time (and a 1 min pause): still announced %v", ran+time.Second, got)
	}
}

// A loss whose grace ended before the pause stays acted on: the address,
// withdrawn, is not announced again by the pause, nor by a rebuild after.
func TestNextHopGraceEndedBeforePauseStaysWithdrawn(t *testing.T) {
	f := gatewayedBase(t)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	for range int(NextHopGrace/time.Second) + 1 {
		f.step(time.Second)
	}
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Fatalf("not withdrawn after the grace: %v", got)
	}
	f.step(time.Minute)
	f.rebuild()
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("next hop lost for the grace, then a pause: announced again %v", got)
	}
}

// Steps late by up to stepSlack are no pause: the grace ends on time.
func TestNextHopGraceLateStepsNoPause(t *testing.T) {
	f := gatewayedBase(t)
	calls := f.recordAnnounced()
	f.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	f.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	for range int(NextHopGrace / (2 * time.Second)) {
		f.step(2 * time.Second)
	}
	f.step(2 * time.Second)
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("next hop lost for %v in steps 2 s apart: still announced %v", 2*time.Second*time.Duration(int(NextHopGrace/(2*time.Second))+1), got)
	}
}
