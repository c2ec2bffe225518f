package control

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// A static next_hop_mac set by one reload and removed by a later one
// (the gateways unchanged) hands the next hop back to the resolver. While
// the static MAC was in force every resolver answer was ignored
// (SetNextHop returns early; Gateways() asked it for nothing), so the
// gateway MAC the plane still holds is the one resolved before the static
// MAC was set, however long ago. The snapshot the second reload publishes
// must not send the tunnels to that MAC: as after a reload that changes a
// gateway (nexthop.go: "never sent to the old one"), the family is
// unresolved until the resolver answers again, which GatewaysChanged asks
// it to do at once.
func TestStaticMACRemovedDoesNotReviveOldResolution(t *testing.T) {
	f := newReloadFixture(t) // gateway_ipv4 resolved to gwMAC4
	withStatic, err := config.Parse([]byte(edit(reloadBase, "dataplane", "next_hop_mac", `"02:00:00:00:00:99"`)), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Apply(withStatic); err != nil {
		t.Fatal(err)
	}
	if s := f.send(web, 10); !s.tx || [6]byte(s.eth.DstMAC) != newMAC {
		t.Fatalf("with the static MAC: tx %v", s.tx)
	}
	// What the resolver does while the static MAC is in force: it is
	// asked for no gateway and publishes that; an answer for the
	// gateway (the router replaced: a new MAC) is not taken either.
	f.plane.SetNextHop(netip.Addr{}, netip.Addr{}, dataplane.NextHop{})
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: newMAC2, MAC6: newMAC2, Has4: true, Has6: true})

	orig, err := config.Parse([]byte(reloadBase), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Apply(orig); err != nil {
		t.Fatal(err)
	}
	if s := f.send(web, 10); s.tx && [6]byte(s.eth.DstMAC) == gwMAC4 {
		t.Errorf("after removing next_hop_mac: sent to %v, the MAC gateway_ipv4 had before the static MAC was set (never re-resolved since); want the family unresolved until the resolver answers", macOf(gwMAC4))
	}
}
