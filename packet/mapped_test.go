package packet

import (
	"testing"

	"github.com/google/gopacket/layers"
)

// An IPv6 packet from or to an IPv4-mapped address (::ffff:0:0/96) is
// refused by Parse (MappedIPv6) and left to it by ParseFlow; addresses
// that only look alike (::ffff:0:0:0/96, 64:ff9b::/96, ::a.b.c.d) parse.
func TestMappedIPv6(t *testing.T) {
	for _, c := range []struct {
		src, dst string
		want     Reason
	}{
		{"2001:db8::1", "::ffff:203.0.113.7", MappedIPv6},
		{"::ffff:127.0.0.1", "2001:db8::7", MappedIPv6},
		{"::ffff:0.0.0.0", "2001:db8::7", MappedIPv6},
		{"::ffff:198.51.100.1", "::ffff:203.0.113.7", MappedIPv6},
		{"2001:db8::1", "2001:db8::7", OK},
		{"::ffff:0:c633:6401", "2001:db8::7", OK}, // ::ffff:0:0:0/96, IPv4-translated
		{"64:ff9b::c633:6401", "2001:db8::7", OK}, // the NAT64 prefix
		{"::c633:6401", "2001:db8::7", OK},        // IPv4-compatible (deprecated, not mapped)
		{"2001:db8::1", "1:0:0:0:0:ffff:cb00:7107", OK},
	} {
		f := build(t, eth(layers.EthernetTypeIPv6), ip6(c.src, c.dst, layers.IPProtocolTCP), tcp(1000, 80, true, false))
		var p Parsed
		if r := Parse(f, &p); r != c.want {
			t.Errorf("%s -> %s: Parse = %v, want %v", c.src, c.dst, r, c.want)
		}
		var q Parsed
		if ok := ParseFlow(f, &q); ok != (c.want == OK) {
			t.Errorf("%s -> %s: ParseFlow = %v, want %v", c.src, c.dst, ok, c.want == OK)
		}
	}
}
