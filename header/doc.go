// Package header is Fulcrum's one place that knows where the fields of the
// headers it reads and writes sit: Ethernet, IPv4, IPv6 and its extension
// headers, TCP, UDP, GRE, ICMP and ICMPv6. Like gVisor's pkg/tcpip/header,
// a header is a typed view of a byte slice (type IPv4 []byte) with named
// accessors and setters, so parsing and writing in place reads like field
// access, with no copy and no allocation.
//
// What it trades: an accessor does not check the slice's length. A view is
// only as safe as the caller's length check (IPv4MinimumSize, HeaderLength,
// ...), exactly as with raw indexing, and an access past the end panics. In
// return every accessor is a leaf the compiler inlines to the same load it
// replaces, and after one length check the bounds checks of the fields that
// follow are proved away, so the dataplane pays nothing for names. Code that
// handles untrusted bytes (package packet, package decap) checks lengths
// first and then reads through views.
//
// It also owns the two pieces of header logic that used to be copied:
// the IPv4 header checksum (IPv4.CalculateChecksum) and the IPv6
// extension-header walk (WalkIPv6Ext), with the pseudo-header sums that
// transport checksums start from. The arithmetic is internal/inetsum's.
package header
