package main

import (
	"encoding/binary"
	"fmt"
	"net"

	"syscall"
)

// diagIf is the interface index the socket lookups ask with
// (inet_diag_sockid.idiag_if): the stack's own view of a packet the agent
// writes into the TUN device. With 0 ("any device") the kernel's lookup
// matches only sockets bound to no device, so the connections of a
// service bound to a device or living in a VRF (whose sockets are bound
// to the VRF device) were owned by no one, and every packet of theirs that
// named a second chance was forwarded away and reset. The TUN's VRF (its
// master device) when it has one, else the TUN itself: an unbound socket
// matches either, a socket bound to that device matches too, and a socket
// bound to another device, which the stack would not deliver the packet
// to either, does not.
func diagIf(tun string) (uint32, error) {
	ifc, err := net.InterfaceByName(tun)
	if err != nil {
		return 0, err
	}
	master, err := masterOf(ifc.Index)
	if err != nil {
		return 0, err
	}
	if master != 0 {
		return master, nil
	}
	return uint32(ifc.Index), nil
}

// masterOf is the index of the device's master (IFLA_MASTER: a VRF, a
// bridge, a bond), or 0 when it has none. Read over rtnetlink, which
// answers for the network namespace of the calling thread (sysfs shows the
// namespace it was mounted in).
func masterOf(index int) (uint32, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return 0, fmt.Errorf("rtnetlink: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return 0, fmt.Errorf("rtnetlink: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		// struct ifinfomsg: family, pad, type (2), index (4), ...
		if int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))) != index {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return 0, fmt.Errorf("rtnetlink: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type == syscall.IFLA_MASTER && len(a.Value) >= 4 {
				return binary.NativeEndian.Uint32(a.Value), nil
			}
		}
		return 0, nil
	}
	return 0, fmt.Errorf("rtnetlink: no device of index %d", index)
}
