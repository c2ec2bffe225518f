//go:build linux

package main

import (
	"net"
	"net/netip"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOwnedBoundToDevice: a connection whose server socket is bound to a
// device (SO_BINDTODEVICE; every socket of a service in a VRF is bound to
// the VRF device) was owned by no one for the agent's lookup, which asked
// with no device: each of its packets naming a second chance was
// forwarded away and reset. Asked with the device the packet arrives on
// (diagIf), the bound socket is found, and so is an unbound one.
func TestOwnedBoundToDevice(t *testing.T) {
	needNetns(t)
	ns := oneNetns(t, "fdiagif")
	ipCmd(t, "-n", ns, "addr", "add", "10.123.0.1/32", "dev", "lo")
	for _, bound := range []bool{false, true} {
		var owned, ownedAny bool
		err := inNetns(ns, func() error {
			lc := net.ListenConfig{}
			if bound {
				lc.Control = func(_, _ string, c syscall.RawConn) error {
					var serr error
					c.Control(func(fd uintptr) { serr = unix.BindToDevice(int(fd), "lo") })
					return serr
				}
			}
			ln, err := lc.Listen(t.Context(), "tcp4", "10.123.0.1:8080")
			if err != nil {
				return err
			}
			defer ln.Close()
			cl, err := net.Dial("tcp4", "10.123.0.1:8080")
			if err != nil {
				return err
			}
			defer cl.Close()
			sc, err := ln.Accept()
			if err != nil {
				return err
			}
			defer sc.Close()
			d, err := openSockDiag()
			if err != nil {
				return err
			}
			defer d.close()
			dif, err := diagIf("lo")
			if err != nil {
				return err
			}
			client := netip.MustParseAddrPort(cl.LocalAddr().String())
			if owned, err = d.owned(netip.MustParseAddrPort("10.123.0.1:8080"), client, false, dif); err != nil {
				return err
			}
			ownedAny, err = d.owned(netip.MustParseAddrPort("10.123.0.1:8080"), client, false, 0)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !owned {
			t.Errorf("bound to the device %v: the established server socket is not owned when asked with the device", bound)
		}
		if ownedAny == bound {
			t.Errorf("bound to the device %v: asked with no device, owned %v (the kernel's lookup matches only unbound sockets so)", bound, ownedAny)
		}
	}
}

// TestDiagIfMaster: the lookups ask with the TUN's master device (its VRF)
// when it has one, else with the TUN itself; read over rtnetlink in the
// caller's namespace.
func TestDiagIfMaster(t *testing.T) {
	needNetns(t)
	ns := oneNetns(t, "fdiagm")
	ipCmd(t, "-n", ns, "link", "add", "fd0", "type", "veth", "peer", "name", "fd1")
	ipCmd(t, "-n", ns, "link", "add", "fbr0", "type", "bridge")
	var alone, enslaved, d0, br uint32
	read := func(v *uint32) {
		t.Helper()
		if err := inNetns(ns, func() error {
			var err error
			*v, err = diagIf("fd0")
			if err != nil {
				return err
			}
			a, err := net.InterfaceByName("fd0")
			if err != nil {
				return err
			}
			b, err := net.InterfaceByName("fbr0")
			if err != nil {
				return err
			}
			d0, br = uint32(a.Index), uint32(b.Index)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	read(&alone)
	ipCmd(t, "-n", ns, "link", "set", "fd0", "master", "fbr0")
	read(&enslaved)
	if alone != d0 || enslaved != br {
		t.Fatalf("diagIf: alone %d (want the device's %d), enslaved %d (want the master's %d)", alone, d0, enslaved, br)
	}
	if _, err := diagIf("no-such-device0"); err == nil {
		t.Fatal("diagIf of a missing device: no error")
	}
}
