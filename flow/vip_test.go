package flow

import (
	"net/netip"
	"testing"
)

func TestVIPKeyString(t *testing.T) {
	for _, tc := range []struct {
		k    VIPKey
		want string
	}{
		{VIPKey{netip.MustParseAddr("203.0.113.7"), 80, 6}, "203.0.113.7:80/tcp"},
		{VIPKey{netip.MustParseAddr("2001:db8::7"), 65535, 17}, "2001:db8::7:65535/udp"},
		{VIPKey{netip.MustParseAddr("203.0.113.7"), 0, 6}, "203.0.113.7:0/tcp"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.k, got, tc.want)
		}
	}
}
