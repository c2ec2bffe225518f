//go:build dpdk

package dpdk

/*
#include "fulcrum_dpdk.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// RSS hash functions (RTE_ETH_RSS_*), for PortConf.RSS.
const (
	// RSSIP hashes IPv4 and IPv6 source and destination addresses.
	RSSIP uint64 = C.RTE_ETH_RSS_IP
	// RSSTCP adds TCP ports (IPv4, IPv6, IPv6 with extension headers).
	RSSTCP uint64 = C.RTE_ETH_RSS_TCP
	// RSSUDP adds UDP ports.
	RSSUDP uint64 = C.RTE_ETH_RSS_UDP
	// RSSDefault keeps every packet of a flow, fragments aside, on one
	// queue and so on one lcore and its conntrack shard.
	RSSDefault = RSSIP | RSSTCP | RSSUDP
)

// Descriptor ring sizes of the skeleton sample (RX_RING_SIZE and
// TX_RING_SIZE); SetupRxQueue and SetupTxQueue round them to the port's
// limits (rte_eth_dev_adjust_nb_rx_tx_desc).
const (
	DefaultRxDesc = 1024
	DefaultTxDesc = 1024
)

// MaxPorts is RTE_MAX_ETHPORTS, the most ports one process can have.
const MaxPorts = C.RTE_MAX_ETHPORTS

func portErr(port uint16, what string, ret C.int) error {
	if ret == 0 {
		return nil
	}
	name, _ := PortName(port)
	return fmt.Errorf("port %d (%s): %s: %w", port, name, what, errno(ret))
}

// PortCount is the number of usable ports (rte_eth_dev_count_avail).
func PortCount() int { return int(C.rte_eth_dev_count_avail()) }

// Ports lists the usable port ids in order.
func Ports() []uint16 {
	var ps []uint16
	for p := C.rte_eth_find_next(0); p < C.RTE_MAX_ETHPORTS; p = C.rte_eth_find_next(p + 1) {
		ps = append(ps, uint16(p))
	}
	return ps
}

// PortByName finds a port by its device name: a vdev's name
// ("net_tap0") or a PCI address ("0000:01:00.0").
func PortByName(name string) (uint16, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var p C.uint16_t
	if ret := C.fl_port_by_name(cs, &p); ret != 0 {
		return 0, fmt.Errorf("port %q: %w", name, errno(ret))
	}
	return uint16(p), nil
}

// PortName is port's device name.
func PortName(port uint16) (string, error) {
	var buf [C.RTE_ETH_NAME_MAX_LEN]C.char
	if ret := C.fl_port_name(C.uint16_t(port), &buf[0], C.size_t(len(buf))); ret != 0 {
		return "", fmt.Errorf("port %d: name: %w", port, errno(ret))
	}
	return C.GoString(&buf[0]), nil
}

// PortSocket is the NUMA socket of port's device, or SocketAny when
// unknown (virtual devices).
func PortSocket(port uint16) int { return int(C.rte_eth_dev_socket_id(C.uint16_t(port))) }

// DevInfo is what a port can do (rte_eth_dev_info), the fields the
// dataplane sizes itself by.
type DevInfo struct {
	Driver                   string // driver name, e.g. "net_ring"
	IfIndex                  uint32 // kernel interface index, 0 if none (net_tap has one)
	MinMTU, MaxMTU           uint16
	MaxRxPktLen              uint32
	MaxRxQueues, MaxTxQueues uint16
	RxOffloadCapa            uint64 // RTE_ETH_RX_OFFLOAD_*
	TxOffloadCapa            uint64 // RTE_ETH_TX_OFFLOAD_*
	FlowTypeRSSOffloads      uint64 // RTE_ETH_RSS_* the port can hash; 0: no RSS
	RetaSize                 uint16
	HashKeySize              uint8
	RxDescMin, RxDescMax     uint16
	TxDescMin, TxDescMax     uint16
	SpeedCapa                uint32 // RTE_ETH_LINK_SPEED_* bitmap
	Socket                   int    // NUMA socket, SocketAny if unknown
}

// PortInfo reads port's capabilities.
func PortInfo(port uint16) (DevInfo, error) {
	var ci C.struct_fl_dev_info
	if ret := C.fl_dev_info_get(C.uint16_t(port), &ci); ret != 0 {
		return DevInfo{}, portErr(port, "dev info", ret)
	}
	return DevInfo{
		Driver:              C.GoString(&ci.driver_name[0]),
		IfIndex:             uint32(ci.if_index),
		MinMTU:              uint16(ci.min_mtu),
		MaxMTU:              uint16(ci.max_mtu),
		MaxRxPktLen:         uint32(ci.max_rx_pktlen),
		MaxRxQueues:         uint16(ci.max_rx_queues),
		MaxTxQueues:         uint16(ci.max_tx_queues),
		RxOffloadCapa:       uint64(ci.rx_offload_capa),
		TxOffloadCapa:       uint64(ci.tx_offload_capa),
		FlowTypeRSSOffloads: uint64(ci.flow_type_rss_offloads),
		RetaSize:            uint16(ci.reta_size),
		HashKeySize:         uint8(ci.hash_key_size),
		RxDescMin:           uint16(ci.rx_desc_min),
		RxDescMax:           uint16(ci.rx_desc_max),
		TxDescMin:           uint16(ci.tx_desc_min),
		TxDescMax:           uint16(ci.tx_desc_max),
		SpeedCapa:           uint32(ci.speed_capa),
		Socket:              int(ci.socket_id),
	}, nil
}

// MAC is an Ethernet address.
type MAC [6]byte

// String formats a as 02:00:5e:00:53:01.
func (a MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4], a[5])
}

// PortMAC is port's primary MAC address.
func PortMAC(port uint16) (MAC, error) {
	var a MAC
	if ret := C.fl_mac_get(C.uint16_t(port), (*C.uint8_t)(unsafe.Pointer(&a[0]))); ret != 0 {
		return MAC{}, portErr(port, "mac address", ret)
	}
	return a, nil
}

// PortConf is how ConfigurePort sets a port up.
type PortConf struct {
	RxQueues, TxQueues uint16
	// RSS is the hash functions wanted (RSSDefault, or 0 for none).
	// ConfigurePort keeps only those the port supports and turns RSS
	// off with one rx queue or when none is left, so one config works
	// on NICs and on virtual ports without RSS.
	RSS uint64
	// MTU, or 0 for the driver's default.
	MTU uint16
	// TxFastFree asks for RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE where the
	// port has it: faster tx, but only correct if every mbuf sent on
	// the port comes from one mempool and is never shared (refcnt 1).
	TxFastFree bool
}

// PortSetup is what ConfigurePort actually configured.
type PortSetup struct {
	RSS        uint64 // hash functions in use; 0: RSS off
	TxOffloads uint64 // RTE_ETH_TX_OFFLOAD_* enabled port-wide
}

// ConfigurePort configures a stopped port (rte_eth_dev_configure). Set
// up each queue next, then StartPort.
func ConfigurePort(port uint16, c PortConf) (PortSetup, error) {
	cc := C.struct_fl_port_conf{
		nb_rx:  C.uint16_t(c.RxQueues),
		nb_tx:  C.uint16_t(c.TxQueues),
		rss_hf: C.uint64_t(c.RSS),
		mtu:    C.uint16_t(c.MTU),
	}
	if c.TxFastFree {
		cc.tx_fast_free = 1
	}
	if ret := C.fl_port_configure(C.uint16_t(port), &cc); ret != 0 {
		return PortSetup{}, portErr(port, fmt.Sprintf("configure %d rx / %d tx queues", c.RxQueues, c.TxQueues), ret)
	}
	return PortSetup{RSS: uint64(cc.rss_hf_out), TxOffloads: uint64(cc.tx_offloads_out)}, nil
}

// SetupRxQueue sets up rx queue q of a configured port with about
// nbDesc descriptors (rounded to the port's limits; the number used is
// returned), its memory on NUMA socket socket, refilled from mp.
func SetupRxQueue(port, q, nbDesc uint16, socket int, mp *Mempool) (uint16, error) {
	n := C.uint16_t(nbDesc)
	if ret := C.fl_rx_queue_setup(C.uint16_t(port), C.uint16_t(q), &n, C.int(socket), mp.c()); ret != 0 {
		return 0, portErr(port, fmt.Sprintf("rx queue %d setup (%d descriptors, socket %d, pool %q)", q, nbDesc, socket, mp.name), ret)
	}
	return uint16(n), nil
}

// SetupTxQueue sets up tx queue q of a configured port with about
// nbDesc descriptors (rounded to the port's limits; the number used is
// returned) on NUMA socket socket.
func SetupTxQueue(port, q, nbDesc uint16, socket int) (uint16, error) {
	n := C.uint16_t(nbDesc)
	if ret := C.fl_tx_queue_setup(C.uint16_t(port), C.uint16_t(q), &n, C.int(socket)); ret != 0 {
		return 0, portErr(port, fmt.Sprintf("tx queue %d setup (%d descriptors, socket %d)", q, nbDesc, socket), ret)
	}
	return uint16(n), nil
}

// StartPort starts a port whose queues are set up.
func StartPort(port uint16) error {
	return portErr(port, "start", C.rte_eth_dev_start(C.uint16_t(port)))
}

// StopPort stops a port; no lcore may be polling it.
func StopPort(port uint16) error {
	return portErr(port, "stop", C.rte_eth_dev_stop(C.uint16_t(port)))
}

// ClosePort stops and releases a port; its id becomes invalid.
func ClosePort(port uint16) error {
	return portErr(port, "close", C.rte_eth_dev_close(C.uint16_t(port)))
}

// SetPromiscuous turns promiscuous reception on or off.
func SetPromiscuous(port uint16, on bool) error {
	if on {
		return portErr(port, "promiscuous on", C.rte_eth_promiscuous_enable(C.uint16_t(port)))
	}
	return portErr(port, "promiscuous off", C.rte_eth_promiscuous_disable(C.uint16_t(port)))
}

// Promiscuous reports whether promiscuous reception is on.
func Promiscuous(port uint16) (bool, error) {
	ret := C.rte_eth_promiscuous_get(C.uint16_t(port))
	if ret < 0 {
		return false, portErr(port, "promiscuous", ret)
	}
	return ret == 1, nil
}

// Link is a port's link state.
type Link struct {
	Up         bool
	SpeedMbps  uint32 // RTE_ETH_SPEED_NUM_*, 0 if unknown
	FullDuplex bool
	Autoneg    bool
}

// PortLink reads port's link state without waiting for negotiation.
func PortLink(port uint16) (Link, error) {
	var l C.struct_fl_link
	if ret := C.fl_link_get(C.uint16_t(port), &l); ret != 0 {
		return Link{}, portErr(port, "link", ret)
	}
	return Link{Up: l.up != 0, SpeedMbps: uint32(l.speed), FullDuplex: l.full_duplex != 0, Autoneg: l.autoneg != 0}, nil
}

// Stats are a port's basic counters (rte_eth_stats) since start or
// the last ResetStats. Which ones a driver fills varies; virtual ports
// often leave the byte counters at 0.
type Stats struct {
	IPackets, OPackets uint64
	IBytes, OBytes     uint64
	IMissed            uint64 // dropped by the NIC: rx ring full (lcore too slow)
	IErrors, OErrors   uint64
	RxNoMbuf           uint64 // rx failed for want of an mbuf (pool too small)
}

// PortStats reads port's basic counters.
func PortStats(port uint16) (Stats, error) {
	var s C.struct_fl_stats
	if ret := C.fl_stats_get(C.uint16_t(port), &s); ret != 0 {
		return Stats{}, portErr(port, "stats", ret)
	}
	return Stats{
		IPackets: uint64(s.ipackets), OPackets: uint64(s.opackets),
		IBytes: uint64(s.ibytes), OBytes: uint64(s.obytes),
		IMissed: uint64(s.imissed), IErrors: uint64(s.ierrors), OErrors: uint64(s.oerrors),
		RxNoMbuf: uint64(s.rx_nombuf),
	}, nil
}

// ResetStats zeroes port's basic counters.
func ResetStats(port uint16) error {
	return portErr(port, "stats reset", C.rte_eth_stats_reset(C.uint16_t(port)))
}

// XStat is one extended counter of a port.
type XStat struct {
	Name  string
	Value uint64
}

// PortXStats reads all of port's extended counters (driver-specific
// names such as "rx_good_packets", "rx_q0_packets").
func PortXStats(port uint16) ([]XStat, error) {
	cp := C.uint16_t(port)
	n := C.rte_eth_xstats_get_names(cp, nil, 0)
	if n < 0 {
		return nil, portErr(port, "xstats names", n)
	}
	if n == 0 {
		return nil, nil
	}
	names := (*C.struct_rte_eth_xstat_name)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_rte_eth_xstat_name{}))))
	vals := (*C.struct_rte_eth_xstat)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_rte_eth_xstat{}))))
	defer C.free(unsafe.Pointer(names))
	defer C.free(unsafe.Pointer(vals))
	if names == nil || vals == nil {
		return nil, fmt.Errorf("port %d: xstats: calloc failed", port)
	}
	nn := C.rte_eth_xstats_get_names(cp, names, C.uint(n))
	if nn < 0 {
		return nil, portErr(port, "xstats names", nn)
	}
	nv := C.rte_eth_xstats_get(cp, vals, C.uint(n))
	if nv < 0 {
		return nil, portErr(port, "xstats", nv)
	}
	if nv > n || nn > n {
		return nil, fmt.Errorf("port %d: xstats: count changed from %d to %d/%d", port, n, nn, nv)
	}
	ns := unsafe.Slice(names, int(nn))
	vs := unsafe.Slice(vals, int(nv))
	out := make([]XStat, 0, len(vs))
	for _, v := range vs {
		if int(v.id) >= len(ns) {
			continue
		}
		out = append(out, XStat{Name: C.GoString(&ns[v.id].name[0]), Value: uint64(v.value)})
	}
	return out, nil
}

// ResetXStats zeroes port's extended counters.
func ResetXStats(port uint16) error {
	return portErr(port, "xstats reset", C.rte_eth_xstats_reset(C.uint16_t(port)))
}
