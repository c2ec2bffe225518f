package admin_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// The status page heads an IPv6 VIP with its address in brackets, as
// fulcrumctl writes it: "[2001:db8:ffff::7]:80/tcp", not the ambiguous
// "2001:db8:ffff::7:80/tcp" (the port reads as the address's last group).
func TestStatusPageBracketsIPv6VIP(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Web(2).
		VIP("web6", "2001:db8:ffff::7", 80).
		Backend("be1", "10.0.1.1").
		String()
	e := start(t, toml, loopback())
	resp, err := http.Get(e.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", resp.StatusCode, b)
	}
	page := string(b)
	for _, want := range []string{"web6 <span class=\"meta\">[2001:db8:ffff::7]:80/tcp ", "web <span class=\"meta\">203.0.113.7:80/tcp "} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "2001:db8:ffff::7:80") {
		t.Error("page writes the IPv6 VIP without brackets: 2001:db8:ffff::7:80")
	}
}
