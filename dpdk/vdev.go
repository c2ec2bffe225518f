//go:build dpdk

package dpdk

/*
#include <rte_bus_vdev.h>
#include "fulcrum_dpdk.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// VdevInit creates a virtual device at run time, as --vdev would at
// start (rte_vdev_init): name selects the driver by prefix
// ("net_tap0", "net_ring_x"), args are its devargs
// ("iface=fulcrum0,mac=02:00:5e:00:53:01"). Find the new port with
// PortByName(name).
func VdevInit(name, args string) error {
	cn, ca := C.CString(name), C.CString(args)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(ca))
	if ret := C.rte_vdev_init(cn, ca); ret != 0 {
		return fmt.Errorf("vdev %s,%s: %w", name, args, errno(ret))
	}
	return nil
}

// VdevUninit removes a virtual device made by VdevInit or --vdev,
// closing its port; stop the port first.
func VdevUninit(name string) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	if ret := C.rte_vdev_uninit(cn); ret != 0 {
		return fmt.Errorf("vdev %s: uninit: %w", name, errno(ret))
	}
	return nil
}

// RingPair is two net_ring ports wired back to back
// (rte_eth_from_rings): what A sends on tx queue i, B receives on rx
// queue i, and the other way round. Tests use it as a cable between the
// dataplane's port and a test port. The rings pass mbuf pointers, so the
// receiver gets the very mbufs that were sent; the byte counters stay
// at 0 on DPDK 22.11's net_ring.
type RingPair struct {
	A, B         uint16
	nameA, nameB string
	queues       int
}

// NewRingPair creates the ports "net_ring_"+nameA and "net_ring_"+nameB
// (rte_eth_from_rings adds the prefix), each with queues rx/tx queue
// pairs (at most 16) and rings of ringSize mbufs. The names also name
// the rings (nameA_<queue>): keep them under 24 bytes.
func NewRingPair(nameA, nameB string, queues, ringSize int) (*RingPair, error) {
	if queues < 1 || ringSize < 1 {
		return nil, fmt.Errorf("ring pair %s/%s: %d queues of %d: want at least 1", nameA, nameB, queues, ringSize)
	}
	ca, cb := C.CString(nameA), C.CString(nameB)
	defer C.free(unsafe.Pointer(ca))
	defer C.free(unsafe.Pointer(cb))
	var a, b C.uint16_t
	if ret := C.fl_ring_pair(ca, cb, C.uint(queues), C.uint(ringSize), C.SOCKET_ID_ANY, &a, &b); ret != 0 {
		return nil, fmt.Errorf("ring pair %s/%s: %w", nameA, nameB, errno(ret))
	}
	return &RingPair{A: uint16(a), B: uint16(b), nameA: nameA, nameB: nameB, queues: queues}, nil
}

// Free removes both ports and their rings. Stop the ports first and
// drain them: mbufs still in the rings are not freed.
func (r *RingPair) Free() error {
	var errs []error
	for _, p := range []uint16{r.A, r.B} {
		name, err := PortName(p)
		if err == nil {
			err = VdevUninit(name)
		}
		errs = append(errs, err)
	}
	ca, cb := C.CString(r.nameA), C.CString(r.nameB)
	defer C.free(unsafe.Pointer(ca))
	defer C.free(unsafe.Pointer(cb))
	C.fl_ring_pair_free(ca, cb, C.uint(r.queues))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ring pair %s/%s: %w", r.nameA, r.nameB, err)
	}
	return nil
}
