//go:build dpdk

package main

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dpdk"
)

// TestTapMTUFitsAnMbuf: with dataplane.mtu above what one mbuf holds
// (jumbo frames inside the datacenter, as the README's mtu section
// describes), the exception tap and the checked VIPs' routes were given
// that MTU, so the kernel wrote frames net_tap cannot receive into one
// mbuf: net_tap drops them (only its own rx_errors, not exported) and the
// kernel's TCP (BGP with a jumbo router, checks) retransmits the same
// segment into the same black hole
// (seen in a test that wrote a 4,054-byte frame into a tap of MTU 9000: rx_errors 1, nothing sent, nothing counted).
func TestTapMTUFitsAnMbuf(t *testing.T) {
	toml := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 9000").
		Web(2).Sub("[vip.health]", `kind = "http"`, "port = 8080", `through = "tunnel"`).String()
	cfg, err := config.Parse([]byte(toml), "tapmtu.toml")
	if err != nil {
		t.Fatal(err)
	}
	room := dpdk.DefaultDataRoom - dpdk.Headroom - 14 // one mbuf's L3 payload
	ifc := exceptionIface(cfg, [6]byte{2, 0, 0, 0, 0, 1})
	if ifc.MTU > room {
		t.Errorf("exception tap MTU %d at dataplane.mtu %d: the kernel's frames of more than %d bytes do not fit an mbuf (%d of data room)", ifc.MTU, cfg.Dataplane.MTU, room+14, dpdk.DefaultDataRoom-dpdk.Headroom)
	}
	for _, r := range ifc.Routes {
		if r.MTU > room {
			t.Errorf("route %v into the tap has MTU %d, more than one mbuf holds (%d)", r.Addr, r.MTU, room)
		}
	}
	if len(ifc.Routes) == 0 {
		t.Fatal(strings.TrimSpace("no tunnel-checked route: the fixture is wrong"))
	}
}
