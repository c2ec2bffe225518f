// Package encap wraps a received packet in a tunnel toward its backend, in
// place: the new Ethernet, outer IP and tunnel headers are written into the
// headroom directly in front of the inner IP header, over the old Ethernet
// header, so the payload is never copied. With direct server return the
// backend decapsulates and answers the client itself.
//
// # Tunnels
//
// The outer family is the backend's: an IPv4 VIP may go to an IPv6 backend
// (4in6, GRE over IPv6, GUE over IPv6) and the other way round.
//
//	kind  outer IPv4 (bytes added)        outer IPv6 (bytes added)
//	gre   IPv4 proto 47 + GRE       24    IPv6 nh 47 + GRE       44
//	ipip  IPv4 proto 4 or 41        20    IPv6 nh 4 or 41        40
//	gue   IPv4 UDP + GUE            32    IPv6 UDP + GUE         52
//
// EncapChance adds a second chance to GRE (an RFC 2890 key holding an IPv4
// address, 4 bytes) or GUE (a private data block, 8 or 20 bytes); see
// chance.go and docs/second-chance.md. Otherwise:
//
// GRE is RFC 2784 with no optional field; its protocol type is the inner
// EtherType. GUE is variant 0 of draft-ietf-intarea-gue with no optional
// field: UDP to Config.GUEPort (IANA's 6080 by default), then
// 00 <proto 4 or 41> 00 00. Its UDP source port comes from the flow hash,
// within Config.GUESrcPortMin..Max, so a backend's RSS spreads flows over
// its queues while every packet of a flow takes one queue.
//
// # Outer header fields
//
//   - Source: Config.SrcV4 or SrcV6; destination: the Backend.
//   - TTL / hop limit: Config.TTL (64).
//   - TOS / traffic class: copied from the inner header (RFC 2983 uniform
//     model; the ECN bits follow RFC 6040's normal mode).
//   - IPv4 DF: Config.DF, by default copied from an inner IPv4 packet (RFC
//     2003 §3.1) and set for an inner IPv6 packet.
//   - IPv4 ID: 0 when DF is set (an atomic datagram, RFC 6864 §4.1).
//     Without DF, the inner IPv4 ID plus 16 bits of the flow hash (for an
//     inner IPv6 packet, the hash bits alone): no per-core counter, so the
//     Encapsulator stays immutable and shared. The ID only matters when a
//     router fragments the outer packet, which only happens when Config.MTU
//     is larger than the real path MTU.
//   - IPv6 flow label: 20 bits of the flow hash, never 0 (RFC 6438).
//   - IPv4 header checksum: computed over the 20 written bytes; the inner
//     packet is not touched.
//   - UDP checksum (GUE): zero over IPv4 (RFC 768 allows it). Over IPv6 it
//     is computed, unless Config.GUEZeroChecksumV6 asks for the zero
//     checksum RFC 6935 permits for tunnels (the decapsulator must then be
//     configured to accept it, RFC 6936 §5). Computing it does not read the
//     payload when the inner packet is TCP, UDP with a checksum, ICMP or
//     ICMPv6 and not a fragment: the inner checksum already makes the
//     segment sum to its negated pseudo-header, so the outer checksum costs
//     a few header loads (Linux's local checksum offload). An inner packet
//     with a wrong checksum then gets a wrong outer checksum and is dropped
//     by the backend, as it would have been anyway. Other inner packets
//     (fragments, IPv6 extension headers, other protocols) are summed byte
//     by byte.
//
// # MTU and ICMP
//
// Config.MTU is the L3 MTU toward the backends. A packet whose inner IP
// length plus Overhead exceeds it is not forwarded. Like Katran and IPVS,
// Encap then turns the frame, in place, into the ICMP error that tells the
// client the usable MTU (MTU - Overhead), sent from the VIP (the packet's
// destination) to the client (its source), untagged, back to the MAC it
// came from (the router):
//
//   - IPv4 with DF: "destination unreachable / fragmentation needed" (type
//     3 code 4) carrying the next-hop MTU (RFC 1191), quoting the packet's
//     first bytes up to 576 bytes in all (RFC 1812 §4.3.2.3), TTL 64.
//   - IPv6: "packet too big" (type 2 code 0) quoting up to 1280 bytes in
//     all (RFC 4443 §2.4(c)), hop limit 64.
//   - Either reply is at most as long as the packet it answers (with an
//     MTU below 576 or 1280 plus the overhead the whole packet would fit
//     in the quote): a spoofed packet never gets more bytes back than it
//     sent. The MTU field never goes below
//     1280 (RFC 8200 §5): with Config.MTU below 1280 + Overhead (1332 for
//     GUE over IPv6) the client cannot comply, so such MTUs should not be
//     used with IPv6 clients.
//   - IPv4 without DF: dropped (DropTooBigNoDF); fragmenting the outer
//     packet is a simplification Fulcrum skips.
//   - No ICMP error answers an ICMP error, a non-first IPv4 fragment or a
//     non-unicast source (RFC 1122 §3.2.2, RFC 4443 §2.4(e)).
//
// ICMP errors must be rate-limited (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f));
// Encap is stateless, so the dataplane does that by counting ICMPReply.
//
// # Results and drop reasons
//
// Encap returns a Result; the dataplane counts each value under its String
// name. Drops leave the buffer unchanged.
//
//	forward                  encapsulated toward the backend
//	icmp-reply               too big: the frame is now an ICMP error for the client
//	drop-too-big-no-df       too big, IPv4 without DF: not fragmented
//	drop-too-big-icmp-error  too big and itself an ICMP/ICMPv6 error: no error about an error
//	drop-too-big-no-reply    too big, and a non-first IPv4 fragment or a non-unicast address
//	drop-no-headroom         fewer bytes in front of the IP header than the headers need
//	drop-bad-packet          off/n/offsets do not describe an IP packet inside the buffer
//	drop-bad-backend         zero Backend, or no source address of its family
//	drop-bad-kind            Kind is not one of Kinds
//
// # Cost
//
// Encap allocates nothing, takes no locks and does no netip work: addresses
// are resolved once into Backend values on the slow path. Every offset is
// checked against the buffer, so no input panics.
package encap
