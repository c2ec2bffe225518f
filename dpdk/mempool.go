//go:build dpdk

package dpdk

/*
#include "fulcrum_dpdk.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/yerden/go-dpdk/mbuf"
	"github.com/yerden/go-dpdk/mempool"
)

// Mempool defaults. The sizes follow DPDK's sample applications:
// RTE_MBUF_DEFAULT_BUF_SIZE is 2048 bytes of data room plus the
// 128-byte headroom, enough for a 1500-byte frame and the headroom that
// encapsulation prepends into.
const (
	// DefaultDataRoom is RTE_MBUF_DEFAULT_BUF_SIZE.
	DefaultDataRoom = C.RTE_MBUF_DEFAULT_BUF_SIZE
	// DefaultPoolCache is the per-lcore cache of the skeleton sample
	// (MBUF_CACHE_SIZE); it must not exceed RTE_MEMPOOL_CACHE_MAX_SIZE
	// (512) nor n/1.5.
	DefaultPoolCache = 250
	// SocketAny places memory on any NUMA socket (SOCKET_ID_ANY).
	SocketAny = C.SOCKET_ID_ANY
)

// PoolCache is cache lowered as far as DPDK requires for a pool of n
// mbufs: rte_mempool refuses a cache whose flush threshold (1.5 times it)
// exceeds n, so a small pool gets a smaller cache instead of EINVAL.
func PoolCache(n, cache uint32) uint32 {
	return min(cache, n*2/3)
}

// Mempool is a pool of packet mbufs (rte_pktmbuf_pool_create).
type Mempool struct {
	mp   *mempool.Mempool
	name string
}

// NewMempool creates a packet mbuf pool of n mbufs named name (unique
// in the process, at most 25 bytes) on NUMA socket (SocketAny for any),
// each with dataRoom bytes of buffer including the headroom, and a
// per-lcore cache of cache mbufs (at most PoolCache allows). Size n as rx descriptors of every
// queue it feeds + tx descriptors + in-flight bursts + caches, or the
// ports run dry (rx_nombuf). The error carries DPDK's message.
func NewMempool(name string, n, cache uint32, dataRoom uint16, socket int) (*Mempool, error) {
	cache = PoolCache(n, cache)
	// rte_errno is per thread; go-dpdk reads it in a second cgo call, so
	// keep both calls on one thread.
	runtime.LockOSThread()
	mp, err := mempool.CreateMbufPool(name, n, dataRoom,
		mempool.OptCacheSize(cache), mempool.OptSocket(socket))
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("mempool %q (%d mbufs, data room %d): %w", name, n, dataRoom, goDPDKErr(err))
	}
	return &Mempool{mp: mp, name: name}, nil
}

func (p *Mempool) c() *C.struct_rte_mempool {
	return (*C.struct_rte_mempool)(unsafe.Pointer(p.mp))
}

// Name is the pool's name.
func (p *Mempool) Name() string { return p.name }

// Avail is the number of free mbufs, including those in lcore caches.
func (p *Mempool) Avail() int { return int(C.rte_mempool_avail_count(p.c())) }

// InUse is the number of mbufs handed out (received, held or in flight).
func (p *Mempool) InUse() int { return int(C.rte_mempool_in_use_count(p.c())) }

// Free releases the pool. Every mbuf must be back in it and no port
// queue may still use it (close the ports first).
func (p *Mempool) Free() {
	if p.mp != nil {
		p.mp.Free()
		p.mp = nil
	}
}

// Alloc takes one mbuf from the pool, reset to an empty packet with
// the default headroom, or nil when the pool is empty. It costs a cgo
// call: on the fast path use AllocBulk.
func (p *Mempool) Alloc() *Mbuf {
	return (*Mbuf)(unsafe.Pointer(mbuf.PktMbufAlloc(p.mp)))
}

// AllocBulk fills b with n fresh mbufs in one cgo call, all or none
// (rte_pktmbuf_alloc_bulk), and sets b's length to n.
func (p *Mempool) AllocBulk(b *Burst, n int) error {
	if n < 0 || n > b.cap {
		return fmt.Errorf("mempool %q: alloc %d mbufs into a burst of %d", p.name, n, b.cap)
	}
	if ret := C.fl_alloc_bulk(p.c(), b.pkts, C.uint(n)); ret != 0 {
		return fmt.Errorf("mempool %q: alloc %d mbufs: %w", p.name, n, errno(ret))
	}
	b.n = n
	return nil
}
