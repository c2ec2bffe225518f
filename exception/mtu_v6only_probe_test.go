package exception

import (
	"net/netip"
	"testing"
)

// Was a defect (fixed; the test guards it): config accepted
// dataplane.mtu down to 576 with lb_ipv6 set, and Linux refuses (and
// removes) IPv6 addresses on a link below 1280, so the daemon could not
// start. config refuses it now, and Configure refuses it before it
// changes anything.
func TestV6OnlyProbeConfigureMTUBelow1280KeepsIPv6(t *testing.T) {
	const ifc = "flv6mtu1"
	ns, h := testNetns(t, ifc)
	mac := [6]byte{2, 0xf1, 0, 0, 0, 7}
	want := "2001:db8:100::10/64"
	err := Configure(Iface{Name: ifc, MAC: mac, MTU: 1000, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24"), netip.MustParsePrefix(want)}}, ns)
	if err == nil {
		t.Fatal("Configure with mtu 1000 and an IPv6 address: accepted")
	}
	link, err := h.LinkByName(ifc)
	if err != nil {
		t.Fatal(err)
	}
	if link.Attrs().MTU == 1000 {
		t.Errorf("refused, yet the MTU was set to 1000")
	}
}

// A reload lowering mtu from 1500 to 1000: the kernel drops the tap's
// IPv6 addresses as the MTU goes below 1280.
func TestV6OnlyProbeReloadMTUBelow1280KeepsIPv6(t *testing.T) {
	const ifc = "flv6mtu2"
	ns, h := testNetns(t, ifc)
	mac := [6]byte{2, 0xf1, 0, 0, 0, 8}
	want := "2001:db8:100::10/64"
	addrs := []netip.Prefix{netip.MustParsePrefix(want)}
	if err := Configure(Iface{Name: ifc, MAC: mac, MTU: 1500, Addrs: addrs}, ns); err != nil {
		t.Fatal(err)
	}
	err := Configure(Iface{Name: ifc, MAC: mac, MTU: 1000, Addrs: addrs}, ns)
	link, lerr := h.LinkByName(ifc)
	if lerr != nil {
		t.Fatal(lerr)
	}
	got := globalAddrs(t, h, link)
	if err == nil || len(got) != 1 || got[0] != want || link.Attrs().MTU != 1500 {
		t.Errorf("reload to mtu 1000: Configure err %v, addresses %v, mtu %d; want refused, [%s], 1500", err, got, link.Attrs().MTU, want)
	}
}
