package bgp

import (
	"net/netip"
	"slices"
	"testing"

	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

func compileT(t *testing.T, c Config) *compiled {
	t.Helper()
	cc, err := c.WithDefaults().compile()
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func TestResolve(t *testing.T) {
	c := validConfig()
	c.Communities = []string{"65000:100", "65000:1"}
	c.MED = u32(10)
	c.NextHopV6 = "2001:db8::99"
	c.VIPs = []VIPConfig{{Prefix: "203.0.113.7", Communities: []string{"65000:7", "65000:100"}, MED: u32(50)}}
	cc := compileT(t, c)
	vip := netip.MustParsePrefix("203.0.113.7/32")
	other := netip.MustParsePrefix("2001:db8::8/128")
	c65000 := func(v uint32) Community { return Community(65000<<16 | v) }

	tests := []struct {
		name string
		p    netip.Prefix
		va   VIPAttrs
		want attrs
	}{
		{"global only", other, VIPAttrs{},
			attrs{communities: []Community{c65000(1), c65000(100)}, med: 10, hasMED: true, nextHop: netip.MustParseAddr("2001:db8::99")}},
		{"per-VIP MED and communities, deduplicated", vip, VIPAttrs{},
			attrs{communities: []Community{c65000(1), c65000(7), c65000(100)}, med: 50, hasMED: true}},
		{"caller's MED wins, communities add", vip, VIPAttrs{MED: u32(0), Communities: []Community{CommunityNoExport}},
			attrs{communities: []Community{c65000(1), c65000(7), c65000(100), CommunityNoExport}, med: 0, hasMED: true}},
	}
	for _, tt := range tests {
		got := cc.resolve(tt.p, tt.va)
		if !got.equal(tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if a := compileT(t, validConfig()).resolve(vip, VIPAttrs{}); a.hasMED || len(a.communities) != 0 || a.nextHop.IsValid() {
		t.Errorf("bare config: %+v, want no MED, no communities, next-hop self", a)
	}
}

// TestBuildPath decodes the path the speaker hands GoBGP with GoBGP's own
// decoder and checks every attribute.
func TestBuildPath(t *testing.T) {
	tests := []struct {
		prefix  string
		a       attrs
		nextHop string
		family  gbgp.Family
	}{
		{"203.0.113.7/32", attrs{communities: []Community{65000<<16 | 100}, med: 50, hasMED: true}, "0.0.0.0", gbgp.RF_IPv4_UC},
		{"203.0.113.7/32", attrs{nextHop: netip.MustParseAddr("192.0.2.99")}, "192.0.2.99", gbgp.RF_IPv4_UC},
		{"2001:db8::7/128", attrs{med: 0, hasMED: true}, "::", gbgp.RF_IPv6_UC},
		{"2001:db8::/48", attrs{nextHop: netip.MustParseAddr("2001:db8::99"), communities: []Community{CommunityNoExport}}, "2001:db8::99", gbgp.RF_IPv6_UC},
	}
	for _, tt := range tests {
		p := netip.MustParsePrefix(tt.prefix)
		path, err := buildPath(p, tt.a)
		if err != nil {
			t.Fatal(err)
		}
		if path.Family != tt.family {
			t.Errorf("%s: family %v", tt.prefix, path.Family)
		}
		if path.Nlri.String() != tt.prefix {
			t.Errorf("nlri %s, want %s", path.Nlri, tt.prefix)
		}
		// What GoBGP will send: each attribute through its own encoder
		// and decoder.
		var pattrs []gbgp.PathAttributeInterface
		for _, pa := range path.Attrs {
			b, err := pa.Serialize()
			if err != nil {
				t.Fatal(err)
			}
			d, err := gbgp.GetPathAttribute(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.DecodeFromBytes(b); err != nil {
				t.Fatalf("%s: decode %v: %v", tt.prefix, pa, err)
			}
			pattrs = append(pattrs, d)
		}
		var origin, med, comms, nh int
		for _, pa := range pattrs {
			switch v := pa.(type) {
			case *gbgp.PathAttributeOrigin:
				origin++
				if v.Value != gbgp.BGP_ORIGIN_ATTR_TYPE_IGP {
					t.Errorf("%s: origin %d", tt.prefix, v.Value)
				}
			case *gbgp.PathAttributeNextHop:
				nh++
				if v.Value.String() != tt.nextHop {
					t.Errorf("%s: next hop %s, want %s", tt.prefix, v.Value, tt.nextHop)
				}
			case *gbgp.PathAttributeMpReachNLRI:
				nh++
				if v.Nexthop.String() != tt.nextHop || len(v.Value) != 1 || v.Value[0].NLRI.String() != tt.prefix {
					t.Errorf("%s: mp_reach next hop %s nlri %v", tt.prefix, v.Nexthop, v.Value)
				}
			case *gbgp.PathAttributeMultiExitDisc:
				med++
				if v.Value != tt.a.med {
					t.Errorf("%s: MED %d, want %d", tt.prefix, v.Value, tt.a.med)
				}
			case *gbgp.PathAttributeCommunities:
				comms++
				want := make([]uint32, len(tt.a.communities))
				for i, c := range tt.a.communities {
					want[i] = uint32(c)
				}
				if !slices.Equal(v.Value, want) {
					t.Errorf("%s: communities %v, want %v", tt.prefix, v.Value, want)
				}
			default:
				t.Errorf("%s: unexpected attribute %v", tt.prefix, pa)
			}
		}
		wantMED, wantComms := 0, 0
		if tt.a.hasMED {
			wantMED = 1
		}
		if len(tt.a.communities) > 0 {
			wantComms = 1
		}
		if origin != 1 || nh != 1 || med != wantMED || comms != wantComms {
			t.Errorf("%s: origin %d next hop %d MED %d communities %d", tt.prefix, origin, nh, med, comms)
		}
	}
}
