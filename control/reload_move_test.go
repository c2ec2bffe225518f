package control

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/flow"
)

// swapAddrs: VIPs "blue" and "green", each with its own two backends
// (its own servers), both checked; blue at blueAt, green at greenAt.
func swapAddrs(blueAt, greenAt string) string {
	return configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", "panic_threshold = 0").
		Section("health", `kind = "tcp"`).
		VIP("blue", blueAt, 80).
		Backend("be1", "10.0.1.1").Backend("be2", "10.0.1.2").
		VIP("green", greenAt, 80).
		Backend("be1", "10.0.2.1").Backend("be2", "10.0.2.2").
		String()
}

// A blue/green switch by address: the two VIPs swap addresses in one
// reload, each keeping its name and its backends (the same servers, at
// the same addresses, checked at the same port). Every backend was
// checked up. A reload that moves one VIP to a new address keeps its
// backends' health (syncBackends matches by VIP and backend name); a swap
// must too: no server changed, and a fresh instance started on the final
// file would route every backend like up.
func TestVIPAddressSwapKeepsBackendHealth(t *testing.T) {
	f := newFixture(t, swapAddrs("203.0.113.7", "203.0.113.8"))
	for _, v := range []string{"blue", "green"} {
		for _, b := range []string{"be1", "be2"} {
			if err := f.plane.SetHealth(v, b, true, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.rebuild()
	f.apply(swapAddrs("203.0.113.8", "203.0.113.7"))
	for _, v := range []struct{ addr, vip string }{{"203.0.113.7", "green"}, {"203.0.113.8", "blue"}} {
		k := flow.VIPKey{Addr: netip.MustParseAddr(v.addr), Port: 80, Proto: 6}
		for _, name := range []string{"be1", "be2"} {
			b := pubByKey(t, f.shared, k, name)
			if b.Weight == 0 || b.Unhealthy {
				t.Errorf("%s (%s at %s) backend %s %v after the address swap: weight %d unhealthy %v; want serving (checked up, same server)",
					v.vip, v.vip, v.addr, name, b.Addr, b.Weight, b.Unhealthy)
			}
		}
	}
	for _, vs := range f.plane.Status(false).VIPs {
		if !vs.Serving {
			t.Errorf("VIP %s at %s serves no new flow after the swap", vs.Name, vs.Address)
		}
	}
}

// The other blue/green switch by address: the live VIP "web" is retired
// and the staging VIP "web-v2" moves onto its address, in one reload.
// web-v2 keeps its name and its backends (the same servers, checked up
// at the same port); only its address changed. A reload that moves a VIP
// to a free address keeps its backends' health; moving it to the address
// of a VIP removed in the same reload must too.
func TestVIPMovedOntoRetiredVIPAddressKeepsHealth(t *testing.T) {
	before := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", "panic_threshold = 0").
		Section("health", `kind = "tcp"`).
		VIP("web", "203.0.113.7", 80).
		Backend("be1", "10.0.1.1").Backend("be2", "10.0.1.2").
		VIP("web-v2", "203.0.113.8", 80).
		Backend("be1", "10.0.2.1").Backend("be2", "10.0.2.2").
		String()
	after := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", "panic_threshold = 0").
		Section("health", `kind = "tcp"`).
		VIP("web-v2", "203.0.113.7", 80).
		Backend("be1", "10.0.2.1").Backend("be2", "10.0.2.2").
		String()
	f := newFixture(t, before)
	for _, v := range []string{"web", "web-v2"} {
		for _, b := range []string{"be1", "be2"} {
			if err := f.plane.SetHealth(v, b, true, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.rebuild()
	f.apply(after)
	k := flow.VIPKey{Addr: netip.MustParseAddr("203.0.113.7"), Port: 80, Proto: 6}
	for _, name := range []string{"be1", "be2"} {
		if b := pubByKey(t, f.shared, k, name); b.Weight == 0 || b.Unhealthy {
			t.Errorf("web-v2 backend %s %v after moving onto the retired VIP's address: weight %d unhealthy %v; want serving (checked up, same server)",
				name, b.Addr, b.Weight, b.Unhealthy)
		}
	}
	if st := f.plane.Status(false); len(st.VIPs) != 1 || !st.VIPs[0].Serving {
		t.Errorf("web-v2 serves no new flow after the move: %+v", st.VIPs)
	}
}
