package yardstick

/*
#cgo CFLAGS: -O2 -Wall -Wextra
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// A frame in memory the C side owns: buf[off:off+len], headroom off.
struct yard_pkt {
	uint8_t *buf;
	uint16_t off, len;
};

static inline uint8_t *yard_prepend(struct yard_pkt *p, uint16_t k)
{
	if (p->off < k)
		return NULL;
	p->off -= k;
	p->len += k;
	return p->buf + p->off;
}

static void *yard_zalloc(size_t size)
{
	void *p = aligned_alloc(64, (size + 63) & ~(size_t)63);
	if (p)
		memset(p, 0, size);
	return p;
}

#define PKT struct yard_pkt
#define PKT_DATA(p) ((p)->buf + (p)->off)
#define PKT_LEN(p) ((p)->len)
#define PKT_PREPEND(p, k) yard_prepend(p, k)
#define PIPELINE_ZALLOC(name, size) yard_zalloc(size)
#include "../cref/pipeline.h"

static int yard_setup(unsigned capacity)
{
	free(g.sig);
	free(g.e);
	memset(&g, 0, sizeof(g));
	return setup(capacity);
}

// yard_burst runs pipeline_burst over pkts[0:n] and sets verd[i] to 1
// for each frame it forwarded, 0 for each it dropped.
static unsigned yard_burst(uintptr_t pkts, unsigned n, uint32_t now, uintptr_t verd)
{
	struct yard_pkt *p = (struct yard_pkt *)pkts;
	uint8_t *v = (uint8_t *)verd;
	PKT *rx[BURST_MAX], *tx[BURST_MAX], *drop[BURST_MAX];
	unsigned nd;
	for (unsigned i = 0; i < n; i++)
		rx[i] = &p[i];
	unsigned nt = pipeline_burst(rx, n, now, tx, drop, &nd);
	for (unsigned k = 0; k < nt; k++)
		v[tx[k] - p] = 1;
	for (unsigned k = 0; k < nd; k++)
		v[drop[k] - p] = 0;
	return nt;
}

static void yard_table(uint64_t **sig, void **e, uint64_t *buckets)
{
	*sig = g.sig, *e = g.e, *buckets = g.mask + 1;
}

static void yard_counters(uint64_t *out)
{
	out[0] = g.vip_pkts, out[1] = g.vip_bytes, out[2] = g.hits;
	out[3] = g.misses, out[4] = g.inserts, out[5] = g.other;
	for (int i = 0; i < NBACKENDS; i++)
		out[6 + 2 * i] = g.be[i].pkts, out[7 + 2 * i] = g.be[i].bytes;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// The C pipeline's state is one static of pipeline.h: one C pipeline a
// process, which CPipeline stands for.

// CFrames is a burst of frames in C memory, with each frame's headroom, as
// the C pipeline's packets (struct yard_pkt).
type CFrames struct {
	pkts *C.struct_yard_pkt
	mem  unsafe.Pointer
	verd *C.uint8_t
	n    int
	room int
	size int
}

// NewCFrames allocates n frames of room bytes of headroom and size bytes
// each in C memory. Free releases them.
func NewCFrames(n, room, size int) *CFrames {
	f := &CFrames{n: n, room: room, size: size}
	f.pkts = (*C.struct_yard_pkt)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_yard_pkt{}))))
	f.mem = C.calloc(C.size_t(n), C.size_t(room+size))
	f.verd = (*C.uint8_t)(C.calloc(C.size_t(n), 1))
	for i := range n { // a frame's buffer never moves: only its offset and length change
		f.pkt(i).buf = (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(f.Buf(i))))
	}
	return f
}

// Free releases the frames' memory.
func (f *CFrames) Free() {
	C.free(unsafe.Pointer(f.pkts))
	C.free(f.mem)
	C.free(unsafe.Pointer(f.verd))
}

func (f *CFrames) pkt(i int) *C.struct_yard_pkt {
	return (*C.struct_yard_pkt)(unsafe.Add(unsafe.Pointer(f.pkts), uintptr(i)*unsafe.Sizeof(C.struct_yard_pkt{})))
}

// Buf is frame i's whole buffer, headroom included.
func (f *CFrames) Buf(i int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(f.mem, i*(f.room+f.size))), f.room+f.size)
}

// Reset makes frame i the l bytes at offset off of its buffer.
func (f *CFrames) Reset(i, off, l int) {
	p := f.pkt(i)
	p.off, p.len = C.uint16_t(off), C.uint16_t(l)
}

// Frame is frame i as the pipeline left it, and whether it was forwarded.
func (f *CFrames) Frame(i int) (frame []byte, fwd bool) {
	p := f.pkt(i)
	v := unsafe.Slice((*byte)(unsafe.Pointer(f.verd)), f.n)
	return f.Buf(i)[p.off : int(p.off)+int(p.len)], v[i] == 1
}

// CPipeline is the C pipeline (pipeline.h) of this process.
type CPipeline struct{}

// NewCPipeline sets the C pipeline up for capacity flows, as cref.c does.
func NewCPipeline(capacity int) (CPipeline, error) {
	if C.yard_setup(C.uint(capacity)) != 0 {
		return CPipeline{}, errors.New("yardstick: no memory for the C pipeline's table")
	}
	return CPipeline{}, nil
}

// Burst runs the C pipeline once over f's first n frames (n <= MaxBurst):
// one cgo call.
func (CPipeline) Burst(f *CFrames, n int, now uint32) int {
	return int(C.yard_burst(C.uintptr_t(uintptr(unsafe.Pointer(f.pkts))), C.uint(n), C.uint32_t(now), C.uintptr_t(uintptr(unsafe.Pointer(f.verd)))))
}

// Counters are the C pipeline's counters, in Pipeline.Counters' order.
func (CPipeline) Counters() []uint64 {
	var out [6 + 2*nBackends]C.uint64_t
	C.yard_counters(&out[0])
	r := make([]uint64, len(out))
	for i := range out {
		r[i] = uint64(out[i])
	}
	return r
}

// Entries are the C pipeline's conntrack entries and signature words.
func (CPipeline) Entries() ([]Entry, []uint64) {
	var sp *C.uint64_t
	var ep unsafe.Pointer
	var n C.uint64_t
	C.yard_table(&sp, &ep, &n)
	sig := unsafe.Slice((*uint64)(unsafe.Pointer(sp)), int(n))
	e := unsafe.Slice((*Entry)(ep), int(n)*slots)
	return e, sig
}
