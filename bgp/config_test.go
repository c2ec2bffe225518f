package bgp

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

func validConfig() Config {
	return Config{
		ASN:       65100,
		RouterID:  "192.0.2.1",
		Neighbors: []Neighbor{{Address: "192.0.2.254", PeerASN: 65001}},
	}
}

func TestConfigDefaults(t *testing.T) {
	c := validConfig().WithDefaults()
	n := c.Neighbors[0]
	if c.DrainTime != DefaultDrainTime || c.ListenPort != 0 {
		t.Errorf("drain %v, listen %d", c.DrainTime, c.ListenPort)
	}
	if n.HoldTime != 9*time.Second || n.Keepalive != 3*time.Second || n.ConnectRetry != 5*time.Second || n.Port != 179 {
		t.Errorf("neighbor defaults %+v", n)
	}
	// A short hold time gets a keepalive of a third of it.
	c = validConfig()
	c.Neighbors[0].HoldTime = 3 * time.Second
	if k := c.WithDefaults().Neighbors[0].Keepalive; k != time.Second {
		t.Errorf("keepalive for hold 3s = %v, want 1s", k)
	}
	if err := validConfig().Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	if DefaultConfig().DrainTime != DefaultDrainTime {
		t.Error("DefaultConfig")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string // each must appear in the error
	}{
		{"asn 0", func(c *Config) { c.ASN = 0 }, []string{"bgp: asn 0: AS 0 is reserved"}},
		{"asn AS_TRANS", func(c *Config) { c.ASN = 23456 }, []string{"asn 23456", "AS_TRANS"}},
		{"router id missing", func(c *Config) { c.RouterID = "" }, []string{"router_id is missing"}},
		{"router id v6", func(c *Config) { c.RouterID = "2001:db8::1" }, []string{`router_id "2001:db8::1" is not a non-zero IPv4 address`}},
		{"router id junk", func(c *Config) { c.RouterID = "10.0.0.300" }, []string{`router_id "10.0.0.300"`}},
		{"router id zero", func(c *Config) { c.RouterID = "0.0.0.0" }, []string{`router_id "0.0.0.0"`}},
		{"listen port", func(c *Config) { c.ListenPort = 70000 }, []string{"listen_port 70000 is out of range"}},
		{"listen addresses without port", func(c *Config) { c.ListenAddresses = []string{"192.0.2.1"} }, []string{"listen_addresses is set but listen_port is 0"}},
		{"listen address junk", func(c *Config) { c.ListenPort = 179; c.ListenAddresses = []string{"x"} }, []string{`listen_addresses[0] "x" is not an IP address`}},
		{"no neighbor", func(c *Config) { c.Neighbors = nil }, []string{"no neighbor"}},
		{"neighbor address invalid", func(c *Config) { c.Neighbors[0].Address = "10.0.0.300" }, []string{`neighbor[0] "10.0.0.300": address is not an IP address`}},
		{"neighbor address missing", func(c *Config) { c.Neighbors[0].Address = "" }, []string{`neighbor[0] "": address is missing`}},
		{"neighbor multicast", func(c *Config) { c.Neighbors[0].Address = "224.0.0.5" }, []string{"not a unicast address"}},
		{"neighbor mapped", func(c *Config) { c.Neighbors[0].Address = "::ffff:192.0.2.9" }, []string{"IPv4-mapped"}},
		{"neighbor duplicate", func(c *Config) { c.Neighbors = append(c.Neighbors, c.Neighbors[0]) }, []string{"neighbor[1] \"192.0.2.254\": same address as neighbor[0]"}},
		{"peer asn 0", func(c *Config) { c.Neighbors[0].PeerASN = 0 }, []string{`neighbor[0] "192.0.2.254": peer_asn 0`}},
		{"hold time short", func(c *Config) { c.Neighbors[0].HoldTime = 2 * time.Second }, []string{"hold_time 2s is out of range 3s-18h12m15s"}},
		{"hold time fraction", func(c *Config) { c.Neighbors[0].HoldTime = 4500 * time.Millisecond }, []string{"hold_time 4.5s is not a whole number of seconds"}},
		{"keepalive too long", func(c *Config) { c.Neighbors[0].Keepalive = 9 * time.Second }, []string{"keepalive 9s must be at least 1s and shorter than hold_time 9s"}},
		{"connect retry", func(c *Config) { c.Neighbors[0].ConnectRetry = 500 * time.Millisecond }, []string{"connect_retry 500ms"}},
		{"password long", func(c *Config) { c.Neighbors[0].Password = strings.Repeat("x", 81) }, []string{"password is 81 bytes long"}},
		{"passive without listener", func(c *Config) { c.Neighbors[0].Passive = true }, []string{"passive is set but listen_port is 0"}},
		{"multihop", func(c *Config) { c.Neighbors[0].Multihop = 256 }, []string{"multihop 256 is out of range"}},
		{"port", func(c *Config) { c.Neighbors[0].Port = -1 }, []string{"port -1 is out of range"}},
		{"local address family", func(c *Config) { c.Neighbors[0].LocalAddress = "2001:db8::1" }, []string{`local_address "2001:db8::1" is not of the neighbor's address family`}},
		{"community syntax", func(c *Config) { c.Communities = []string{"65000:100", "65000-100"} }, []string{`bgp: communities: [1] community "65000-100": want ASN:VALUE`}},
		{"community range", func(c *Config) { c.Communities = []string{"70000:1"} }, []string{`community "70000:1": both halves must be numbers 0-65535`}},
		{"next hop v4 family", func(c *Config) { c.NextHopV4 = "2001:db8::1" }, []string{`next_hop_v4 "2001:db8::1" is not a unicast IPv4 address`}},
		{"next hop v6 family", func(c *Config) { c.NextHopV6 = "192.0.2.1" }, []string{`next_hop_v6 "192.0.2.1" is not a global unicast IPv6 address`}},
		{"vip prefix junk", func(c *Config) { c.VIPs = []VIPConfig{{Prefix: "203.0.113.300"}} }, []string{`vip[0] prefix "203.0.113.300": not an IP address or prefix`}},
		{"vip host bits", func(c *Config) { c.VIPs = []VIPConfig{{Prefix: "203.0.113.7/24"}} }, []string{"has host bits set (did you mean 203.0.113.0/24?)"}},
		{"vip twice", func(c *Config) { c.VIPs = []VIPConfig{{Prefix: "203.0.113.7"}, {Prefix: "203.0.113.7/32"}} }, []string{"vip[1] prefix 203.0.113.7/32: listed twice"}},
		{"vip community", func(c *Config) { c.VIPs = []VIPConfig{{Prefix: "2001:db8::7", Communities: []string{"x"}}} }, []string{`vip[0] 2001:db8::7/128: communities: [0] community "x"`}},
		{"drain negative", func(c *Config) { c.DrainTime = -time.Second }, []string{"drain_time -1s is out of range"}},
		{"drain too long", func(c *Config) { c.DrainTime = time.Hour }, []string{"drain_time 1h0m0s is out of range 0-10m0s"}},
		{"several at once", func(c *Config) { c.ASN = 0; c.RouterID = "x"; c.Neighbors[0].PeerASN = 0 },
			[]string{"asn 0", `router_id "x"`, "peer_asn 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.modify(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if _, nerr := New(c, nil); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New: %v, want the Validate error", nerr)
			}
		})
	}
}

func TestConfigValidAccepted(t *testing.T) {
	c := validConfig()
	c.ListenPort = 179
	c.ListenAddresses = []string{"192.0.2.1", "2001:db8::1"}
	c.Neighbors = append(c.Neighbors, Neighbor{
		Address: "2001:db8::fe", PeerASN: 65100, Passive: true, Password: "k", Multihop: 2,
		LocalAddress: "2001:db8::1", HoldTime: 30 * time.Second, Keepalive: 10 * time.Second,
	})
	c.Communities = []string{"65000:100", "no-export", "GRACEFUL-SHUTDOWN"}
	c.NextHopV6 = "2001:db8::1"
	c.VIPs = []VIPConfig{{Prefix: "203.0.113.0/24"}, {Prefix: "2001:db8:7::/48"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cc, err := c.WithDefaults().compile()
	if err != nil {
		t.Fatal(err)
	}
	// The IPv4 session carries IPv6 too, because next_hop_v6 is set; the
	// IPv6 session does not carry IPv4 (no next_hop_v4).
	if n := cc.neighbors[0]; !n.v4 || !n.v6 {
		t.Errorf("v4 neighbor families v4=%v v6=%v", n.v4, n.v6)
	}
	if n := cc.neighbors[1]; n.v4 || !n.v6 {
		t.Errorf("v6 neighbor families v4=%v v6=%v", n.v4, n.v6)
	}
}

func TestParseCommunity(t *testing.T) {
	tests := []struct {
		in   string
		want Community
		err  bool
	}{
		{"65000:100", 65000<<16 | 100, false},
		{"0:0", 0, false},
		{"65535:65535", 0xffffffff, false},
		{"no-export", CommunityNoExport, false},
		{"No-Advertise", CommunityNoAdvertise, false},
		{"graceful-shutdown", CommunityGracefulShutdown, false},
		{"blackhole", CommunityBlackhole, false},
		{"65536:1", 0, true},
		{"1:65536", 0, true},
		{"-1:1", 0, true},
		{"65000", 0, true},
		{"65000:100:1", 0, true},
		{"", 0, true},
		{"a:b", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseCommunity(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseCommunity(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.err)
		}
		if err == nil && !strings.Contains(tt.in, "-") && strings.Contains(tt.in, ":") && got.String() != tt.in {
			t.Errorf("%q round trip: %q", tt.in, got.String())
		}
	}
	if CommunityGracefulShutdown.String() != "65535:0" {
		t.Errorf("graceful-shutdown = %s", CommunityGracefulShutdown)
	}
}

func TestCanonicalPrefix(t *testing.T) {
	for _, p := range []netip.Prefix{
		{}, // zero: invalid
		netip.MustParsePrefix("::ffff:192.0.2.1/128"),
		netip.MustParsePrefix("203.0.113.7/24"),
		netip.MustParsePrefix("224.0.0.1/32"),
		netip.MustParsePrefix("ff02::1/128"),
	} {
		if _, err := canonicalPrefix(p); !errors.Is(err, ErrInvalidPrefix) {
			t.Errorf("%v: %v, want ErrInvalidPrefix", p, err)
		}
	}
	for _, s := range []string{"fe80::1%eth0", "2001:db8::1/129", "x/32"} {
		if _, err := parseVIPPrefix(s); err == nil {
			t.Errorf("parseVIPPrefix(%q) accepted", s)
		}
	}
	for s, want := range map[string]string{"203.0.113.7": "203.0.113.7/32", "2001:db8::7": "2001:db8::7/128", "198.51.100.0/24": "198.51.100.0/24"} {
		if p, err := parseVIPPrefix(s); err != nil || p.String() != want {
			t.Errorf("parseVIPPrefix(%q) = %v, %v; want %s", s, p, err, want)
		}
	}
}

// TestConfigTOML decodes testdata/bgp.toml strictly, as the config
// package does, and checks the result.
func TestConfigTOML(t *testing.T) {
	var f struct {
		BGP Config `toml:"bgp"`
	}
	md, err := toml.DecodeFile("testdata/bgp.toml", &f)
	if err != nil {
		t.Fatal(err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Fatalf("unknown keys %v", u)
	}
	c := f.BGP
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c = c.WithDefaults()
	if c.ASN != 65100 || c.RouterID != "192.0.2.10" || *c.MED != 100 || c.NextHopV6 != "2001:db8::10" ||
		c.DrainTime != 5*time.Second || len(c.Neighbors) != 2 || len(c.VIPs) != 1 {
		t.Errorf("decoded %+v", c)
	}
	if n := c.Neighbors[0]; n.Password != "md5-secret" || n.HoldTime != 9*time.Second || n.Port != 179 {
		t.Errorf("neighbor %+v", n)
	}
	if v := c.VIPs[0]; v.Prefix != "203.0.113.7" || *v.MED != 50 || v.Communities[0] != "65000:7" {
		t.Errorf("vip %+v", v)
	}
	// Durations are strings.
	if _, err := toml.Decode("[bgp]\ndrain_time = \"2s\"\n[[bgp.neighbor]]\nhold_time = \"30s\"\n", &f); err != nil || f.BGP.DrainTime != 2*time.Second {
		t.Errorf("duration strings: %v, %v", err, f.BGP.DrainTime)
	}
}

// communityStrings returns n distinct communities, 65000:first and up.
func communityStrings(first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = Community(65000<<16 | uint32(first+i)).String()
	}
	return out
}

// Every attribute of a VIP must fit in one 4096-byte UPDATE: more
// communities than that (global and per-VIP together) are refused at
// configuration time, naming the key; duplicates count once.
func TestConfigCommunitiesFitOneUpdate(t *testing.T) {
	if MaxCommunities != 993 || updateLen(MaxCommunities) > 4096 || updateLen(MaxCommunities+1) <= 4096 {
		t.Fatalf("MaxCommunities %d: UPDATE up to %d bytes, %d with one more", MaxCommunities, updateLen(MaxCommunities), updateLen(MaxCommunities+1))
	}
	vip := func(comms []string) []VIPConfig {
		return []VIPConfig{{Prefix: "203.0.113.7"}, {Prefix: "203.0.113.8", Communities: comms}}
	}
	tests := []struct {
		name   string
		global []string
		vips   []VIPConfig
		key    string // "" if accepted
	}{
		{"global at the limit", communityStrings(0, MaxCommunities), nil, ""},
		{"global duplicates count once", append(communityStrings(0, MaxCommunities), communityStrings(0, 10)...), nil, ""},
		{"global over the limit", communityStrings(0, MaxCommunities+1), nil, "communities"},
		{"the probe's 1100", communityStrings(0, 1100), vip(communityStrings(0, 5)), "communities"},
		{"global and per-VIP at the limit", communityStrings(0, 500), vip(communityStrings(500, MaxCommunities-500)), ""},
		{"per-VIP overlapping the global ones", communityStrings(0, 500), vip(communityStrings(0, MaxCommunities)), ""},
		{"global and per-VIP over the limit", communityStrings(0, 500), vip(communityStrings(500, MaxCommunities-499)), "vip[1].communities"},
		{"per-VIP alone over the limit", nil, vip(communityStrings(0, 1100)), "vip[1].communities"},
	}
	for _, tt := range tests {
		c := validConfig()
		c.Communities = tt.global
		c.VIPs = tt.vips
		err := c.Validate()
		if tt.key == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Key != tt.key {
			t.Errorf("%s: err %v, want a *FieldError for %q", tt.name, err, tt.key)
			continue
		}
		if strings.Count(err.Error(), "communities") < 2 || !strings.Contains(err.Error(), "4096") {
			t.Errorf("%s: message %q does not explain", tt.name, err)
		}
		t.Logf("%s: %v", tt.name, err)
	}
}

// Limits of the configuration not covered by TestConfigValidate.
func TestConfigEdges(t *testing.T) {
	type tc struct {
		name   string
		modify func(c *Config)
		ok     bool
	}
	for _, tt := range []tc{
		{"asn 65535", func(c *Config) { c.ASN = 65535 }, false},
		{"asn 4294967295", func(c *Config) { c.ASN = 4294967295 }, false},
		{"asn 4294967294", func(c *Config) { c.ASN = 4294967294 }, true},
		{"peer asn 23456", func(c *Config) { c.Neighbors[0].PeerASN = 23456 }, false},
		{"hold 1s", func(c *Config) { c.Neighbors[0].HoldTime = time.Second }, false},
		{"hold 65535s", func(c *Config) { c.Neighbors[0].HoldTime = 65535 * time.Second }, true},
		{"hold 65536s", func(c *Config) { c.Neighbors[0].HoldTime = 65536 * time.Second }, false},
		{"password 80", func(c *Config) { c.Neighbors[0].Password = strings.Repeat("k", 80) }, true},
		{"connect retry 10m1s", func(c *Config) { c.Neighbors[0].ConnectRetry = 601 * time.Second }, false},
		{"bgp.vip not a host prefix", func(c *Config) { c.VIPs = []VIPConfig{{Prefix: "203.0.113.0/24", MED: u32(5)}} }, true},
	} {
		err := func() error { c := validConfig(); tt.modify(&c); return c.Validate() }()
		if (err == nil) != tt.ok {
			t.Errorf("%s: err %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
