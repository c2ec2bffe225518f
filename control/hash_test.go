package control

import (
	"net/netip"
	"strings"
	"testing"
)

// Lookup hashes a flow under its VIP's hash setting, as the workers do:
// the backend it names for a new flow is where the flow's SYN goes, for
// every setting; under the 3-tuple and the source address all of one
// client's connections share one slot, under the 5-tuple they spread.
func TestLookupFollowsTheHashFields(t *testing.T) {
	client, vip := netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("203.0.113.7")
	for _, mode := range []string{"5-tuple", "3-tuple", "src-ip", "src-ip-prefix"} {
		f := newFixture(t, strings.Replace(baseConfig, "port = 80\n", "port = 80\nhash = \""+mode+"\"\n", 1))
		want := mode
		if mode == "src-ip-prefix" {
			want = "src-ip-prefix /24 /48"
		}
		slots, backends := map[int]bool{}, map[string]bool{}
		for sport := uint16(1000); sport < 1064; sport++ {
			res, err := f.plane.Lookup(client, vip, sport, 80, 6)
			if err != nil {
				t.Fatal(err)
			}
			got := f.lc.send(syn(t, sport, "S")).dst.String()
			if res.Reason != "table" || res.HashFields != want || res.Address != got {
				t.Fatalf("%s, port %d: lookup %+v, the SYN went to %s", mode, sport, res, got)
			}
			slots[res.Slot] = true
			backends[got] = true
		}
		if spread := mode == "5-tuple"; (len(backends) > 1) != spread || (len(slots) > 1) != spread {
			t.Errorf("%s: 64 connections of one client took %d slots, %d backends", mode, len(slots), len(backends))
		}
	}
}
