package bgp

import (
	"errors"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// Every Validate problem is a *FieldError naming its key within [bgp], so
// the config loader can point at the line.
func TestValidateNamesKeys(t *testing.T) {
	tests := []struct {
		name   string
		modify func(c *Config)
		key    string
	}{
		{"drain too long", func(c *Config) { c.DrainTime = time.Hour }, "drain_time"},
		{"drain negative", func(c *Config) { c.DrainTime = -time.Second }, "drain_time"},
		{"router id", func(c *Config) { c.RouterID = "x" }, "router_id"},
		{"no neighbor", func(c *Config) { c.Neighbors = nil }, "neighbor"},
		{"hold time", func(c *Config) { c.Neighbors[0].HoldTime = 2 * time.Second }, "neighbor[0].hold_time"},
		{"connect retry too long", func(c *Config) { c.Neighbors[0].ConnectRetry = time.Hour }, "neighbor[0].connect_retry"},
		{"duplicate neighbor", func(c *Config) { c.Neighbors = append(c.Neighbors, c.Neighbors[0]) }, "neighbor[1].address"},
		{"listen address", func(c *Config) { c.ListenPort = 179; c.ListenAddresses = []string{"x"} }, "listen_addresses[0]"},
		{"vip twice", func(c *Config) { c.VIPs = []VIPConfig{{Prefix: "203.0.113.7"}, {Prefix: "203.0.113.7/32"}} }, "vip[1].prefix"},
		{"vip community", func(c *Config) { c.VIPs = []VIPConfig{{Prefix: "203.0.113.7", Communities: []string{"x"}}} }, "vip[0].communities"},
		{"community", func(c *Config) { c.Communities = []string{"x"} }, "communities"},
		{"next hop v6", func(c *Config) { c.NextHopV6 = "192.0.2.1" }, "next_hop_v6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.modify(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err %v does not match ErrConfig", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Key != tt.key {
				t.Errorf("err %v: key %+v, want %q", err, fe, tt.key)
			}
		})
	}
}

// The [bgp] section decodes straight into Config: the TOML tags are the
// schema, durations are strings.
func TestConfigDecodesFromTOML(t *testing.T) {
	const in = `
asn = 65001
router_id = "192.0.2.10"
drain_time = "7s"
communities = ["65000:100", "no-export"]
[[neighbor]]
address = "192.0.2.1"
peer_asn = 65000
hold_time = "30s"
[[vip]]
prefix = "203.0.113.7/32"
med = 10
`
	var c Config
	md, err := toml.Decode(in, &c)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Fatalf("undecoded keys %v", und)
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.DrainTime != 7*time.Second || c.Neighbors[0].HoldTime != 30*time.Second || c.Neighbors[0].Keepalive != DefaultKeepalive ||
		len(c.Communities) != 2 || *c.VIPs[0].MED != 10 {
		t.Errorf("decoded %+v", c)
	}
}

// FuzzParseCommunity: ParseCommunity never panics, and what it accepts
// formats back to a value it reads the same.
func FuzzParseCommunity(f *testing.F) {
	for _, s := range []string{"65000:100", "0:0", "65535:65535", "no-export", "NO-PEER", "graceful-shutdown", "70000:1", ":", "1:", "-1:2", "65000-100", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCommunity(s)
		if err != nil {
			return
		}
		back, err := ParseCommunity(c.String())
		if err != nil || back != c {
			t.Errorf("%q -> %v -> %q -> %v, %v", s, c, c.String(), back, err)
		}
	})
}
