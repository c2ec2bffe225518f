package config_test

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// TestGatewayIPv6OnLinkCheckSparesIPv4OnlyConfigs: without lb_ipv6 the
// LB has no IPv6 tunnels at all (an IPv6 backend is refused), so
// gateway_ipv6 is never resolved for any packet: a fleet template that
// sets it on every instance, IPv6 or not, was accepted before the on-link
// check and must still be (the check's reason, an unresolvable IPv6 next
// hop for IPv6 tunnels, cannot arise). Refused, an upgraded instance
// neither starts nor reloads with the configuration it runs.
func TestGatewayIPv6OnLinkCheckSparesIPv4OnlyConfigs(t *testing.T) {
	toml := configtest.New().
		Dataplane(`gateway_ipv4 = "192.0.2.1"`, `gateway_ipv6 = "2001:db8:100::1"`).
		Section("conntrack", "capacity = 4096").
		Web(2).String()
	if _, err := config.Parse([]byte(toml), "v4only.toml"); err != nil {
		t.Errorf("an IPv4-only configuration (no lb_ipv6, IPv4 backends) refused for its unused gateway_ipv6: %v", err)
	}
}
