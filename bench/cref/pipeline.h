/*
 * pipeline.h: the C pipeline's per-burst work, without DPDK.
 *
 * cref.c (the DPDK program fulcrum-bench runs beside testpmd and Fulcrum)
 * and bench/yardstick (a Go benchmark that runs this same C code and its
 * line-by-line Go transliteration on the same frames, in one process)
 * include it, so both measure one piece of C. What it does is described
 * at the top of cref.c.
 *
 * The includer defines, before including it:
 *   PKT                  its packet type (struct rte_mbuf in cref.c);
 *   PKT_DATA(p)          uint8_t *, the frame's first byte;
 *   PKT_LEN(p)           the frame's length;
 *   PKT_PREPEND(p, k)    grows the frame by k bytes at the front and
 *                        returns its new first byte, or NULL (no headroom);
 *   PIPELINE_ZALLOC(name, size)  zeroed memory aligned to 64 bytes.
 */
#ifndef FULCRUM_CREF_PIPELINE_H
#define FULCRUM_CREF_PIPELINE_H

#include <stdint.h>
#include <string.h>

#define BURST_MAX 64
#define SLOTS 8
#define MAGLEV_M 65537
#define NBACKENDS 10
#define HDR_LEN 38 /* Ethernet 14 + IPv4 20 + GRE 4 */

struct entry { /* one cache line, like Fulcrum's */
	uint64_t k0, k1;        /* src | dst << 32; sport | dport << 16 | proto << 32 */
	uint64_t fleet;         /* the flow's fleet hash (tunnel entropy) */
	uint32_t last_seen;
	uint16_t backend;
	uint8_t state, used;
	uint8_t pad[32];
} __attribute__((aligned(64)));

struct backend {
	uint8_t tmpl[HDR_LEN]; /* Ethernet, IPv4 (length, id and checksum 0), GRE */
	uint32_t sum;          /* the IPv4 header's ones' complement sum without length and id */
	uint64_t pkts, bytes;
};

static struct {
	uint64_t *sig;      /* a bucket's 8 signature bytes (0: free) */
	struct entry *e;    /* buckets * 8 */
	uint64_t mask;      /* buckets - 1 */
	uint64_t k[6];      /* local hash keys */
	uint64_t sk0, sk1;  /* fleet hash (SipHash) key */
	uint16_t maglev[MAGLEV_M];
	struct backend be[NBACKENDS];
	uint64_t vip_pkts, vip_bytes, hits, misses, inserts, other;
} g;

static inline uint64_t mum(uint64_t a, uint64_t b)
{
	__uint128_t p = (__uint128_t)a * b;
	return (uint64_t)p ^ (uint64_t)(p >> 64);
}

static inline uint64_t local_hash(uint64_t k0, uint64_t k1)
{
	return mum(mum(k0 ^ g.k[0], g.k[1]) ^ g.k[4], k1 ^ g.k[5]);
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                          \
	do {                                                              \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                    \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                    \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

/* SipHash-1-3 of two 64-bit words (the fleet hash's shape). */
static inline uint64_t siphash13(uint64_t m0, uint64_t m1)
{
	uint64_t v0 = g.sk0 ^ 0x736f6d6570736575ULL, v1 = g.sk1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = g.sk0 ^ 0x6c7967656e657261ULL, v3 = g.sk1 ^ 0x7465646279746573ULL;
	uint64_t b = 16ULL << 56;
	v3 ^= m0; SIPROUND; v0 ^= m0;
	v3 ^= m1; SIPROUND; v0 ^= m1;
	v3 ^= b; SIPROUND; v0 ^= b;
	v2 ^= 0xff; SIPROUND; SIPROUND; SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static inline uint64_t sig_matches(uint64_t word, uint8_t s)
{
	uint64_t x = word ^ (0x0101010101010101ULL * s);
	return (x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL;
}

/* The entry of key (k0, k1) among the candidates mm (from sig_matches) of
 * bucket b, or NULL. */
static inline struct entry *find(uint64_t b, uint64_t mm, uint64_t k0, uint64_t k1)
{
	for (; mm; mm &= mm - 1) {
		struct entry *x = &g.e[b * SLOTS + (__builtin_ctzll(mm) >> 3)];
		if (x->k0 == k0 && x->k1 == k1)
			return x;
	}
	return NULL;
}

static inline uint16_t fold(uint32_t s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* setup sizes the conntrack table for capacity flows and fills the keys,
 * the Maglev table and the backends' templates. It returns 0, or -1 when
 * the memory cannot be had. */
static int setup(unsigned capacity)
{
	uint64_t buckets = 1;
	while (buckets * SLOTS < capacity)
		buckets <<= 1;
	g.mask = buckets - 1;
	g.sig = PIPELINE_ZALLOC("cref-sig", buckets * 8);
	g.e = PIPELINE_ZALLOC("cref-ct", buckets * SLOTS * sizeof(struct entry));
	if (!g.sig || !g.e)
		return -1;
	for (int i = 0; i < 6; i++)
		g.k[i] = (0x9e3779b97f4a7c15ULL * (i + 1)) | 1;
	g.sk0 = 0x0706050403020100ULL;
	g.sk1 = 0x0f0e0d0c0b0a0908ULL;
	/* A Maglev table: the lookup is what the fast path pays; how it was
	 * filled does not matter here. */
	for (int i = 0; i < MAGLEV_M; i++)
		g.maglev[i] = (uint16_t)((i * 7919u) % NBACKENDS);
	static const uint8_t nh[6] = {0x02, 0, 0, 0, 0, 0xfe}, me[6] = {0x02, 0, 0, 0, 0, 0x01};
	for (int i = 0; i < NBACKENDS; i++) {
		uint8_t *t = g.be[i].tmpl;
		memcpy(t, nh, 6);
		memcpy(t + 6, me, 6);
		t[12] = 0x08, t[13] = 0x00;
		uint8_t *ip = t + 14;
		ip[0] = 0x45, ip[8] = 64, ip[9] = 47; /* TTL, GRE */
		ip[6] = 0; /* no DF: the id carries entropy, as Fulcrum's */
		uint32_t src = __builtin_bswap32(0xc000020a), dst = __builtin_bswap32(0x0a010001 + i);
		memcpy(ip + 12, &src, 4);
		memcpy(ip + 16, &dst, 4);
		uint32_t s = 0;
		for (int k = 0; k < 20; k += 2)
			s += (uint32_t)ip[k] << 8 | ip[k + 1];
		g.be[i].sum = s;
		t[34] = 0, t[35] = 0, t[36] = 0x08, t[37] = 0x00; /* GRE: IPv4 inside */
	}
	return 0;
}

/* pipeline_burst runs the pipeline over the n (at most BURST_MAX) frames
 * of rx at time now (ms): it puts the frames it forwards, encapsulated, in
 * tx and returns their number, and puts the others in drop (*nd of them). */
static inline unsigned pipeline_burst(PKT **rx, unsigned n, uint32_t now, PKT **tx, PKT **drop, unsigned *ndrop)
{
	uint64_t hash[BURST_MAX], k0[BURST_MAX], k1[BURST_MAX], m[BURST_MAX];
	uint8_t flags[BURST_MAX], idx[BURST_MAX];
	const uint32_t vip = __builtin_bswap32(0xcb007107); /* 203.0.113.7 */
	unsigned c = 0, nd = 0, nt = 0;
	/* Pass 1: parse, match the VIP, hash, prefetch the signature word. */
	for (unsigned i = 0; i < n; i++) {
		uint8_t *p = PKT_DATA(rx[i]);
		if (PKT_LEN(rx[i]) < 14 + 20 + 20 || p[12] != 0x08 || p[13] != 0x00 || p[14] != 0x45 ||
		    (p[20] & 0x3f) != 0 || p[21] != 0 || (p[23] != 6 && p[23] != 17)) {
			drop[nd++] = rx[i];
			continue;
		}
		uint32_t src, dst;
		uint16_t sport, dport;
		memcpy(&src, p + 26, 4);
		memcpy(&dst, p + 30, 4);
		memcpy(&sport, p + 34, 2);
		memcpy(&dport, p + 36, 2);
		if (dst != vip || dport != __builtin_bswap16(80) || p[23] != 6) {
			drop[nd++] = rx[i];
			continue;
		}
		k0[c] = (uint64_t)src | (uint64_t)dst << 32;
		k1[c] = (uint64_t)sport | (uint64_t)dport << 16 | (uint64_t)p[23] << 32;
		uint64_t h = local_hash(k0[c], k1[c]);
		hash[c] = h;
		flags[c] = p[47];
		idx[c] = (uint8_t)i;
		__builtin_prefetch(&g.sig[h & g.mask], 0, 3);
		c++;
	}
	/* Pass 2: match signatures, prefetch the first candidate's entry. */
	for (unsigned j = 0; j < c; j++) {
		uint64_t b = hash[j] & g.mask;
		m[j] = sig_matches(g.sig[b], (uint8_t)(hash[j] >> 56) | 1);
		if (m[j])
			__builtin_prefetch(&g.e[b * SLOTS + (__builtin_ctzll(m[j]) >> 3)], 0, 3);
	}
	/* Pass 3: find, touch or insert, encapsulate, count. */
	for (unsigned j = 0; j < c; j++) {
		PKT *mb = rx[idx[j]];
		uint64_t b = hash[j] & g.mask, mm = m[j];
		struct entry *e = find(b, mm, k0[j], k1[j]);
		int syn = (flags[j] & 0x12) == 0x02;
		/* An earlier packet of this burst may have inserted the flow
		 * after pass 2 read the signatures: on a miss, look again. */
		if (e == NULL)
			e = find(b, sig_matches(g.sig[b], (uint8_t)(hash[j] >> 56) | 1), k0[j], k1[j]);
		if (e == NULL) {
			g.misses++;
			uint64_t w = g.sig[b];
			unsigned s = SLOTS;
			for (unsigned k = 0; k < SLOTS; k++)
				if (((w >> (8 * k)) & 0xff) == 0) {
					s = k;
					break;
				}
			if (s == SLOTS)
				s = (hash[j] >> 8) & (SLOTS - 1); /* full: evict */
			e = &g.e[b * SLOTS + s];
			g.sig[b] = (w & ~(0xffULL << (8 * s))) | ((uint64_t)((uint8_t)(hash[j] >> 56) | 1) << (8 * s));
			e->k0 = k0[j], e->k1 = k1[j];
			e->fleet = siphash13(k0[j], k1[j]);
			e->backend = g.maglev[e->fleet % MAGLEV_M];
			e->state = 0;
			g.inserts++;
		} else {
			g.hits++;
			if (syn) {
				uint64_t f = siphash13(k0[j], k1[j]);
				e->backend = g.maglev[f % MAGLEV_M];
				e->fleet = f;
			}
		}
		e->last_seen = now;
		if (flags[j] & 0x01)
			e->state = 2;
		else if (!syn)
			e->state = 1;
		struct backend *be = &g.be[e->backend];
		/* Replace the Ethernet header with the tunnel's 38 bytes. */
		uint16_t ipl = PKT_LEN(mb) - 14;
		uint8_t *o = PKT_PREPEND(mb, HDR_LEN - 14);
		if (o == NULL) {
			drop[nd++] = mb;
			continue;
		}
		memcpy(o, be->tmpl, HDR_LEN);
		uint16_t total = 24 + ipl, id = (uint16_t)(e->fleet >> 16);
		o[16] = total >> 8, o[17] = (uint8_t)total;
		o[18] = id >> 8, o[19] = (uint8_t)id;
		uint16_t sum = ~fold(be->sum + total + id);
		o[24] = sum >> 8, o[25] = (uint8_t)sum;
		be->pkts++;
		be->bytes += ipl + 14;
		g.vip_pkts++;
		g.vip_bytes += ipl + 14;
		tx[nt++] = mb;
	}
	g.other += nd;
	*ndrop = nd;
	return nt;
}

#endif
