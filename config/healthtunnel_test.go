package config

import (
	"errors"
	"fmt"
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

// TestHealthThroughLimit: checks through the tunnel take one source port
// each, health.TunnelSlots over all VIPs; one more is refused by Parse
// (so by `fulcrum check`) at the first backend too many, where `fulcrum
// run` would otherwise fail to build its snapshot. Backends of VIPs
// checked directly do not count.
func TestHealthThroughLimit(t *testing.T) {
	build := func(tunnelled int) string {
		b := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`)
		// A VIP checked directly, with 50 backends, first.
		b.VIP("direct", "203.0.113.9", 80)
		b.Sub("[vip.health]", `kind = "tcp"`)
		for i := range 50 {
			b.Backend(fmt.Sprintf("d%d", i), fmt.Sprintf("10.9.%d.%d", i>>8, i&255))
		}
		// Two VIPs checked through the tunnel, sharing the slots.
		for v, n := range []int{tunnelled / 2, tunnelled - tunnelled/2} {
			b.VIP(fmt.Sprintf("t%d", v), fmt.Sprintf("203.0.113.%d", 20+v), 80)
			b.Sub("[vip.health]", `kind = "tcp"`, `through = "tunnel"`)
			for i := range n {
				b.Backend(fmt.Sprintf("b%d", i), fmt.Sprintf("10.%d.%d.%d", 10+v, i>>8, i&255))
			}
		}
		return b.String()
	}
	if _, err := Parse([]byte(build(health.TunnelSlots)), "f.toml"); err != nil {
		t.Fatalf("%d backends checked through the tunnel refused: %v", health.TunnelSlots, err)
	}
	_, err := Parse([]byte(build(health.TunnelSlots+1)), "f.toml")
	var es Errors
	want := fmt.Sprintf("vip[2].backend[%d]", health.TunnelSlots-health.TunnelSlots/2)
	if !errors.As(err, &es) || len(es) != 1 || es[0].Key != want {
		t.Fatalf("got %v, want one problem at %s", err, want)
	}
}
