package bgp

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

// notOnHost is an address of TEST-NET-2 that no interface of this host
// has (checked): like dataplane.lb_ipv4, which fulcrum run puts on its
// exception tap only after CheckListen has run.
func notOnHost(t *testing.T) string {
	t.Helper()
	const a = "198.51.100.77"
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ad := range addrs {
		if p, err := netip.ParsePrefix(ad.String()); err == nil && p.Addr() == netip.MustParseAddr(a) {
			t.Skipf("%s is on this host", a)
		}
	}
	return a
}

// TestCheckListenAddressNotYetOnHost: bgp.listen_addresses naming
// the LB's own address (dataplane.lb_ipv4, which the daemon puts on its
// exception tap after the EAL starts) is a configuration GoBGP runs:
// GoBGP binds after the tap has the address. CheckListen runs before the
// tap exists, and must refuse only a port another program holds, not an
// address the host has not got yet.
func TestCheckListenAddressNotYetOnHost(t *testing.T) {
	a := notOnHost(t)
	free, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	c := validConfig()
	c.ListenPort, c.ListenAddresses = port, []string{a}
	if err := CheckListen(c); err != nil {
		t.Errorf("listen_addresses [%s] (not on the host yet), port %d free: %v, want nil", a, port, err)
	}
	// The port held on the wildcard is still found for that address.
	other, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c.ListenPort = other.Addr().(*net.TCPAddr).Port
	if err := CheckListen(c); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("listen_addresses [%s], port %d held on 0.0.0.0: %v, want an in-use error", a, c.ListenPort, err)
	}
}
