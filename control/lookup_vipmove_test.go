package control

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
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
