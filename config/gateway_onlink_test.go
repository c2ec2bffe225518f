package config

import (
	"strings"
	"testing"
)

// TestOffLinkGatewayIPv6Refused: the IPv6 gateway is resolved by the
// kernel through the exception interface, whose only on-link prefix is
// lb_ipv6/lb_ipv6_prefix (and fe80::/10). A global gateway outside it has
// no route there, and IPv6 (unlike IPv4, which assumes on-link for a
// socket bound to the device) never solicits it: the resolver's poke
// fails with ENETUNREACH, the gateway stays unresolved for ever, and
// every tunnel with an IPv6 outer header is dropped as no-next-hop
// (checked by hand in the exception package's LAN rig: the peer holding
// 2001:db8:200::1 on the link, IPv4 10.9.9.1 off-link resolved at once,
// IPv6 never). fulcrum check accepts it.
func TestOffLinkGatewayIPv6Refused(t *testing.T) {
	for _, tc := range []struct{ name, toml string }{
		{"another /64", v6conf([]string{`gateway_ipv6 = "2001:db8:2::1"`}, "2001:db8:ffff::7", nil, "2001:db8:3::1")},
		{"lb_ipv6_prefix 128", v6conf([]string{`gateway_ipv6 = "2001:db8:1::1"`, `lb_ipv6_prefix = 128`}, "2001:db8:ffff::7", nil, "2001:db8:3::1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml), "v6.toml")
			if err == nil {
				t.Fatalf("accepted a gateway_ipv6 the exception interface cannot reach on its link:\n%s", tc.toml)
			}
			if !strings.Contains(err.Error(), "dataplane.gateway_ipv6") {
				t.Errorf("refused, but not at dataplane.gateway_ipv6: %v", err)
			}
		})
	}
	// On the link: accepted.
	for _, gw := range []string{"2001:db8:1::1", "fe80::1"} {
		if _, err := Parse([]byte(v6conf([]string{`gateway_ipv6 = "` + gw + `"`}, "2001:db8:ffff::7", nil, "2001:db8:3::1")), "v6.toml"); err != nil {
			t.Errorf("gateway_ipv6 %s on the link refused: %v", gw, err)
		}
	}
}
