//go:build dpdk

/*
 * C side of Fulcrum's DPDK binding: small wrappers around DPDK's static
 * inline fast-path functions (which cgo cannot call directly) and
 * helpers that fold several DPDK calls into one cgo call. Only DPDK's
 * stable API is used, so this builds on 22.11, 23.11 and 24.11.
 */
#ifndef FULCRUM_DPDK_H
#define FULCRUM_DPDK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

/*
 * Offsets and sizes of the rte_mbuf fields Go reads and writes directly,
 * so per-packet access needs no cgo call. Computed by the C compiler from
 * the installed headers, so a layout change in a newer DPDK is picked up
 * at build time rather than guessed.
 */
enum {
	FL_MBUF_BUF_ADDR = offsetof(struct rte_mbuf, buf_addr),
	FL_MBUF_DATA_OFF = offsetof(struct rte_mbuf, data_off),
	FL_MBUF_NB_SEGS = offsetof(struct rte_mbuf, nb_segs),
	FL_MBUF_PORT = offsetof(struct rte_mbuf, port),
	FL_MBUF_OL_FLAGS = offsetof(struct rte_mbuf, ol_flags),
	FL_MBUF_PACKET_TYPE = offsetof(struct rte_mbuf, packet_type),
	FL_MBUF_PKT_LEN = offsetof(struct rte_mbuf, pkt_len),
	FL_MBUF_DATA_LEN = offsetof(struct rte_mbuf, data_len),
	FL_MBUF_RSS = offsetof(struct rte_mbuf, hash.rss),
	FL_MBUF_BUF_LEN = offsetof(struct rte_mbuf, buf_len),
	FL_MBUF_SIZE = sizeof(struct rte_mbuf),
	FL_HEADROOM = RTE_PKTMBUF_HEADROOM,
};

#define FL_FIELD_SIZE(f) sizeof(((struct rte_mbuf *)0)->f)
_Static_assert(FL_FIELD_SIZE(buf_addr) == sizeof(void *), "buf_addr");
_Static_assert(FL_FIELD_SIZE(data_off) == 2, "data_off");
_Static_assert(FL_FIELD_SIZE(nb_segs) == 2, "nb_segs");
_Static_assert(FL_FIELD_SIZE(port) == 2, "port");
_Static_assert(FL_FIELD_SIZE(ol_flags) == 8, "ol_flags");
_Static_assert(FL_FIELD_SIZE(packet_type) == 4, "packet_type");
_Static_assert(FL_FIELD_SIZE(pkt_len) == 4, "pkt_len");
_Static_assert(FL_FIELD_SIZE(data_len) == 2, "data_len");
_Static_assert(FL_FIELD_SIZE(hash.rss) == 4, "hash.rss");
_Static_assert(FL_FIELD_SIZE(buf_len) == 2, "buf_len");
#undef FL_FIELD_SIZE

/* Fast path: one cgo call per burst. */

/*
 * Bursts begun and ended, per lcore (the last slot for threads that are no
 * EAL lcore): fl_burst_quiesce (pdump.c) waits on them until every burst
 * that may still run a removed rx/tx callback has returned. DPDK 22.11's
 * pdump removes its callbacks without that wait, and dpdk-dumpcap frees
 * the ring and mempool they use as soon as it has asked.
 */
struct fl_burst_slot {
	uint64_t enter;
	uint64_t exit;
} __rte_cache_aligned;
extern struct fl_burst_slot fl_burst_slots[RTE_MAX_LCORE + 1];

static inline struct fl_burst_slot *
fl_burst_begin(void)
{
	unsigned int id = rte_lcore_id();
	struct fl_burst_slot *s = &fl_burst_slots[id < RTE_MAX_LCORE ? id : RTE_MAX_LCORE];
	/* Ordered before the burst reads the port's callback list. */
	__atomic_fetch_add(&s->enter, 1, __ATOMIC_SEQ_CST);
	return s;
}

static inline void
fl_burst_end(struct fl_burst_slot *s)
{
	__atomic_fetch_add(&s->exit, 1, __ATOMIC_RELEASE);
}

static inline uint16_t
fl_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	struct fl_burst_slot *s = fl_burst_begin();
	uint16_t got = rte_eth_rx_burst(port, queue, pkts, n);
	fl_burst_end(s);
	return got;
}

static inline uint16_t
fl_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	struct fl_burst_slot *s = fl_burst_begin();
	uint16_t sent = rte_eth_tx_burst(port, queue, pkts, n);
	fl_burst_end(s);
	return sent;
}

/* Transmit n packets and free the ones the port refused; returns the
 * refused packets' bytes << 16 | sent (the bytes are at most 65535
 * packets of 65535 bytes: under 2^32). */
static inline uint64_t
fl_tx_burst_free(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	struct fl_burst_slot *s = fl_burst_begin();
	uint16_t sent = rte_eth_tx_burst(port, queue, pkts, n);
	uint64_t refused = 0;
	fl_burst_end(s);
	if (unlikely(sent < n)) {
		for (uint16_t i = sent; i < n; i++)
			refused += rte_pktmbuf_pkt_len(pkts[i]);
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	}
	return refused << 16 | sent;
}

/* Transmit n packets on one queue (freeing the refused), then receive up
 * to cap on another: the two ends of a polling loop's turn in one cgo
 * call. Returns the refused packets' bytes << 32 | sent << 16 | received
 * (sent and received at most 65535 each). The two
 * arrays (C memory, struct rte_mbuf *[]) come as integers: a pointer
 * argument costs the Go side a runtime check per call (cgocheck's
 * cgoCheckPointer, which found them outside Go's heap every time: 0.7%
 * of the forwarding core's samples at est-10k). */
static inline uint64_t
fl_tx_free_rx(uint16_t txport, uint16_t txq, uintptr_t tx, uint16_t n,
	uint16_t rxport, uint16_t rxq, uintptr_t rx, uint16_t cap)
{
	uint64_t t = 0; /* refused bytes << 16 | sent */
	if (n > 0)
		t = fl_tx_burst_free(txport, txq, (struct rte_mbuf **)tx, n);
	return t << 16 | fl_rx_burst(rxport, rxq, (struct rte_mbuf **)rx, cap);
}

static inline void
fl_free_bulk(struct rte_mbuf **pkts, unsigned int n)
{
	rte_pktmbuf_free_bulk(pkts, n);
}

static inline int
fl_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **pkts, unsigned int n)
{
	return rte_pktmbuf_alloc_bulk(mp, pkts, n);
}

/* Slow path helpers (fulcrum_dpdk.c). rte_errno is returned, never read
 * from Go: it is thread-local and a goroutine may change threads between
 * two cgo calls. */

struct fl_dev_info {
	char driver_name[64];
	uint32_t if_index;
	uint16_t min_mtu, max_mtu;
	uint32_t max_rx_pktlen;
	uint16_t max_rx_queues, max_tx_queues;
	uint64_t rx_offload_capa, tx_offload_capa;
	uint64_t flow_type_rss_offloads;
	uint16_t reta_size;
	uint8_t hash_key_size;
	uint16_t rx_desc_max, rx_desc_min, tx_desc_max, tx_desc_min;
	uint32_t speed_capa;
	int socket_id;
};

struct fl_port_conf {
	uint16_t nb_rx, nb_tx;
	uint64_t rss_hf;     /* requested; masked with the port's support */
	uint16_t mtu;        /* 0: leave the driver's default */
	int tx_fast_free;    /* request RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE */
	/* out */
	uint64_t rss_hf_out; /* what was configured, 0 when RSS is off */
	uint64_t tx_offloads_out;
};

struct fl_link {
	uint32_t speed;
	int up, full_duplex, autoneg;
};

struct fl_stats {
	uint64_t ipackets, opackets, ibytes, obytes;
	uint64_t imissed, ierrors, oerrors, rx_nombuf;
};

int fl_dev_info_get(uint16_t port, struct fl_dev_info *out);
int fl_port_configure(uint16_t port, struct fl_port_conf *c);
int fl_rx_queue_setup(uint16_t port, uint16_t q, uint16_t *nb_desc, int socket,
		struct rte_mempool *mp);
int fl_tx_queue_setup(uint16_t port, uint16_t q, uint16_t *nb_desc, int socket);
int fl_link_get(uint16_t port, struct fl_link *out);
int fl_stats_get(uint16_t port, struct fl_stats *out);
int fl_mac_get(uint16_t port, uint8_t out[6]);
int fl_port_by_name(const char *name, uint16_t *port);
int fl_port_name(uint16_t port, char *name, size_t len);
int fl_ring_pair(const char *name_a, const char *name_b, unsigned int queues,
		unsigned int ring_size, int socket, uint16_t *a, uint16_t *b);
void fl_ring_pair_free(const char *name_a, const char *name_b, unsigned int queues);

#endif
