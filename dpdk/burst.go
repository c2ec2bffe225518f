//go:build dpdk

package dpdk

/*
#include "fulcrum_dpdk.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/fulcrumlb/fulcrum/conntrack"
)

// Burst sizes. 32 is what DPDK's samples and testpmd use: large enough
// to amortise the per-call cost (here one cgo call), small enough that a
// burst's mbufs and headers stay in L1. The largest is the flow table's
// (conntrack.MaxBurst; both are defined there), which every burst passes.
const (
	DefaultBurst = conntrack.DefaultBurst
	MaxBurst     = conntrack.MaxBurst
)

// Burst is an array of up to MaxBurst mbuf pointers in C memory plus a
// length, the unit of work of the fast path. The array is allocated
// once, in C: a Go-allocated []*rte_mbuf handed to C would be scanned by
// the cgo pointer checker on every call (about 13% of an io loop, see
// the design brief).
//
// A Burst belongs to one lcore; it is not safe for concurrent use.
type Burst struct {
	pkts **C.struct_rte_mbuf
	view []*Mbuf // the C array seen from Go, len cap
	n    int
	cap  int
}

// NewBurst allocates a burst of size mbuf pointers (1..MaxBurst).
// Release it with Free.
func NewBurst(size int) (*Burst, error) {
	if size < 1 || size > MaxBurst {
		return nil, fmt.Errorf("burst size %d: want 1..%d", size, MaxBurst)
	}
	p := C.calloc(C.size_t(size), C.size_t(unsafe.Sizeof((*C.struct_rte_mbuf)(nil))))
	if p == nil {
		return nil, fmt.Errorf("burst size %d: calloc failed", size)
	}
	return &Burst{
		pkts: (**C.struct_rte_mbuf)(p),
		view: unsafe.Slice((**Mbuf)(p), size),
		cap:  size,
	}, nil
}

// Free releases the pointer array (not the mbufs it may point to).
func (b *Burst) Free() {
	if b.pkts != nil {
		C.free(unsafe.Pointer(b.pkts))
		b.pkts, b.view, b.n, b.cap = nil, nil, 0, 0
	}
}

// Cap is the burst's capacity.
func (b *Burst) Cap() int { return b.cap }

// Len is the number of mbufs in the burst.
func (b *Burst) Len() int { return b.n }

// Mbufs is the burst's mbufs, a view of the C array: no copy.
func (b *Burst) Mbufs() []*Mbuf { return b.view[:b.n] }

// At is the i-th mbuf.
func (b *Burst) At(i int) *Mbuf { return b.view[:b.n][i] }

// Add appends m; it returns false when the burst is full.
func (b *Burst) Add(m *Mbuf) bool {
	if b.n == b.cap {
		return false
	}
	b.view[b.n] = m
	b.n++
	return true
}

// Reset empties the burst without freeing its mbufs.
func (b *Burst) Reset() { b.n = 0 }

// FreeMbufs frees mbufs [from, to) of the burst in one cgo call
// (rte_pktmbuf_free_bulk), e.g. the tail a port refused or the drops
// collected over a burst. The burst's length is unchanged.
func (b *Burst) FreeMbufs(from, to int) {
	if from < 0 || to > b.n || from >= to {
		return
	}
	// &b.view[from] points into the C array: the cgo checker skips it.
	C.fl_free_bulk((**C.struct_rte_mbuf)(unsafe.Pointer(&b.view[from])), C.uint(to-from))
}

// FreeAll frees every mbuf in the burst and empties it.
func (b *Burst) FreeAll() {
	b.FreeMbufs(0, b.n)
	b.n = 0
}

// RxBurst receives up to b.Cap() packets from port's rx queue into b
// (one cgo call) and returns how many; b's length is set to that. The
// mbufs belong to the caller until sent or freed.
func RxBurst(port, queue uint16, b *Burst) int {
	n := int(C.fl_rx_burst(C.uint16_t(port), C.uint16_t(queue), b.pkts, C.uint16_t(b.cap)))
	b.n = n
	return n
}

// TxBurst hands b's first n mbufs to port's tx queue (one cgo call) and
// returns how many the port took; those now belong to the driver. The
// rest, [sent, n), still belong to the caller: retry or FreeMbufs them.
// b's length is unchanged.
func TxBurst(port, queue uint16, b *Burst, n int) int {
	if n > b.n {
		n = b.n
	}
	if n <= 0 {
		return 0
	}
	return int(C.fl_tx_burst(C.uint16_t(port), C.uint16_t(queue), b.pkts, C.uint16_t(n)))
}

// TxBurstFree is TxBurst that also frees what the port refused, in the
// same cgo call, and empties b. It returns how many were sent.
func TxBurstFree(port, queue uint16, b *Burst) int {
	sent, _ := txBurstFree(port, queue, b)
	return sent
}

// txBurstFree is TxBurstFree that also returns the refused packets'
// bytes (pkt_len), summed in C before they were freed.
func txBurstFree(port, queue uint16, b *Burst) (sent int, refusedBytes uint64) {
	n := b.n
	b.n = 0
	if n == 0 {
		return 0, 0
	}
	r := uint64(C.fl_tx_burst_free(C.uint16_t(port), C.uint16_t(queue), b.pkts, C.uint16_t(n)))
	return int(r & 0xffff), r >> 16
}

// TxBuffer collects packets for one port's tx queue and transmits them
// with one cgo call when full or on Flush (call it at the end of every
// rx burst), freeing and counting what the port refused. It belongs to
// one lcore; its counters are plain integers for that lcore to publish.
type TxBuffer struct {
	Port, Queue uint16
	b           *Burst
	// Sent and Dropped count packets the port took and packets it
	// refused (freed) since the buffer was made; SentBytes the bytes
	// (pkt_len) of those it took.
	Sent, Dropped, SentBytes uint64
}

// NewTxBuffer makes a tx buffer of size packets (1..MaxBurst) for
// port's tx queue. Release it with Free.
func NewTxBuffer(port, queue uint16, size int) (*TxBuffer, error) {
	b, err := NewBurst(size)
	if err != nil {
		return nil, fmt.Errorf("tx buffer port %d queue %d: %w", port, queue, err)
	}
	return &TxBuffer{Port: port, Queue: queue, b: b}, nil
}

// Add queues m for transmission, flushing first if the buffer is full.
// Its bytes count in SentBytes now, and come off again if the port
// refuses it.
func (t *TxBuffer) Add(m *Mbuf) {
	if !t.b.Add(m) {
		t.Flush()
		t.b.Add(m)
	}
	t.SentBytes += uint64(m.PktLen())
}

// Len is the number of packets waiting.
func (t *TxBuffer) Len() int { return t.b.n }

// Flush transmits the waiting packets and frees those the port refused.
// It returns how many were sent.
func (t *TxBuffer) Flush() int {
	n := t.b.n
	sent, refused := txBurstFree(t.Port, t.Queue, t.b)
	t.Sent += uint64(sent)
	t.Dropped += uint64(n - sent)
	t.SentBytes -= refused
	return sent
}

// FlushRx is Flush, then RxBurst(port, queue, rx), in one cgo call: a
// polling loop sends what its last burst made and receives the next one
// for the price of one crossing into C. It returns how many it received.
func (t *TxBuffer) FlushRx(port, queue uint16, rx *Burst) int {
	n := t.b.n
	t.b.n = 0
	// The arrays are C memory (NewBurst), passed as integers so that
	// cgo adds no pointer check to the loop's one call (fulcrum_dpdk.h).
	r := uint64(C.fl_tx_free_rx(C.uint16_t(t.Port), C.uint16_t(t.Queue), C.uintptr_t(uintptr(unsafe.Pointer(t.b.pkts))), C.uint16_t(n),
		C.uint16_t(port), C.uint16_t(queue), C.uintptr_t(uintptr(unsafe.Pointer(rx.pkts))), C.uint16_t(rx.cap)))
	sent := int(r >> 16 & 0xffff)
	t.Sent += uint64(sent)
	t.Dropped += uint64(n - sent)
	t.SentBytes -= r >> 32
	rx.n = int(r & 0xffff)
	return rx.n
}

// Free frees any waiting packets and the buffer.
func (t *TxBuffer) Free() {
	if t.b != nil {
		t.b.FreeAll()
		t.b.Free()
		t.b = nil
	}
}
