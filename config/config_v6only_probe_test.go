package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// v6conf writes an IPv6-only configuration: lb_ipv6, gateway_ipv6, one
// VIP at vip with backends addrs; dp are extra [dataplane] keys, vk extra
// VIP keys.
func v6conf(dp []string, vip string, vk []string, addrs ...string) string {
	b := configtest.New().Section("dataplane", append(append([]string{`port = "net_ring0"`, `lb_ipv6 = "2001:db8:1::10"`}, dp...), `hash_key = "`+configtest.HashKey+`"`)...).
		Section("conntrack", "capacity = 4096")
	b.VIP("v6", vip, 80, vk...)
	for i, a := range addrs {
		b.Backend("be"+string(rune('a'+i)), a)
	}
	return b.String()
}

func TestV6OnlyProbeBaselineAccepted(t *testing.T) {
	c, err := Parse([]byte(v6conf([]string{`gateway_ipv6 = "fe80::1"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1", "2001:db8:2::2")), "v6.toml")
	if err != nil {
		t.Fatalf("IPv6-only configuration refused: %v", err)
	}
	if got := c.VIPs[0].Backends[0].Address.Addr; got != netip.MustParseAddr("2001:db8:2::1") {
		t.Errorf("backend %v", got)
	}
	// And it round-trips.
	s, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(s), "enc"); err != nil {
		t.Fatalf("effective IPv6-only config does not re-parse: %v\n%s", err, s)
	}
}

// Mistakes an IPv6 operator makes that must be refused, each at its key.
func TestV6OnlyProbeMistakesRefused(t *testing.T) {
	gw := []string{`gateway_ipv6 = "fe80::1"`}
	for _, tc := range []struct {
		name, toml, key string
	}{
		{"backend /64", v6conf(gw, "2001:db8:ffff::7", nil, "2001:db8:2::/64"), "vip[0].backend[0].address"},
		{"backend /128", v6conf(gw, "2001:db8:ffff::7", nil, "2001:db8:2::1/128"), "vip[0].backend[0].address"},
		{"vip /128", v6conf(gw, "2001:db8:ffff::7/128", nil, "2001:db8:2::1"), "vip[0].address"},
		{"backend zone", v6conf(gw, "2001:db8:ffff::7", nil, "fe80::5%eth0"), "vip[0].backend[0].address"},
		{"gateway zone", v6conf([]string{`gateway_ipv6 = "fe80::1%eth0"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1"), "dataplane.gateway_ipv6"},
		{"gateway /64", v6conf([]string{`gateway_ipv6 = "2001:db8:1::/64"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1"), "dataplane.gateway_ipv6"},
		{"lb_ipv6 /64", strings.Replace(v6conf(gw, "2001:db8:ffff::7", nil, "2001:db8:2::1"), `"2001:db8:1::10"`, `"2001:db8:1::10/64"`, 1), "dataplane.lb_ipv6"},
		{"lb_ipv6 link-local", strings.Replace(v6conf(gw, "2001:db8:ffff::7", nil, "2001:db8:2::1"), `"2001:db8:1::10"`, `"fe80::10"`, 1), "dataplane.lb_ipv6"},
		{"lb_ipv6 mapped", strings.Replace(v6conf(gw, "2001:db8:ffff::7", nil, "2001:db8:2::1"), `"2001:db8:1::10"`, `"::ffff:192.0.2.10"`, 1), "dataplane.lb_ipv6"},
		{"gateway_ipv6 mapped", v6conf([]string{`gateway_ipv6 = "::ffff:192.0.2.1"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1"), "dataplane.gateway_ipv6"},
		{"gateway_ipv6 is IPv4", v6conf([]string{`gateway_ipv6 = "192.0.2.1"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1"), "dataplane.gateway_ipv6"},
		{"gateway_ipv4 is IPv6", v6conf([]string{`gateway_ipv6 = "fe80::1"`, `gateway_ipv4 = "2001:db8:1::1"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1"), "dataplane.gateway_ipv4"},
		{"vip link-local", v6conf(gw, "fe80::7", nil, "2001:db8:2::1"), "vip[0].address"},
		{"vip multicast", v6conf(gw, "ff02::7", nil, "2001:db8:2::1"), "vip[0].address"},
		{"vip loopback", v6conf(gw, "::1", nil, "2001:db8:2::1"), "vip[0].address"},
		{"vip unspecified", v6conf(gw, "::", nil, "2001:db8:2::1"), "vip[0].address"},
		{"backend loopback", v6conf(gw, "2001:db8:ffff::7", nil, "::1"), "vip[0].backend[0].address"},
		{"backend multicast", v6conf(gw, "2001:db8:ffff::7", nil, "ff05::1"), "vip[0].backend[0].address"},
		{"backend is lb_ipv6", v6conf(gw, "2001:db8:ffff::7", nil, "2001:db8:1::10"), "vip[0].backend[0].address"},
		{"backend is lb_ipv6 other spelling", v6conf(gw, "2001:db8:ffff::7", nil, "2001:DB8:1:0:0:0:0:10"), "vip[0].backend[0].address"},
		{"gateway is lb_ipv6", v6conf([]string{`gateway_ipv6 = "2001:db8:1::10"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1"), "dataplane.gateway_ipv6"},
		{"gateway is vip", v6conf([]string{`gateway_ipv6 = "2001:db8:ffff::7"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1"), "dataplane.gateway_ipv6"},
		{"no gateway_ipv6, only v4", strings.Replace(v6conf([]string{`gateway_ipv4 = "192.0.2.1"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1"), `lb_ipv6 = "2001:db8:1::10"`, `lb_ipv6 = "2001:db8:1::10"`+"\nlb_ipv4 = \"192.0.2.10\"", 1), "vip[0].backend[0].address"},
		{"ipv4 backend no lb_ipv4", v6conf(gw, "2001:db8:ffff::7", nil, "10.0.1.1"), "vip[0].backend[0].address"},
		{"vip is lb_ipv6", v6conf(gw, "2001:db8:1::10", nil, "2001:db8:2::1"), "vip[0].address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml), "v6.toml")
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.toml)
			}
			var errs Errors
			if e, ok := err.(Errors); ok {
				errs = e
			}
			found := false
			for _, p := range errs {
				if p.Key == tc.key || strings.HasPrefix(p.Msg, tc.key) {
					found = true
				}
			}
			if !found && !strings.Contains(err.Error(), tc.key) {
				t.Errorf("refused, but not at %s: %v", tc.key, err)
			}
		})
	}
}

// A link-local backend: routers never forward a link-local destination,
// and the tunnels go to the gateway's MAC, so such a backend is
// unreachable (unless it is the gateway itself). It should be refused as
// a link-local VIP is.
func TestV6OnlyProbeLinkLocalBackendRefused(t *testing.T) {
	_, err := Parse([]byte(v6conf([]string{`gateway_ipv6 = "fe80::1"`}, "2001:db8:ffff::7", nil, "fe80::5", "2001:db8:2::2")), "v6.toml")
	if err == nil {
		t.Fatal("backend fe80::5 (link-local, no zone) accepted: its tunnels go to the gateway's MAC with a link-local destination no router forwards")
	}
	if !strings.Contains(err.Error(), "vip[0].backend[0].address") {
		t.Errorf("refused, not at the backend: %v", err)
	}
}

// An IPv4-mapped VIP address is silently turned into an IPv4 VIP.
func TestV6OnlyProbeMappedVIPKeepsFamilyOrRefused(t *testing.T) {
	c, err := Parse([]byte(v6conf([]string{`gateway_ipv6 = "fe80::1"`}, "::ffff:203.0.113.9", nil, "2001:db8:2::1")), "v6.toml")
	if err != nil {
		return // refused: fine
	}
	t.Errorf("VIP \"::ffff:203.0.113.9\" accepted as %v (family changed to IPv4 without a word; its prefix announced is %v)", c.VIPs[0].Address.Addr, netip.PrefixFrom(c.VIPs[0].Address.Addr, c.VIPs[0].Address.Addr.BitLen()))
}

// Linux disables IPv6 on an interface whose MTU is below 1280 (RFC 8200
// §5's minimum link MTU): the exception interface could hold no lb_ipv6,
// and no IPv6 backend's link can have such an MTU. check must refuse
// what run cannot do.
func TestV6OnlyProbeMTUBelow1280WithIPv6Refused(t *testing.T) {
	_, err := Parse([]byte(v6conf([]string{`gateway_ipv6 = "fe80::1"`, "mtu = 1000"}, "2001:db8:ffff::7", nil, "2001:db8:2::1")), "v6.toml")
	if err == nil {
		t.Fatal("mtu = 1000 with lb_ipv6 and IPv6 backends accepted: IPv6 needs a link MTU of at least 1280")
	}
	if !strings.Contains(err.Error(), "dataplane.mtu") {
		t.Errorf("refused, not at dataplane.mtu: %v", err)
	}
}

// With mtu below 1280 + the IPv6 outer overhead, a 1280-byte IPv6 packet
// (which every IPv6 client may send and will not shrink: PTB below 1280
// is not honoured) to an IPv6 VIP over GUE/IPv6 can never be forwarded.
func TestV6OnlyProbeMTUTooSmallForIPv6VIPRefused(t *testing.T) {
	_, err := Parse([]byte(v6conf([]string{`gateway_ipv6 = "fe80::1"`, "mtu = 1300", `encap = "gue"`}, "2001:db8:ffff::7", nil, "2001:db8:2::1")), "v6.toml")
	if err == nil {
		t.Fatal("mtu = 1300 with an IPv6 VIP over GUE/IPv6 (52 bytes) accepted: 1280-byte IPv6 packets can never be forwarded")
	}
}

// IPv6 inner over IPv4 outer IPIP (protocol 41, 6in4) is a real tunnel:
// an IPv6 VIP with ipip and an IPv4 backend must be accepted, and the
// reverse (4in6) too.
func TestV6OnlyProbeIPIPCrossFamilyAccepted(t *testing.T) {
	toml := configtest.New().Dataplane(`lb_ipv6 = "2001:db8:1::10"`, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv6 = "fe80::1"`).
		Section("conntrack", "capacity = 4096").
		VIP("v6", "2001:db8:ffff::7", 80, `encap = "ipip"`).Backend("b4", "10.0.1.1").
		VIP("v4", "203.0.113.7", 80, `encap = "ipip"`).Backend("b6", "2001:db8:2::1").String()
	c, err := Parse([]byte(toml), "x.toml")
	if err != nil {
		t.Fatalf("cross-family ipip refused: %v", err)
	}
	if !c.VIPs[0].Backends[0].Address.Is4() || !c.VIPs[1].Backends[0].Address.Is6() {
		t.Errorf("families: %v %v", c.VIPs[0].Backends[0].Address, c.VIPs[1].Backends[0].Address)
	}
}

// A backend name that is the backend's address in another spelling is
// kept in the standard form (README), for IPv6 too.
func TestV6OnlyProbeBackendNameCanonical(t *testing.T) {
	toml := configtest.New().Section("dataplane", `port = "net_ring0"`, `lb_ipv6 = "2001:db8:1::10"`, `gateway_ipv6 = "fe80::1"`, `hash_key = "`+configtest.HashKey+`"`).
		Section("conntrack", "capacity = 4096").
		VIP("v6", "2001:db8:ffff::7", 80).Backend("2001:DB8:2:0::1", "2001:db8:2::1").String()
	c, err := Parse([]byte(toml), "x.toml")
	if err != nil {
		t.Fatal(err)
	}
	if n := c.VIPs[0].Backends[0].Name; n != "2001:db8:2::1" {
		t.Errorf("name %q, want 2001:db8:2::1", n)
	}
}
