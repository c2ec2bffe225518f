package gen

import "github.com/fulcrumlb/fulcrum/internal/inetsum"

func fold(s uint64) uint16          { return inetsum.Fold(s) }
func sum(s uint64, b []byte) uint64 { return inetsum.Add(s, b) }

// Internet checksum (RFC 1071). Sums are carried unfolded in a uint64 as the
// sum of big-endian 16-bit words and folded once at the end; a frame's worth
// of words cannot overflow 64 bits. Only headers are summed per frame: a
// template's payload is summed once (template.paySum), which is what keeps
// 1518-byte frames nearly as cheap to generate as 64-byte ones. The IPv4
// header checksum is header.IPv4.UpdateChecksum.
