// Package gen generates Ethernet frames toward Fulcrum's VIPs for benchmarks
// and tests: TCP SYNs, established TCP traffic, UDP, over IPv4 and IPv6, from
// N distinct client flows, with malformed and non-VIP frames mixed in at a
// chosen rate. It plays the part pktgen or TRex play on real hardware
// (issue 6): the pcap files it writes are replayed by DPDK's net_pcap.
//
// Generation is deterministic: the same Config (Seed included) yields the
// same frames, byte for byte, on every machine. Randomness comes from one
// math/rand/v2 PCG stream drawn in a fixed order.
//
// # Frame size
//
// Config.Size counts the way packet generators and RFC 2544 count: the
// Ethernet frame from the destination MAC through the 4-byte FCS (no
// preamble, SFD or inter-frame gap). A pcap file holds no FCS, so a frame of
// size S is S-4 bytes long in the capture and in DPDK's mbuf: "-size 64" is a
// 60-byte frame, "-size 1518" a 1514-byte frame carrying a full 1500-byte IP
// packet (the largest size accepted). The IP packet fills the frame (its
// length is S-4-14) and the rest after the TCP or UDP header is payload, as
// pktgen and TRex build it: a 64-byte IPv4 SYN carries 6 bytes of data.
//
// Two exceptions, because a frame cannot be shorter than its headers or than
// Ethernet's minimum:
//   - a valid frame whose headers do not fit in S is header-only and longer
//     than S: IPv6+TCP needs 74 bytes (78 with FCS), IPv6+UDP 62 (66);
//   - ARP requests are always 60 bytes (64 with FCS), zero-padded.
//
// Malformed frames start as a valid frame of size S and are then broken; the
// ones whose IP packet becomes shorter are zero-padded to 60 bytes like any
// short frame, except DefectTruncatedIP, which is a runt cut off inside the
// IP header (padding would hide the truncation from a parser).
//
// # Kinds
//
// Every frame has a Kind (valid IPv4, valid IPv6, malformed, non-VIP, ARP)
// so a test or benchmark knows how many frames of each the dataplane should
// forward, drop or pass to the kernel. A malformed frame has exactly one
// Defect, chosen so that the dataplane's parser (package packet) rejects it
// with a specific reason; all its other fields, the IPv4 header checksum
// included, stay correct.
package gen
