package control

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// README ("Hash fields"): src-ip keeps together a client's connections to
// every src-ip VIP with the same backends (names, weights) and table_size.
// Two such VIPs: every client reaches the same backend on both. At
// another table_size they disagree (the docs said names and weights were
// enough): the case is counted, to keep the documented condition honest.
func TestSrcIPAffinityAcrossVIPs(t *testing.T) {
	for _, tc := range []struct {
		size  string
		agree bool
	}{{"65537", true}, {"4099", false}} {
		if split := srcIPSplit(t, tc.size); (split == 0) != tc.agree {
			t.Errorf("img at table_size %s: %d of 10000 clients reach one backend on web (65537) and another on img; want agreement %v", tc.size, split, tc.agree)
		}
	}
}

// srcIPSplit counts the clients of 10,000 that two src-ip VIPs with the
// same backends send to different backends, web at 65537 slots and img at
// size.
func srcIPSplit(t *testing.T, size string) int {
	backends := `
  [[vip.backend]]
  name = "be1"
  address = "10.0.1.1"
  [[vip.backend]]
  name = "be2"
  address = "10.0.1.2"
  [[vip.backend]]
  name = "be3"
  address = "10.0.1.3"
`
	toml := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).String() +
		"\n[[vip]]\nname = \"web\"\naddress = \"203.0.113.7\"\nport = 443\nhash = \"src-ip\"\n" + backends +
		"\n[[vip]]\nname = \"img\"\naddress = \"203.0.113.8\"\nport = 443\nhash = \"src-ip\"\ntable_size = " + size + "\n" + backends
	cfg, err := config.Parse([]byte(toml), "srcip.toml")
	if err != nil {
		t.Fatal(err)
	}
	nh, _ := StaticNextHop(cfg)
	svc, err := BuildServices(cfg, nil, nil, nh)
	if err != nil {
		t.Fatal(err)
	}
	h := flow.NewHasher(probeKey(t))
	web := svc.LookupVIP(netip.MustParseAddr("203.0.113.7"), 443, 6)
	img := svc.LookupVIP(netip.MustParseAddr("203.0.113.8"), 443, 6)
	const clients = 10000
	split := 0
	for i := range clients {
		src := netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)})
		pick := func(v *dataplane.VIP) string {
			tu, _ := flow.TupleFrom(src, v.Addr, uint16(40000+i), 443, 6)
			return svc.Backends[v.Backends[v.Table.Lookup(h.HashFields(&tu, v.Hash))]].Name
		}
		if pick(web) != pick(img) {
			split++
		}
	}
	return split
}
