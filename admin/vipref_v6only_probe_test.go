package admin_test

import (
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// fulcrumctl and the status page write an IPv6 VIP as
// "[2001:db8:ffff::7]:80/tcp" and an IPv4 one as "203.0.113.7:80/tcp".
// For an unnamed IPv4 VIP that text is its name and addresses it in the
// API; the IPv6 one's printed form should address it too, as should the
// bracketed address:port, the bare address, and a lookup of an IPv6 flow.
func TestV6OnlyProbeVIPRefsAsPrinted(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, `lb_ipv6 = "2001:db8:1::10"`).
		Section("conntrack", "capacity = 65536").
		Section("[vip]", `address = "203.0.113.7"`, `port = 80`).
		Backend("be1", "2001:db8:2::1").
		Section("[vip]", `address = "2001:db8:ffff::7"`, `port = 80`).
		Backend("c1", "2001:db8:2::11").
		String()
	e := start(t, toml, loopback())
	get := func(ref string) int {
		resp, err := http.Get(e.base + "/api/v1/vips/" + url.PathEscape(ref))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, ref := range []string{
		"203.0.113.7:80/tcp",        // the IPv4 VIP as printed: its name
		"2001:db8:ffff::7",          // the address
		"[2001:db8:ffff::7]:80",     // address:port
		"[2001:db8:ffff::7]:80/tcp", // as fulcrumctl and the page print it
	} {
		if code := get(ref); code != 200 {
			t.Errorf("GET vip %q: %d, want 200", ref, code)
		}
	}
	resp, err := http.Get(e.base + "/api/v1/lookup?src=2001:db8:9::1&dst=2001:db8:ffff::7&sport=1234&dport=80")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("lookup of an IPv6 flow: %d %s", resp.StatusCode, b)
	}
}
