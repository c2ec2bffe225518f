package dataplane

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// IPv6 fragments that no datagram can have (RFC 8200 §4.5: a fragment
// with M set whose length is not a multiple of 8, or one whose offset and
// length put the reassembled payload past 65,535 octets, "must be
// discarded") are bad-fragment (packet.BadFragment: "a fragment with an
// impossible offset/length"), not forwarded to a backend, whose kernel
// can only drop them and answer the sender with a Parameter Problem from
// the VIP.
func TestImpossibleIPv6FragmentsDropped(t *testing.T) {
	const src, vip6 = "2001:db8:c::1", "2001:db8:ffff::7"
	cases := []struct {
		name string
		f    []byte
	}{
		{"M set, 13 bytes", raw6(src, vip6, 44, cat(frag6(6, 16, true, 7), make([]byte, 13)))},
		{"end past 65535", raw6(src, vip6, 44, cat(frag6(6, 65528, false, 7), make([]byte, 16)))},
	}
	bothPaths(t, attackConfig, func(t *testing.T, r *rig) {
		for _, tc := range cases {
			bad := r.w.c.Parse[packet.BadFragment]
			out, v := r.run(tc.f)
			if d := tunnelDst(t, out[0], v[0]); d.IsValid() || r.w.c.Parse[packet.BadFragment] != bad+1 {
				t.Errorf("%s: verdict %v (forwarded to %v), bad-fragment +%d, want dropped as bad-fragment", tc.name, v[0], d, r.w.c.Parse[packet.BadFragment]-bad)
			}
		}
	})
}
