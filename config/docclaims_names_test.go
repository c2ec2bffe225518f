package config

import (
	"strings"
	"testing"
)

func TestDocClaimsNameSpelling(t *testing.T) {
	for _, c := range []struct{ addr, name, want string }{
		{"2001:db8::1", "2001:DB8::1", "2001:db8::1"},
		{"2001:db8::1", "2001:db8:0:0:0:0:0:1", "2001:db8::1"},
		{"10.0.1.1", "::ffff:10.0.1.1", "10.0.1.1"},
		{"10.0.1.1", "::FFFF:10.0.1.1", "10.0.1.1"},
		{"10.0.1.1", "::ffff:a00:101", "10.0.1.1"},
	} {
		toml := strings.Replace(base, `address = "10.0.1.1"`, `address = "`+c.addr+`"`+"\n  name = \""+c.name+`"`, 1)
		if strings.Contains(c.addr, ":") {
			toml = strings.Replace(toml, "[[vip]]", "[[vip]]", 1) + ""
			toml = strings.Replace(toml, `lb_ipv4 = "192.0.2.10"`, `lb_ipv4 = "192.0.2.10"`+"\nlb_ipv6 = \"2001:db8:100::10\"\ngateway_ipv6 = \"2001:db8:100::1\"", 1)
		}
		cfg, err := Parse([]byte(toml), "p.toml")
		if err != nil {
			t.Errorf("%s/%s: %v", c.addr, c.name, err)
			continue
		}
		if got := cfg.VIPs[0].Backends[0].Name; got != c.want {
			t.Errorf("backend %s named %q: kept as %q, want %q", c.addr, c.name, got, c.want)
		}
	}
}
