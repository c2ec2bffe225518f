package yardstick

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/fulcrumlb/fulcrum/internal/prefetch"
)

// The C pipeline's sizes (pipeline.h).
const (
	MaxBurst  = 64
	slots     = 8
	maglevM   = 65537
	nBackends = 10
	hdrLen    = 38 // Ethernet 14 + IPv4 20 + GRE 4
)

// Entry is pipeline.h's struct entry: one cache line.
type Entry struct {
	K0, K1   uint64 // src | dst << 32; sport | dport << 16 | proto << 32
	Fleet    uint64 // the flow's fleet hash (tunnel entropy)
	LastSeen uint32
	Backend  uint16
	State    uint8
	used     uint8
	_        [32]byte
}

type backend struct {
	tmpl        [hdrLen]byte // Ethernet, IPv4 (length, id and checksum 0), GRE
	sum         uint32       // the IPv4 header's ones' complement sum without length and id
	pkts, bytes uint64
}

// Pkt is a frame, Buf[Off:Off+Len], as Fulcrum's dataplane.Pkt.
type Pkt struct {
	Buf      []byte
	Off, Len int
}

// Pipeline is pipeline.h transliterated into Go: the same state, the same
// three passes, the same arithmetic.
type Pipeline struct {
	sig    []uint64
	e      []Entry
	mask   uint64
	k      [6]uint64
	sk0    uint64
	sk1    uint64
	maglev [maglevM]uint16
	be     [nBackends]backend

	vipPkts, vipBytes, hits, misses, inserts, other uint64

	// The burst's scratch (the C function's stack arrays).
	hash, k0, k1, m [MaxBurst]uint64
	flags, idx      [MaxBurst]uint8
	lines           [MaxBurst]uintptr
}

// NewPipeline sets a Go pipeline up for capacity flows, as pipeline.h's
// setup does.
func NewPipeline(capacity int) *Pipeline {
	g := &Pipeline{}
	buckets := uint64(1)
	for buckets*slots < uint64(capacity) {
		buckets <<= 1
	}
	g.mask = buckets - 1
	g.sig = alignedSlice[uint64](int(buckets))
	g.e = alignedSlice[Entry](int(buckets * slots))
	for i := range g.k {
		g.k[i] = 0x9e3779b97f4a7c15*uint64(i+1) | 1
	}
	g.sk0, g.sk1 = 0x0706050403020100, 0x0f0e0d0c0b0a0908
	for i := range g.maglev {
		g.maglev[i] = uint16(uint32(i) * 7919 % nBackends)
	}
	nh := [6]byte{0x02, 0, 0, 0, 0, 0xfe}
	me := [6]byte{0x02, 0, 0, 0, 0, 0x01}
	for i := range g.be {
		t := &g.be[i].tmpl
		copy(t[0:], nh[:])
		copy(t[6:], me[:])
		t[12], t[13] = 0x08, 0x00
		ip := t[14:34]
		ip[0], ip[8], ip[9] = 0x45, 64, 47
		binary.BigEndian.PutUint32(ip[12:], 0xc000020a)
		binary.BigEndian.PutUint32(ip[16:], 0x0a010001+uint32(i))
		var s uint32
		for k := 0; k < 20; k += 2 {
			s += uint32(ip[k])<<8 | uint32(ip[k+1])
		}
		g.be[i].sum = s
		t[34], t[35], t[36], t[37] = 0, 0, 0x08, 0x00
	}
	return g
}

// alignedSlice is n zeroed Ts starting on a 64-byte boundary (the C side
// has aligned_alloc).
func alignedSlice[T any](n int) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	raw := make([]byte, n*size+64)
	off := (64 - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))))&63) & 63
	return unsafe.Slice((*T)(unsafe.Pointer(&raw[off])), n)
}

func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func (g *Pipeline) localHash(k0, k1 uint64) uint64 {
	return mum(mum(k0^g.k[0], g.k[1])^g.k[4], k1^g.k[5])
}

// sipRound is pipeline.h's SIPROUND. It repeats flow's own round on
// purpose: this file is the C pipeline in Go, line for line, and shares
// no code with the Fulcrum it is measured against.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// siphash13 is SipHash-1-3 of two 64-bit words (the fleet hash's shape).
func (g *Pipeline) siphash13(m0, m1 uint64) uint64 {
	v0, v1 := g.sk0^0x736f6d6570736575, g.sk1^0x646f72616e646f6d
	v2, v3 := g.sk0^0x6c7967656e657261, g.sk1^0x7465646279746573
	const b = 16 << 56
	v3 ^= m0
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= m0
	v3 ^= m1
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= m1
	v3 ^= b
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= b
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ v1 ^ v2 ^ v3
}

func sigMatches(word uint64, s uint8) uint64 {
	x := word ^ 0x0101010101010101*uint64(s)
	return (x - 0x0101010101010101) &^ x & 0x8080808080808080
}

// find is the entry of key (k0, k1) among the candidates mm of bucket b,
// or nil.
func (g *Pipeline) find(b, mm, k0, k1 uint64) *Entry {
	for ; mm != 0; mm &= mm - 1 {
		x := &g.e[b*slots+uint64(bits.TrailingZeros64(mm)>>3)]
		if x.K0 == k0 && x.K1 == k1 {
			return x
		}
	}
	return nil
}

func fold(s uint32) uint16 {
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint16(s)
}

// vip and port80 are 203.0.113.7 and 80 as little-endian loads of their
// network-order bytes (the C side's memcpy into a uint32_t).
const (
	vip    = 0x077100cb
	port80 = 0x5000
)

// Burst runs the pipeline over rx (at most MaxBurst frames) at time now
// (ms), as pipeline_burst does: each frame it forwards is encapsulated in
// place (rx[i].Off and Len move) and verd[i] set to 1; each other frame
// gets verd[i] = 0. It returns the number forwarded.
func (g *Pipeline) Burst(rx []Pkt, now uint32, verd []uint8) int {
	c, nd, nt := 0, 0, 0
	verd = verd[:len(rx)]
	// Pass 1: parse, match the VIP, hash, prefetch the signature word.
	sent := 0
	for i := range rx {
		p := &rx[i]
		f := p.Buf[p.Off : p.Off+p.Len]
		if len(f) < 14+20+20 {
			verd[i] = 0
			nd++
			continue
		}
		f = f[:54]
		if f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 || f[20]&0x3f != 0 || f[21] != 0 || (f[23] != 6 && f[23] != 17) {
			verd[i] = 0
			nd++
			continue
		}
		src := binary.LittleEndian.Uint32(f[26:])
		dst := binary.LittleEndian.Uint32(f[30:])
		sport := binary.LittleEndian.Uint16(f[34:])
		dport := binary.LittleEndian.Uint16(f[36:])
		if dst != vip || dport != port80 || f[23] != 6 {
			verd[i] = 0
			nd++
			continue
		}
		j := c & (MaxBurst - 1)
		k0 := uint64(src) | uint64(dst)<<32
		k1 := uint64(sport) | uint64(dport)<<16 | uint64(f[23])<<32
		h := g.localHash(k0, k1)
		g.k0[j], g.k1[j], g.hash[j] = k0, k1, h
		g.flags[j] = f[47]
		g.idx[j] = uint8(i)
		g.lines[j] = uintptr(unsafe.Pointer(&g.sig[h&g.mask]))
		c++
		sent = prefetch.Eights(g.lines[:], sent, c)
	}
	if c > sent {
		prefetch.Lines(g.lines[sent:c])
	}
	// Pass 2: match signatures, prefetch the first candidate's entry.
	n2 := 0
	for j := 0; j < c; j++ {
		b := g.hash[j] & g.mask
		m := sigMatches(g.sig[b], uint8(g.hash[j]>>56)|1)
		g.m[j] = m
		if m != 0 {
			g.lines[n2] = uintptr(unsafe.Pointer(&g.e[b*slots+uint64(bits.TrailingZeros64(m)>>3)]))
			n2++
		}
	}
	prefetch.Lines(g.lines[:n2])
	// Pass 3: find, touch or insert, encapsulate, count.
	for j := 0; j < c; j++ {
		mb := &rx[g.idx[j]]
		h, k0, k1 := g.hash[j], g.k0[j], g.k1[j]
		b := h & g.mask
		e := g.find(b, g.m[j], k0, k1)
		flags := g.flags[j]
		syn := flags&0x12 == 0x02
		// An earlier packet of this burst may have inserted the flow
		// after pass 2 read the signatures: on a miss, look again.
		if e == nil {
			e = g.find(b, sigMatches(g.sig[b], uint8(h>>56)|1), k0, k1)
		}
		if e == nil {
			g.misses++
			w := g.sig[b]
			s := uint64(slots)
			for k := uint64(0); k < slots; k++ {
				if (w>>(8*k))&0xff == 0 {
					s = k
					break
				}
			}
			if s == slots {
				s = (h >> 8) & (slots - 1) // full: evict
			}
			e = &g.e[b*slots+s]
			g.sig[b] = w&^(0xff<<(8*s)) | uint64(uint8(h>>56)|1)<<(8*s)
			e.K0, e.K1 = k0, k1
			e.Fleet = g.siphash13(k0, k1)
			e.Backend = g.maglev[e.Fleet%maglevM]
			e.State = 0
			g.inserts++
		} else {
			g.hits++
			if syn {
				f := g.siphash13(k0, k1)
				e.Backend = g.maglev[f%maglevM]
				e.Fleet = f
			}
		}
		e.LastSeen = now
		if flags&0x01 != 0 {
			e.State = 2
		} else if !syn {
			e.State = 1
		}
		be := &g.be[e.Backend]
		// Replace the Ethernet header with the tunnel's 38 bytes.
		ipl := uint16(mb.Len - 14)
		if mb.Off < hdrLen-14 {
			verd[g.idx[j]] = 0
			nd++
			continue
		}
		mb.Off -= hdrLen - 14
		mb.Len += hdrLen - 14
		o := mb.Buf[mb.Off:][:hdrLen]
		copy(o, be.tmpl[:])
		total, id := 24+ipl, uint16(e.Fleet>>16)
		binary.BigEndian.PutUint16(o[16:], total)
		binary.BigEndian.PutUint16(o[18:], id)
		binary.BigEndian.PutUint16(o[24:], ^fold(be.sum+uint32(total)+uint32(id)))
		be.pkts++
		be.bytes += uint64(ipl) + 14
		g.vipPkts++
		g.vipBytes += uint64(ipl) + 14
		verd[g.idx[j]] = 1
		nt++
	}
	g.other += uint64(nd)
	return nt
}

// Counters are the VIP's packets and bytes, hits, misses, inserts, other
// (dropped) frames, then each backend's packets and bytes.
func (g *Pipeline) Counters() []uint64 {
	r := []uint64{g.vipPkts, g.vipBytes, g.hits, g.misses, g.inserts, g.other}
	for i := range g.be {
		r = append(r, g.be[i].pkts, g.be[i].bytes)
	}
	return r
}

// Entries are the pipeline's conntrack entries and signature words.
func (g *Pipeline) Entries() ([]Entry, []uint64) { return g.e, g.sig }
