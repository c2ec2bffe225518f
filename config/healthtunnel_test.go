package config

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/health"
)

// TestHealthThrough: through is "direct" unless set, inherits from
// [health], and "tunnel" is refused, at the key's line, without the
// exception path or an LB address of the VIP's family.
func TestHealthThrough(t *testing.T) {
	dp := []string{`next_hop_mac = "02:00:00:00:00:fe"`}
	for _, tc := range []struct {
		name    string
		toml    string
		through string // of vip[0], when valid
		line    int    // of the problem, when not
		key     string
		msg     string
	}{
		{"default", configtest.New().Dataplane(dp...).Web(1).Sub("[vip.health]", `kind = "tcp"`).String(), health.ThroughDirect, 0, "", ""},
		{"vip", configtest.New().Dataplane(dp...).Web(1).Sub("[vip.health]", `kind = "tcp"`, `through = "tunnel"`).String(), health.ThroughTunnel, 0, "", ""},
		{"inherited", configtest.New().Dataplane(dp...).Section("health", `through = "tunnel"`).Web(1).Sub("[vip.health]", `kind = "tcp"`).String(), health.ThroughTunnel, 0, "", ""},
		{"no checks", configtest.New().Dataplane(append(dp, "exception = false")...).Web(1).Sub("[vip.health]", `through = "tunnel"`).String(), health.ThroughTunnel, 0, "", ""},
		{"bad value", configtest.New().Dataplane(dp...).Web(1).Sub("[vip.health]", `kind = "tcp"`, `through = "sideways"`).String(), "", 17, "vip[0].health.through", `"sideways" is not direct or tunnel`},
		{"no exception", configtest.New().Dataplane(append(dp, "exception = false")...).Web(1).Sub("[vip.health]", `kind = "tcp"`, `through = "tunnel"`).String(), "", 18, "vip[0].health.through", "exception is off"},
		{"inherited no exception", configtest.New().Dataplane(append(dp, "exception = false")...).Section("health", `through = "tunnel"`).Web(1).Sub("[vip.health]", `kind = "tcp"`).String(), "", 10, "health.through", "exception is off"},
		{"no lb_ipv6", configtest.New().Dataplane(dp...).VIP("six", "2001:db8::7", 80).Backend("b", "2001:db8:1::1").Sub("[vip.health]", `kind = "tcp"`, `through = "tunnel"`).String(), "", 0, "vip[0].health.through", "needs dataplane.lb_ipv6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.toml), "f.toml")
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("Parse: %v\n%s", err, tc.toml)
				}
				if got := c.VIPs[0].Health.Through; got != tc.through {
					t.Fatalf("through = %q, want %q", got, tc.through)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tc.toml)
			}
			ps := problemsOf(t, err)
			for _, p := range ps {
				if p.key == tc.key && strings.Contains(p.msg, tc.msg) && (tc.line == 0 || p.line == tc.line) {
					return
				}
			}
			t.Fatalf("problems %+v, want %s at line %d containing %q\n%s", ps, tc.key, tc.line, tc.msg, tc.toml)
		})
	}
}
