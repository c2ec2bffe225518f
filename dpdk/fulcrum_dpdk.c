//go:build dpdk

/*
 * Slow-path C helpers of Fulcrum's DPDK binding: each folds a short DPDK
 * sequence into one call and returns 0 or a negative errno, so Go never
 * has to read the thread-local rte_errno in a second cgo call.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_eth_ring.h>
#include <rte_ring.h>
#include <rte_bus_vdev.h>

#include "fulcrum_dpdk.h"

int
fl_dev_info_get(uint16_t port, struct fl_dev_info *out)
{
	struct rte_eth_dev_info info;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = rte_eth_dev_info_get(port, &info);
	if (ret != 0)
		return ret;
	if (info.driver_name != NULL)
		snprintf(out->driver_name, sizeof(out->driver_name), "%s",
				info.driver_name);
	out->if_index = info.if_index;
	out->min_mtu = info.min_mtu;
	out->max_mtu = info.max_mtu;
	out->max_rx_pktlen = info.max_rx_pktlen;
	out->max_rx_queues = info.max_rx_queues;
	out->max_tx_queues = info.max_tx_queues;
	out->rx_offload_capa = info.rx_offload_capa;
	out->tx_offload_capa = info.tx_offload_capa;
	out->flow_type_rss_offloads = info.flow_type_rss_offloads;
	out->reta_size = info.reta_size;
	out->hash_key_size = info.hash_key_size;
	out->rx_desc_max = info.rx_desc_lim.nb_max;
	out->rx_desc_min = info.rx_desc_lim.nb_min;
	out->tx_desc_max = info.tx_desc_lim.nb_max;
	out->tx_desc_min = info.tx_desc_lim.nb_min;
	out->speed_capa = info.speed_capa;
	out->socket_id = rte_eth_dev_socket_id(port);
	return 0;
}

/*
 * Configure a port the way the skeleton sample does, plus RSS: the
 * requested hash functions are masked with what the port can hash
 * (rte_eth_dev_configure rejects any bit outside flow_type_rss_offloads),
 * and RSS stays off with a single rx queue or when nothing is left.
 */
int
fl_port_configure(uint16_t port, struct fl_port_conf *c)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint64_t hf;
	int ret;

	if (!rte_eth_dev_is_valid_port(port))
		return -ENODEV;
	ret = rte_eth_dev_info_get(port, &info);
	if (ret != 0)
		return ret;

	memset(&conf, 0, sizeof(conf));
	hf = c->rss_hf & info.flow_type_rss_offloads;
	if (c->nb_rx > 1 && hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_key = NULL; /* driver's key */
		conf.rx_adv_conf.rss_conf.rss_hf = hf;
		if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_RSS_HASH)
			conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_RSS_HASH;
	} else {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
		hf = 0;
	}
	if (c->tx_fast_free &&
	    (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE))
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
	conf.rxmode.mtu = c->mtu; /* 0 keeps the driver's default */

	ret = rte_eth_dev_configure(port, c->nb_rx, c->nb_tx, &conf);
	if (ret != 0)
		return ret;
	c->rss_hf_out = hf;
	c->tx_offloads_out = conf.txmode.offloads;
	return 0;
}

int
fl_rx_queue_setup(uint16_t port, uint16_t q, uint16_t *nb_desc, int socket,
		struct rte_mempool *mp)
{
	int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, nb_desc, NULL);
	if (ret != 0)
		return ret;
	/* NULL rxconf: the driver's default_rxconf plus the port offloads. */
	return rte_eth_rx_queue_setup(port, q, *nb_desc, socket, NULL, mp);
}

int
fl_tx_queue_setup(uint16_t port, uint16_t q, uint16_t *nb_desc, int socket)
{
	int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, NULL, nb_desc);
	if (ret != 0)
		return ret;
	return rte_eth_tx_queue_setup(port, q, *nb_desc, socket, NULL);
}

/* rte_eth_link has bit-fields, which cgo cannot read. */
int
fl_link_get(uint16_t port, struct fl_link *out)
{
	struct rte_eth_link link;
	int ret;

	memset(out, 0, sizeof(*out));
	memset(&link, 0, sizeof(link));
	ret = rte_eth_link_get_nowait(port, &link);
	if (ret != 0)
		return ret;
	out->speed = link.link_speed;
	out->up = link.link_status == RTE_ETH_LINK_UP;
	out->full_duplex = link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
	out->autoneg = link.link_autoneg == RTE_ETH_LINK_AUTONEG;
	return 0;
}

int
fl_stats_get(uint16_t port, struct fl_stats *out)
{
	struct rte_eth_stats st;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = rte_eth_stats_get(port, &st);
	if (ret != 0)
		return ret;
	out->ipackets = st.ipackets;
	out->opackets = st.opackets;
	out->ibytes = st.ibytes;
	out->obytes = st.obytes;
	out->imissed = st.imissed;
	out->ierrors = st.ierrors;
	out->oerrors = st.oerrors;
	out->rx_nombuf = st.rx_nombuf;
	return 0;
}

int
fl_mac_get(uint16_t port, uint8_t out[6])
{
	struct rte_ether_addr a;
	int ret = rte_eth_macaddr_get(port, &a);
	if (ret != 0)
		return ret;
	memcpy(out, a.addr_bytes, 6);
	return 0;
}

int
fl_port_by_name(const char *name, uint16_t *port)
{
	return rte_eth_dev_get_port_by_name(name, port);
}

int
fl_port_name(uint16_t port, char *name, size_t len)
{
	char buf[RTE_ETH_NAME_MAX_LEN];
	int ret = rte_eth_dev_get_name_by_port(port, buf);
	if (ret != 0)
		return ret;
	snprintf(name, len, "%s", buf);
	return 0;
}

static void
free_rings(const char *prefix, unsigned int n)
{
	char rn[RTE_RING_NAMESIZE];
	unsigned int i;

	for (i = 0; i < n; i++) {
		snprintf(rn, sizeof(rn), "%s_%u", prefix, i);
		rte_ring_free(rte_ring_lookup(rn));
	}
}

static int
make_rings(const char *prefix, unsigned int n, unsigned int size, int socket,
		struct rte_ring **out)
{
	char rn[RTE_RING_NAMESIZE];
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (snprintf(rn, sizeof(rn), "%s_%u", prefix, i) >= (int)sizeof(rn)) {
			free_rings(prefix, i);
			return -ENAMETOOLONG;
		}
		/* One producer (the sending queue) and one consumer. */
		out[i] = rte_ring_create(rn, size, socket,
				RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
		if (out[i] == NULL) {
			int err = rte_errno;
			free_rings(prefix, i);
			return -err;
		}
	}
	return 0;
}

/*
 * Two net_ring ports wired back to back: what port a transmits on queue i,
 * port b receives on queue i, and the other way round. The rings carry
 * mbuf pointers, so the receiver gets the very mbufs that were sent.
 * Rings a->b are named name_a_<queue>, rings b->a name_b_<queue>; the
 * ports are "net_ring_<name>" (rte_eth_from_rings adds the prefix).
 */
int
fl_ring_pair(const char *name_a, const char *name_b, unsigned int queues,
		unsigned int ring_size, int socket, uint16_t *a, uint16_t *b)
{
	struct rte_ring *ab[RTE_PMD_RING_MAX_RX_RINGS];
	struct rte_ring *ba[RTE_PMD_RING_MAX_RX_RINGS];
	int ret, pa, pb;

	if (queues == 0 || queues > RTE_PMD_RING_MAX_RX_RINGS ||
	    queues > RTE_PMD_RING_MAX_TX_RINGS)
		return -EINVAL;
	ret = make_rings(name_a, queues, ring_size, socket, ab);
	if (ret != 0)
		return ret;
	ret = make_rings(name_b, queues, ring_size, socket, ba);
	if (ret != 0) {
		free_rings(name_a, queues);
		return ret;
	}
	pa = rte_eth_from_rings(name_a, ba, queues, ab, queues, socket);
	if (pa < 0) {
		ret = -rte_errno;
		goto fail;
	}
	pb = rte_eth_from_rings(name_b, ab, queues, ba, queues, socket);
	if (pb < 0) {
		char dev[RTE_ETH_NAME_MAX_LEN];
		ret = -rte_errno;
		if (rte_eth_dev_get_name_by_port((uint16_t)pa, dev) == 0)
			rte_vdev_uninit(dev);
		goto fail;
	}
	*a = (uint16_t)pa;
	*b = (uint16_t)pb;
	return 0;
fail:
	free_rings(name_a, queues);
	free_rings(name_b, queues);
	return ret != 0 ? ret : -EINVAL;
}

/* Frees the rings; the ports must be removed first (rte_vdev_uninit). */
void
fl_ring_pair_free(const char *name_a, const char *name_b, unsigned int queues)
{
	free_rings(name_a, queues);
	free_rings(name_b, queues);
}
