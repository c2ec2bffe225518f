package control

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
)

// A reload adds an exact-port UDP VIP on the address of an every-port UDP
// VIP. A flow to that port, pinned by the every-port VIP to one of its
// backends, now belongs to the new VIP: its next datagram goes to one of
// the new VIP's backends (the worker's pin check refuses a backend of
// another VIP). Lookup must say so, not name the old VIP's backend as the
// flow's conntrack pin.
func TestLookupPinOfAnotherVIPIsNotTheFlowsBackend(t *testing.T) {
	anyVIP := baseConfig + `
[[vip]]
name = "any"
address = "203.0.113.9"
port = 0
protocol = "udp"
  [[vip.backend]]
  name = "a1"
  address = "10.0.4.1"
  [[vip.backend]]
  name = "a2"
  address = "10.0.4.2"
`
	f := newFixture(t, anyVIP)
	client, vip := netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("203.0.113.9")
	dg := dptest.UDP(t, 4000, netip.AddrPortFrom(vip, 5004))
	first := f.lc.send(dg).dst
	if !strings.HasPrefix(first.String(), "10.0.4.") {
		t.Fatalf("first datagram went to %v", first)
	}
	withRTP := anyVIP + `
[[vip]]
name = "rtp"
address = "203.0.113.9"
port = 5004
protocol = "udp"
  [[vip.backend]]
  name = "r1"
  address = "10.0.6.1"
  [[vip.backend]]
  name = "r2"
  address = "10.0.6.2"
`
	cfg, err := config.Parse([]byte(withRTP), "reload.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	res, err := f.plane.Lookup(client, vip, 4000, 5004, 17)
	if err != nil {
		t.Fatal(err)
	}
	next := f.lc.send(dg).dst // where the flow's next datagram really goes
	if !strings.HasPrefix(next.String(), "10.0.6.") {
		t.Fatalf("next datagram went to %v, want a backend of rtp", next)
	}
	if res.VIP != "rtp" || res.Reason == "conntrack" && res.Address != next.String() {
		t.Errorf("lookup after the reload: VIP %q, reason %q, backend %s (%s); the flow's next datagram went to %v",
			res.VIP, res.Reason, res.Backend, res.Address, next)
	}
}

// TestLookupPickerUntrackedSegment: on a TCP VIP of a load-based
// scheduler, a segment of a connection no worker tracks goes to the
// backend of its Maglev table slot, every time; lookup names it (it
// named none: only the scheduler's candidates). UDP has no such rule.
func TestLookupPickerUntrackedSegment(t *testing.T) {
	f := newFixture(t, strings.Replace(baseConfig, "port = 80\n", "port = 80\nscheduler = \"least-conn\"\n", 1))
	vip := netip.MustParseAddrPort(configtest.Web + ":80")
	seen := map[netip.Addr]bool{}
	for sp := uint16(7000); sp < 7040; sp++ {
		res, err := f.plane.Lookup(dptest.Client, vip.Addr(), sp, 80, 6)
		if err != nil {
			t.Fatal(err)
		}
		got := f.lc.send(dptest.TCP(t, sp, vip, "A")).dst
		if again := f.lc.send(dptest.TCP(t, sp, vip, "A")).dst; got != again {
			t.Fatalf("untracked segment went to %v then %v", got, again)
		}
		seen[got] = true
		if res.Reason != "scheduler" || res.Untracked == nil || f.addr(res.Untracked.Backend) != got || res.Untracked.Address != got.String() {
			t.Fatalf("sport %d: lookup %s, untracked %+v; the connection's segments all go to %v", sp, res.Reason, res.Untracked, got)
		}
	}
	if len(seen) < 2 {
		t.Errorf("40 tuples reached %d backend(s): the test shows little", len(seen))
	}
	if res, err := f.plane.Lookup(dptest.Client, vip.Addr(), 7000, 80, 17); err != nil || res.Untracked != nil {
		t.Errorf("UDP lookup on a TCP-only address: %+v, %v; want no untracked answer", res.Untracked, err)
	}
}
