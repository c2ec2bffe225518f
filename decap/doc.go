// Package decap is the backend's half of Fulcrum's tunnels: it checks the
// outer headers that package encap writes and finds the inner IP packet,
// in place, for a user-space decapsulator (cmd/fulcrum-decap) to hand to
// the kernel. Production backends use the kernel's own GRE, IPIP and FOU
// devices instead; this package exists for kernels without them (the lab).
//
// # Entry points
//
// The three entry points match what the three kinds of socket deliver:
//
//	Strip(pkt)                 from the outer IP header: a raw IPv4 socket, AF_PACKET (after Ethernet)
//	StripPayload(proto, b)     from the tunnel header: a raw IPv6 socket (the kernel keeps the IPv6 header)
//	StripGUE(b)                from the GUE header: the payload a UDP socket bound to the GUE port reads
//
// Each has a twin ending in Chance (StripChance, ...) that also returns the
// second chance the header names, if any. Each returns the inner packet as
// a sub-slice of its input (nothing is
// copied), trimmed to the length its own header states, so link-layer
// padding and trailing bytes never reach the kernel.
//
// # What is accepted
//
//   - Outer IPv4: version 4, IHL >= 5, total length within the buffer,
//     header checksum correct, not a fragment (raw sockets see reassembled
//     packets; AF_PACKET does not, and Fulcrum sends atomic datagrams).
//   - Outer IPv6: version 6, payload length within the buffer; hop-by-hop,
//     routing and destination options headers are skipped, a fragment
//     header is refused.
//   - GRE (RFC 2784): version 0, protocol type 0x0800 or 0x86DD. Choice:
//     the optional checksum that RFC 2784 defines is accepted and verified
//     over the GRE header and payload; RFC 2890's key is accepted and read
//     as a second chance (an IPv4 unicast address, else ErrSecondChance;
//     see docs/second-chance.md); the sequence number of RFC 2890 (and RFC
//     1701's routing bits) are refused with ErrGREFlags, as RFC 2784 §2.3
//     asks of a receiver that does not implement RFC 1701: Fulcrum never
//     sends them. Reserved bits 6-12 are ignored (§2.3).
//   - IPIP: protocol 4 (IPv4 inside, RFC 2003 / RFC 2473) or 41 (IPv6
//     inside, RFC 4213 / RFC 2473), over either outer family.
//   - GUE (draft-ietf-intarea-gue): UDP to the configured port (6080 by
//     default). Variant 0 with the control bit clear, Hlen optional words
//     skipped, no flags set (this decapsulator implements no optional
//     field, and Linux's fou also drops flags it does not know); a private
//     data block of Fulcrum's type (0x5343) is read as a second chance
//     (docs/second-chance.md), any other is skipped,
//     proto/ctype 4 or 41. Variant 1 (direct IP encapsulation, the inner
//     header right after UDP) is accepted too, as Linux's fou accepts it.
//     Control messages are refused (ErrGUEControl). The UDP length must fit
//     the packet; a non-zero UDP checksum is verified; a zero one is
//     accepted over IPv4 (RFC 768) and over IPv6 only when
//     Config.GUEZeroChecksumV6 says so (RFC 6935, RFC 6936 §5), mirroring
//     encap.Config.GUEZeroChecksumV6.
//   - Inner packet: an IPv4 or IPv6 header of the version the tunnel
//     header announces, its length within the tunnel payload, and not
//     itself a tunnel: an inner protocol 4, 41 or 47, or UDP to the GUE
//     port when GUE is accepted (after inner IPv6 extension headers, at most
//     MaxInnerExtHeaders of them), is refused with ErrInnerTunnel, since
//     the kernel would hand it back to the decapsulator to strip again.
//     The inner checksums are left to the kernel that receives the
//     packet.
//   - ECN (RFC 6040 §4.2, as Linux's tunnels): Strip, which sees the outer
//     header, moves an outer CE (or ECT(1) over ECT(0)) to the inner
//     header, fixing its IPv4 checksum, and refuses an outer CE over a
//     Not-ECT inner packet (ErrECN). StripPayload and StripGUE cannot see
//     the outer header: their caller passes the outer TOS or traffic
//     class the socket reported to ECN, which does the same.
//
// # Errors
//
// Every refusal is one Error value (ErrTruncated, ErrGREFlags, ...): a
// comparable sentinel that errors.Is matches, that converts to an error
// without allocating, and whose String is the drop counter's name. An
// Error indexes arrays of NumErrors counters.
//
// # Cost
//
// Strip and friends allocate nothing and keep no state; a Decapsulator is
// immutable after New, so goroutines share one. Every offset is checked
// against the buffer, so no input panics (see the fuzz targets). Only the
// checksums that are present are summed: a GRE checksum or a non-zero UDP
// checksum costs one pass over the payload.
package decap
