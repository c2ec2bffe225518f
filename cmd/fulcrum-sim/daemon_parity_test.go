package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/control"
)

// daemonSlots is the table the daemon builds for one VIP with backends
// (TOML lines of [[vip.backend]] entries), as "slot key" lines: what
// `fulcrum-sim table` prints.
func daemonSlots(t *testing.T, size int, backends ...string) string {
	t.Helper()
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, `lb_ipv6 = "2001:db8:ff::10"`).String() +
		fmt.Sprintf("\n[[vip]]\naddress = %q\nport = 80\ntable_size = %d\n", configtest.Web, size)
	for _, b := range backends {
		toml += "  [[vip.backend]]\n  " + strings.ReplaceAll(b, ";", "\n  ") + "\n"
	}
	cfg, err := config.Parse([]byte(toml), "parity.toml")
	if err != nil {
		t.Fatal(err)
	}
	nh, _ := control.StaticNextHop(cfg)
	svc, err := control.BuildServices(cfg, nil, nil, nh)
	if err != nil {
		t.Fatal(err)
	}
	tab := svc.VIPs[0].Table
	var b strings.Builder
	for s := range tab.Size() {
		fmt.Fprintf(&b, "%d %s\n", s, tab.Backend(tab.Slot(s)).Key)
	}
	return b.String()
}

// canonKey is a "slot key" line with the key trimmed and, if it is an
// address, in its standard form: two lines differ under it only when
// another backend owns the slot.
func canonKey(line string) string {
	slot, key, _ := strings.Cut(line, " ")
	key = strings.TrimSpace(key)
	if a, err := netip.ParseAddr(key); err == nil {
		key = a.Unmap().String()
	}
	return slot + " " + key
}

// fulcrum-sim table shows "the Maglev table an operator gets for a
// backend set": given the backends as the configuration writes them, it
// must print the daemon's table slot for slot, or refuse the input; never
// print another table.
func TestTableMatchesDaemon(t *testing.T) {
	cases := []struct {
		name     string
		backends string   // --backends
		config   []string // the same backends in the daemon's configuration
	}{
		{"names and weights", "be1,be2:2,be3",
			[]string{`name = "be1";address = "10.0.1.1"`, `name = "be2";address = "10.0.1.2";weight = 2`, `name = "be3";address = "10.0.1.3"`}},
		{"ipv4 addresses (default names)", "10.0.1.1,10.0.1.2:2",
			[]string{`address = "10.0.1.1"`, `address = "10.0.1.2";weight = 2`}},
		{"ipv6 addresses as the configuration writes them", "2001:DB8::1:1,2001:DB8::2:2",
			[]string{`address = "2001:DB8::1"`, `address = "2001:DB8::2";weight = 2`}},
		{"ipv6 addresses with zeros written", "2001:0db8:0:0::1:1,2001:0db8:0:0::2:2",
			[]string{`address = "2001:0db8:0:0::1"`, `address = "2001:0db8:0:0::2";weight = 2`}},
		{"a list written with spaces", "be1, be2:2, be3",
			[]string{`name = "be1";address = "10.0.1.1"`, `name = "be2";address = "10.0.1.2";weight = 2`, `name = "be3";address = "10.0.1.3"`}},
		// An IPv6 address without its weight: the text after its last
		// ':' is a group of the address, not a weight; it was read as
		// the name "2001:db8:" with exit 0.
		{"ipv6 addresses without weights", "2001:db8::1,2001:db8:1::1",
			[]string{`address = "2001:db8::1"`, `address = "2001:db8:1::1"`}},
		{"one of them looks weighted", "2001:db8::1:1,2001:db8::2",
			[]string{`address = "2001:db8::1:1"`, `address = "2001:db8::2"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run([]string{"table", "--backends", c.backends, "--size", "251"}, strings.NewReader(""), &out, &errOut)
			if code == 2 {
				return // refused: the operator is told, not misled
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			want := daemonSlots(t, 251, c.config...)
			if out.String() != want {
				diff := 0
				g, w := strings.Split(out.String(), "\n"), strings.Split(want, "\n")
				for i := range min(len(g), len(w)) {
					if canonKey(g[i]) != canonKey(w[i]) {
						diff++ // another backend owns the slot
					}
				}
				t.Errorf("fulcrum-sim table --backends %q prints another table than the daemon builds: %d of 251 slots differ (sim %q..., daemon %q...)",
					c.backends, diff, g[0], w[0])
			}
		})
	}
}
