package bgp

import (
	"context"
	"net"
	"strings"
	"testing"
)

// TestListenPortInUseNamesKey: listen_port taken by another program
// (bird, or a second Fulcrum, on 179): Start fails, and its error must
// name the collision and the key to change. GoBGP's "bind: address
// already in use" named neither listen_port nor listen_addresses, and
// fulcrum run reports it only after the dataplane forwards and systemd
// was told READY.
func TestListenPortInUseNamesKey(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := other.Addr().(*net.TCPAddr).Port
	c := validConfig()
	c.ListenPort = port
	c.ListenAddresses = []string{"127.0.0.1"}
	s, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	err = s.Start(context.Background())
	if err == nil {
		t.Fatalf("Start with listen_port %d taken: no error", port)
	}
	if !strings.Contains(err.Error(), "listen_port") {
		t.Errorf("Start with listen_port %d taken: %q names no key to change (listen_port)", port, err)
	}
}

// CheckListen finds a taken listen_port before the daemon sets anything
// up, binding as GoBGP does: a port another program holds on the address
// (or its family's wildcard) is named with its key; a free one passes;
// an IPv4 wildcard held elsewhere does not stop an IPv6-only listener.
func TestCheckListenBeforeStart(t *testing.T) {
	other, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := other.Addr().(*net.TCPAddr).Port
	cfg := func(addrs ...string) Config {
		c := validConfig()
		c.ListenPort, c.ListenAddresses = port, addrs
		return c
	}
	for _, addrs := range [][]string{{"127.0.0.1"}, nil} {
		err := CheckListen(cfg(addrs...))
		if err == nil || !strings.Contains(err.Error(), "listen_port") {
			t.Errorf("listen_addresses %v, port %d held on 0.0.0.0 by another program: %v, want an error naming listen_port", addrs, port, err)
		}
	}
	if l6, err := net.Listen("tcp6", "[::1]:0"); err == nil { // the host has IPv6
		l6.Close()
		if err := CheckListen(cfg("::")); err != nil {
			t.Errorf("listen_addresses [::] (IPv6-only, as GoBGP binds it), port held on IPv4 only: %v", err)
		}
	}
	free, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	c := validConfig()
	c.ListenPort, c.ListenAddresses = freePort, []string{"127.0.0.1"}
	if err := CheckListen(c); err != nil {
		t.Errorf("a free port: %v", err)
	}
	c.ListenPort, c.ListenAddresses = 0, nil
	if err := CheckListen(c); err != nil {
		t.Errorf("listen_port 0 (not listening): %v", err)
	}
}
