//go:build dpdk

package dpdk

/*
#include "fulcrum_dpdk.h"
*/
import "C"

import (
	"unsafe"

	"github.com/yerden/go-dpdk/mbuf"
)

// Mbuf is one DPDK packet buffer (struct rte_mbuf). It lives in a
// mempool in C memory; Go only ever holds pointers to it. Its methods
// read and write the C struct in place at offsets the C compiler
// computed (fulcrum_dpdk.h), so per-packet work makes no cgo call and
// no allocation.
//
// Length-changing methods follow rte_pktmbuf_prepend/adj/append/trim
// but return false, leaving the mbuf untouched, where DPDK would return
// NULL or -1.
type Mbuf C.struct_rte_mbuf

// Field offsets in struct rte_mbuf.
const (
	offBufAddr    = C.FL_MBUF_BUF_ADDR
	offDataOff    = C.FL_MBUF_DATA_OFF
	offNbSegs     = C.FL_MBUF_NB_SEGS
	offPort       = C.FL_MBUF_PORT
	offOlFlags    = C.FL_MBUF_OL_FLAGS
	offPacketType = C.FL_MBUF_PACKET_TYPE
	offPktLen     = C.FL_MBUF_PKT_LEN
	offDataLen    = C.FL_MBUF_DATA_LEN
	offRSS        = C.FL_MBUF_RSS
	offBufLen     = C.FL_MBUF_BUF_LEN
)

// Where cgo sees a field by name, its offset must agree with the C
// compiler's: these fail to compile (constant index out of range)
// otherwise.
var (
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_rte_mbuf{}.buf_addr)-offBufAddr]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_rte_mbuf{}.data_off)-offDataOff]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_rte_mbuf{}.nb_segs)-offNbSegs]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_rte_mbuf{}.port)-offPort]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_rte_mbuf{}.ol_flags)-offOlFlags]
	_ = [1]struct{}{}[unsafe.Offsetof(C.struct_rte_mbuf{}.buf_len)-offBufLen]
)

// Headroom is RTE_PKTMBUF_HEADROOM, the room a freshly allocated or
// received mbuf has in front of its data, where encapsulation
// prepends its outer headers.
const Headroom = C.FL_HEADROOM

// olFlagRSSHash is RTE_MBUF_F_RX_RSS_HASH: hash.rss holds the NIC's hash.
const olFlagRSSHash = C.RTE_MBUF_F_RX_RSS_HASH

func (m *Mbuf) u16(off uintptr) *uint16 { return (*uint16)(unsafe.Add(unsafe.Pointer(m), off)) }
func (m *Mbuf) u32(off uintptr) *uint32 { return (*uint32)(unsafe.Add(unsafe.Pointer(m), off)) }
func (m *Mbuf) u64(off uintptr) *uint64 { return (*uint64)(unsafe.Add(unsafe.Pointer(m), off)) }

func (m *Mbuf) bufAddr() unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(m), offBufAddr))
}

// Data is the first segment's bytes, a view into the mbuf with no copy
// (len and cap are data_len). It is valid until the mbuf is sent or
// freed, or its length changes.
func (m *Mbuf) Data() []byte {
	p := unsafe.Add(m.bufAddr(), *m.u16(offDataOff))
	return unsafe.Slice((*byte)(p), *m.u16(offDataLen))
}

// DataLen is the first segment's length (data_len).
func (m *Mbuf) DataLen() int { return int(*m.u16(offDataLen)) }

// PktLen is the whole packet's length over all segments (pkt_len).
func (m *Mbuf) PktLen() int { return int(*m.u32(offPktLen)) }

// NbSegs is the number of chained segments. Fulcrum's fast path handles
// single-segment packets only: with NbSegs() > 1, Data holds just the
// first segment.
func (m *Mbuf) NbSegs() int { return int(*m.u16(offNbSegs)) }

// Headroom is the free room in front of the data (data_off).
func (m *Mbuf) Headroom() int { return int(*m.u16(offDataOff)) }

// Tailroom is the free room after the first segment's data.
func (m *Mbuf) Tailroom() int {
	return int(*m.u16(offBufLen)) - int(*m.u16(offDataOff)) - int(*m.u16(offDataLen))
}

// Port is the port the packet was received on.
func (m *Mbuf) Port() uint16 { return *m.u16(offPort) }

// OlFlags are the mbuf's offload flags (RTE_MBUF_F_*).
func (m *Mbuf) OlFlags() uint64 { return *m.u64(offOlFlags) }

// PacketType is the NIC's packet type classification (RTE_PTYPE_*), 0
// when the driver does not classify.
func (m *Mbuf) PacketType() uint32 { return *m.u32(offPacketType) }

// RSSHash is the NIC's RSS hash of the packet, if the port computed one
// (RSS on and RTE_ETH_RX_OFFLOAD_RSS_HASH supported).
func (m *Mbuf) RSSHash() (uint32, bool) {
	if *m.u64(offOlFlags)&olFlagRSSHash == 0 {
		return 0, false
	}
	return *m.u32(offRSS), true
}

// Prepend grows the packet by n bytes at the front, into the headroom
// (rte_pktmbuf_prepend). It returns false, changing nothing, when the
// headroom is smaller than n.
func (m *Mbuf) Prepend(n int) bool {
	off := m.u16(offDataOff)
	if n < 0 || n > int(*off) {
		return false
	}
	*off -= uint16(n)
	*m.u16(offDataLen) += uint16(n)
	*m.u32(offPktLen) += uint32(n)
	return true
}

// Adj removes n bytes from the front of the packet (rte_pktmbuf_adj),
// as when stripping a header. It returns false, changing nothing, when
// the first segment is shorter than n.
func (m *Mbuf) Adj(n int) bool {
	dl := m.u16(offDataLen)
	if n < 0 || n > int(*dl) {
		return false
	}
	*m.u16(offDataOff) += uint16(n)
	*dl -= uint16(n)
	*m.u32(offPktLen) -= uint32(n)
	return true
}

// Append grows the packet by n bytes at the end, into the tailroom
// (rte_pktmbuf_append). It returns false, changing nothing, when the
// tailroom is smaller than n or the packet has several segments.
func (m *Mbuf) Append(n int) bool {
	if n < 0 || n > m.Tailroom() || m.NbSegs() != 1 {
		return false
	}
	*m.u16(offDataLen) += uint16(n)
	*m.u32(offPktLen) += uint32(n)
	return true
}

// Trim removes n bytes from the end of the packet (rte_pktmbuf_trim).
// It returns false, changing nothing, when the packet is shorter than n
// or has several segments.
func (m *Mbuf) Trim(n int) bool {
	dl := m.u16(offDataLen)
	if n < 0 || n > int(*dl) || m.NbSegs() != 1 {
		return false
	}
	*dl -= uint16(n)
	*m.u32(offPktLen) -= uint32(n)
	return true
}

// SetData makes the packet exactly p, copied in after the current
// headroom, for building packets (the exception path, ICMP replies,
// tests). It returns false, changing nothing, when p does not fit or
// the packet has several segments.
func (m *Mbuf) SetData(p []byte) bool {
	if m.NbSegs() != 1 || len(p) > int(*m.u16(offBufLen))-int(*m.u16(offDataOff)) {
		return false
	}
	*m.u16(offDataLen) = uint16(len(p))
	*m.u32(offPktLen) = uint32(len(p))
	copy(m.Data(), p)
	return true
}

// Free returns the mbuf and all its segments to their pools
// (rte_pktmbuf_free). One cgo call per packet: on the fast path collect
// drops in a Burst and use FreeMbufs.
func (m *Mbuf) Free() {
	(*mbuf.Mbuf)(unsafe.Pointer(m)).PktMbufFree()
}
