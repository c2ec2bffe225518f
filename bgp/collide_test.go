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
