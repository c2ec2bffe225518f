//go:build dpdk

// Package dpdk is Fulcrum's one cgo binding to DPDK: the EAL and its
// lcores, packet mempools, mbufs, and the ethdev calls the dataplane
// needs (port info and MAC, configure with RSS, queue setup,
// start/stop/close, promiscuous mode, link, basic and extended stats,
// rx/tx bursts), plus vdev creation at run time (the net_tap exception
// port) and back-to-back net_ring port pairs for tests.
//
// # What comes from where
//
// The EAL's lcore queries and cleanup and mempool creation go through
// github.com/yerden/go-dpdk v0.0.7 (packages eal, mempool, mbuf), which
// build against DPDK 22.11. Its ethdev package does not (22.11 renamed
// the offload macros), so the ethdev calls are this package's own, in
// fulcrum_dpdk.h (static inline fast-path wrappers and mbuf field
// offsets) and fulcrum_dpdk.c (slow-path helpers that return
// rte_errno with their result, since rte_errno is thread-local and a
// goroutine may change threads between two cgo calls).
//
// # The fast path: one cgo call per burst
//
// RxBurst, TxBurst, TxBurstFree, Burst.FreeMbufs, Mempool.AllocBulk
// and TxBuffer.Flush each make exactly one cgo call for a whole burst;
// nothing on the fast path makes one per packet. Packet bytes are read
// and written in Go through Mbuf.Data, a []byte view of the mbuf's
// buffer, and headers are pushed and pulled with Mbuf.Prepend and
// Mbuf.Adj, which edit the rte_mbuf fields in place at offsets the C
// compiler computed, so they cost no cgo call and no allocation.
//
// A Burst's array of rte_mbuf pointers lives in C memory, allocated
// once: handing C a Go-allocated []*rte_mbuf makes the cgo pointer
// checker scan it on every call, measured at about 13% of an io loop's
// CPU (see the design brief).
//
// Only single-segment packets are handled in Go: Mbuf.NbSegs tells the
// dataplane which to drop and count.
//
// # Lcores
//
// InitEAL starts the EAL on a locked goroutine of its own that becomes
// the main lcore; each worker lcore then waits for Go functions
// (LaunchWorkers, RunOnLcore) in this package's listener (lcore.go), not
// go-dpdk's: it locks its thread before anything else, so that no thread
// the Go runtime starts inherits the lcore's CPU pin and name. For the
// same reason what a worker lcore's thread logs before then (the EAL's
// "lcore N is ready" at debug level) is held in C and reaches the logger
// when InitEAL returns. Other goroutines may call DPDK too, but
// they are not lcores: mempool caches are per lcore, so a loop run from
// a plain goroutine goes to the shared pool ring on every alloc/free.
//
// # Versions and build tag
//
// Only DPDK's stable API is used (no experimental or deprecated calls,
// no KNI, the RTE_ETH_* names of 21.11 and later), so the package builds
// on DPDK 22.11 (Debian 12) and the later LTS releases 23.11 and 24.11.
// Every file carries the build tag dpdk: without -tags dpdk this package
// is empty and the rest of Fulcrum builds and tests on machines without
// DPDK. The Makefile adds the tag when pkg-config finds libdpdk. The
// binding links librte_net_ring and librte_bus_vdev directly (for
// rte_eth_from_rings and rte_vdev_init), besides pkg-config's libdpdk.
package dpdk
