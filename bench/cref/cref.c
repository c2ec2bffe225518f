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
 * The per-burst work is in pipeline.h, which bench/yardstick also runs
 * (beside its Go transliteration) without DPDK.
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

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#define PKT struct rte_mbuf
#define PKT_DATA(p) rte_pktmbuf_mtod(p, uint8_t *)
#define PKT_LEN(p) rte_pktmbuf_data_len(p)
#define PKT_PREPEND(p, k) ((uint8_t *)rte_pktmbuf_prepend(p, k))
#define PIPELINE_ZALLOC(name, size) rte_zmalloc(name, size, 64)
#include "pipeline.h"

static volatile int quit;
static unsigned burst = 32;
static unsigned nb_mbufs = 16383;

static int forward(void *arg)
{
	(void)arg;
	struct rte_mbuf *rx[BURST_MAX], *tx[BURST_MAX], *drop[BURST_MAX];
	const uint64_t hz = rte_get_tsc_hz() / 1000;
	while (!quit) {
		uint16_t n = rte_eth_rx_burst(0, 0, rx, burst);
		if (n == 0)
			continue;
		uint32_t now = (uint32_t)(rte_rdtsc() / hz);
		unsigned nd;
		unsigned nt = pipeline_burst(rx, n, now, tx, drop, &nd);
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
	if (setup(capacity) != 0)
		rte_exit(EXIT_FAILURE, "cref: conntrack of %u entries: no memory\n", capacity);
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
