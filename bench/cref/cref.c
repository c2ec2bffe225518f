/*
 * cref: Fulcrum's fused fast path written in C, as a yardstick.
 *
 * The fast-path issue asks for Fulcrum's Go dataplane to be "as fast as the
 * same pipeline written in C". This program is that pipeline, for the
 * benchmark's IPv4 TCP scenarios, with nothing else: one forwarding lcore
 * reads bursts from port 0 (net_pcap) and sends to port 1 (net_null), and
 * for each packet
 *   - parses Ethernet, IPv4 (no options, no fragments) and the TCP/UDP
 *     ports;
 *   - matches the one VIP (203.0.113.7:80/tcp, as fulcrum-bench configures);
 *   - hashes the 5-tuple with the same multiply mix as Fulcrum's local hash
 *     (flow.LocalHasher), and probes a conntrack table of the same shape
 *     (buckets of 8 slots, a 64-bit word of 8-bit signatures per bucket,
 *     64-byte entries), with the whole burst's signature words and then
 *     entry lines prefetched before they are read;
 *   - on a hit, touches the entry (time, TCP state) and follows its pin; a
 *     SYN recomputes the fleet hash (SipHash-1-3) and takes the Maglev
 *     table's current choice, as Fulcrum does; on a miss, inserts;
 *   - writes a 38-byte GRE tunnel header (outer Ethernet, IPv4 with the
 *     length, an id from the flow's hash and the checksum, GRE) in place of
 *     the Ethernet header, from a per-backend template;
 *   - adds VIP and backend packet and byte counters.
 * It does less than Fulcrum does (one VIP compare instead of an index, a
 * 16-byte key instead of Fulcrum's 37, no health, no draining, no second
 * chance, no ICMP, no IPv6, no punts, no configuration), so its rate is an
 * upper bound for the same work written in C on the same machine.
 *
 * It takes testpmd's command line as fulcrum-bench builds it (EAL
 * arguments, then --total-num-mbufs, --burst; the rest is ignored) and
 * prints per-second port statistics in testpmd's format, so that
 * `fulcrum-bench -cref bin/cref` measures it third in each pair, after
 * testpmd and Fulcrum, on the scenarios it handles (syn-1m, est-10k,
 * est-1m), with its rate, its ratio to testpmd and Fulcrum's ratio to it
 * in the tables (`fulcrum-bench -testpmd bin/cref` still measures it in
 * testpmd's place). CREF_CT_CAPACITY sets the conntrack capacity (default
 * 20000, fulcrum-bench's for 10k flows; give it what the scenario's
 * Fulcrum config has: fulcrum-bench -cref does).
 *
 * Build: make cref (bin/cref).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#define BURST_MAX 64
#define SLOTS 8
#define MAGLEV_M 65537
#define NBACKENDS 10
#define HDR_LEN 38 /* Ethernet 14 + IPv4 20 + GRE 4 */

static volatile int quit;
static unsigned burst = 32;
static unsigned nb_mbufs = 16383;

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

static void setup(unsigned capacity)
{
	uint64_t buckets = 1;
	while (buckets * SLOTS < capacity)
		buckets <<= 1;
	g.mask = buckets - 1;
	g.sig = rte_zmalloc("cref-sig", buckets * 8, 64);
	g.e = rte_zmalloc("cref-ct", buckets * SLOTS * sizeof(struct entry), 64);
	if (!g.sig || !g.e)
		rte_exit(EXIT_FAILURE, "cref: conntrack of %u entries: no memory\n", capacity);
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
		uint32_t src = RTE_BE32(0xc000020a), dst = rte_cpu_to_be_32(0x0a010001 + i);
		memcpy(ip + 12, &src, 4);
		memcpy(ip + 16, &dst, 4);
		uint32_t s = 0;
		for (int k = 0; k < 20; k += 2)
			s += (uint32_t)ip[k] << 8 | ip[k + 1];
		g.be[i].sum = s;
		t[34] = 0, t[35] = 0, t[36] = 0x08, t[37] = 0x00; /* GRE: IPv4 inside */
	}
}

static int forward(void *arg)
{
	(void)arg;
	struct rte_mbuf *rx[BURST_MAX], *tx[BURST_MAX], *drop[BURST_MAX];
	uint64_t hash[BURST_MAX], k0[BURST_MAX], k1[BURST_MAX], m[BURST_MAX];
	uint8_t flags[BURST_MAX], idx[BURST_MAX];
	const uint32_t vip = RTE_BE32(0xcb007107); /* 203.0.113.7 */
	const uint64_t hz = rte_get_tsc_hz() / 1000;
	while (!quit) {
		uint16_t n = rte_eth_rx_burst(0, 0, rx, burst);
		if (n == 0)
			continue;
		uint32_t now = (uint32_t)(rte_rdtsc() / hz);
		unsigned c = 0, nd = 0, nt = 0;
		/* Pass 1: parse, match the VIP, hash, prefetch the signature word. */
		for (unsigned i = 0; i < n; i++) {
			uint8_t *p = rte_pktmbuf_mtod(rx[i], uint8_t *);
			if (rx[i]->data_len < 14 + 20 + 20 || p[12] != 0x08 || p[13] != 0x00 || p[14] != 0x45 ||
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
			if (dst != vip || dport != RTE_BE16(80) || p[23] != 6) {
				drop[nd++] = rx[i];
				continue;
			}
			k0[c] = (uint64_t)src | (uint64_t)dst << 32;
			k1[c] = (uint64_t)sport | (uint64_t)dport << 16 | (uint64_t)p[23] << 32;
			uint64_t h = local_hash(k0[c], k1[c]);
			hash[c] = h;
			flags[c] = p[47];
			idx[c] = (uint8_t)i;
			rte_prefetch0(&g.sig[h & g.mask]);
			c++;
		}
		/* Pass 2: match signatures, prefetch the first candidate's entry. */
		for (unsigned j = 0; j < c; j++) {
			uint64_t b = hash[j] & g.mask;
			m[j] = sig_matches(g.sig[b], (uint8_t)(hash[j] >> 56) | 1);
			if (m[j])
				rte_prefetch0(&g.e[b * SLOTS + (__builtin_ctzll(m[j]) >> 3)]);
		}
		/* Pass 3: find, touch or insert, encapsulate, count. */
		for (unsigned j = 0; j < c; j++) {
			struct rte_mbuf *mb = rx[idx[j]];
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
			uint16_t ipl = rte_pktmbuf_data_len(mb) - 14;
			uint8_t *o = (uint8_t *)rte_pktmbuf_prepend(mb, HDR_LEN - 14);
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
		if (nd)
			rte_pktmbuf_free_bulk(drop, nd);
		uint16_t sent = rte_eth_tx_burst(1, 0, tx, nt);
		if (sent < nt)
			rte_pktmbuf_free_bulk(tx + sent, nt - sent);
	}
	return 0;
}

static void on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

static void port_init(uint16_t port, struct rte_mempool *mp)
{
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	if (rte_eth_dev_configure(port, 1, 1, &conf) < 0 ||
	    rte_eth_rx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), NULL, mp) < 0 ||
	    rte_eth_tx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), NULL) < 0 ||
	    rte_eth_dev_start(port) < 0)
		rte_exit(EXIT_FAILURE, "cref: port %u: setup failed\n", port);
}

static void print_stats(void)
{
	struct rte_eth_stats s;
	for (uint16_t port = 0; port < 2; port++) {
		if (rte_eth_stats_get(port, &s) != 0)
			continue;
		printf("  ######################## NIC statistics for port %u  ########################\n", port);
		printf("  RX-packets: %-10" PRIu64 " RX-missed: %-10" PRIu64 " RX-bytes:  %" PRIu64 "\n", s.ipackets, s.imissed, s.ibytes);
		printf("  TX-packets: %-10" PRIu64 " TX-errors: %-10" PRIu64 " TX-bytes:  %" PRIu64 "\n", s.opackets, s.oerrors, s.obytes);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int used = rte_eal_init(argc, argv);
	if (used < 0)
		rte_exit(EXIT_FAILURE, "cref: EAL init failed\n");
	argc -= used, argv += used;
	for (int i = 1; i < argc; i++) {
		unsigned v;
		if (sscanf(argv[i], "--total-num-mbufs=%u", &v) == 1)
			nb_mbufs = v;
		else if (sscanf(argv[i], "--burst=%u", &v) == 1 && v >= 1 && v <= BURST_MAX)
			burst = v;
		else if (strncmp(argv[i], "--nb-cores=", 11) == 0 && strcmp(argv[i], "--nb-cores=1") != 0)
			rte_exit(EXIT_FAILURE, "cref: one forwarding lcore only (%s)\n", argv[i]);
	}
	if (rte_eth_dev_count_avail() < 2)
		rte_exit(EXIT_FAILURE, "cref: two ports needed (--vdev rx, --vdev tx)\n");
	const char *cap = getenv("CREF_CT_CAPACITY");
	unsigned capacity = cap ? (unsigned)strtoul(cap, NULL, 10) : 20000;
	if (capacity < SLOTS || capacity > (1u << 26))
		rte_exit(EXIT_FAILURE, "cref: CREF_CT_CAPACITY %u: want 8 to 2^26\n", capacity);
	setup(capacity);
	struct rte_mempool *mp = rte_pktmbuf_pool_create("cref", nb_mbufs, 250, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
	if (mp == NULL)
		rte_exit(EXIT_FAILURE, "cref: pool of %u mbufs: %s\n", nb_mbufs, rte_strerror(rte_errno));
	port_init(0, mp);
	port_init(1, mp);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	unsigned lcore = rte_get_next_lcore(-1, 1, 0);
	if (lcore >= RTE_MAX_LCORE)
		rte_exit(EXIT_FAILURE, "cref: no worker lcore (-l 0,1)\n");
	printf("cref: burst %u, pool %u, conntrack %" PRIu64 " buckets of %d, forwarding on lcore %u\n",
	       burst, nb_mbufs, g.mask + 1, SLOTS, lcore);
	rte_eal_remote_launch(forward, NULL, lcore);
	while (!quit) {
		sleep(1);
		print_stats();
	}
	rte_eal_mp_wait_lcore();
	printf("cref: hits %" PRIu64 " misses %" PRIu64 " inserts %" PRIu64 " other %" PRIu64 " vip packets %" PRIu64 "\n",
	       g.hits, g.misses, g.inserts, g.other, g.vip_pkts);
	for (uint16_t port = 0; port < 2; port++)
		rte_eth_dev_stop(port);
	rte_eal_cleanup();
	return 0;
}
