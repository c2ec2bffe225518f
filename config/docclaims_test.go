package config

import (
	"strings"
	"testing"
)

// README "Configuration" states limits; each case sits at or just past one.
func TestDocClaimsLimits(t *testing.T) {
	rep := func(old, new string) string { return strings.Replace(base, old, new, 1) }
	vip := func(extra string) string { return rep("port = 80\n", "port = 80\n"+extra+"\n") }
	health := func(extra string) string { return base + "\n[health]\nkind = \"tcp\"\n" + extra + "\n" }
	ctl := func(extra string) string { return base + "\n[control]\n" + extra + "\n" }
	eal := func(extra string) string { return rep("memory_mb = 256\n", "memory_mb = 256\n"+extra+"\n") }
	dp := func(extra string) string { return rep(`port = "net_ring0"`+"\n", `port = "net_ring0"`+"\n"+extra+"\n") }
	cases := []struct {
		name string
		toml string
		ok   bool
	}{
		{"drain_timeout 24h", ctl(`drain_timeout = "24h"`), true},
		{"drain_timeout 24h1s", ctl(`drain_timeout = "24h0m1s"`), false},
		{"drain_timeout bare int", ctl(`drain_timeout = 300`), false},
		{"drain_timeout bare 0", ctl(`drain_timeout = 0`), true},
		{"slow_start 1h", ctl(`slow_start = "1h"`), true},
		{"slow_start 1h1s", ctl(`slow_start = "1h0m1s"`), false},
		{"panic nan", ctl(`panic_threshold = nan`), false},
		{"interval 10ms", health(`interval = "10ms"` + "\n" + `timeout = "5ms"`), true},
		{"interval 9ms", health(`interval = "9ms"` + "\n" + `timeout = "5ms"`), false},
		{"interval 1h", health(`interval = "1h"`), true},
		{"interval 1h1ms", health(`interval = "1h0m0.001s"`), false},
		{"flap_backoff_max 1h", health(`flap_backoff_max = "1h"`), true},
		{"flap_backoff_max 1h1s", health(`flap_backoff_max = "1h0m1s"`), false},
		{"passive_window 2s", health(`passive_window = "2s"`), true},
		{"passive_window 1s", health(`passive_window = "1s"`), false},
		{"passive_window 10m", health(`passive_window = "10m"`), true},
		{"passive_window 10m1s", health(`passive_window = "10m1s"`), false},
		{"memory 64", rep("memory_mb = 256", "memory_mb = 64"), true},
		{"memory 63", rep("memory_mb = 256", "memory_mb = 63"), false},
		{"memory 1048576", rep("memory_mb = 256", "memory_mb = 1048576"), true},
		{"memory 1048577", rep("memory_mb = 256", "memory_mb = 1048577"), false},
		{"lcore 127", eal("main_lcore = 126\nworker_lcores = [127]"), true},
		{"lcore 128", eal("main_lcore = 0\nworker_lcores = [128]"), false},
		{"file_prefix 64", eal(`file_prefix = "` + strings.Repeat("a", 64) + `"`), true},
		{"file_prefix 65", eal(`file_prefix = "` + strings.Repeat("a", 65) + `"`), false},
		{"extra --file-prefix", eal(`extra_args = ["--file-prefix=x"]`), false},
		{"iface 15", dp(`exception_iface = "` + strings.Repeat("a", 15) + `"`), true},
		{"iface 16", dp(`exception_iface = "` + strings.Repeat("a", 16) + `"`), false},
		{"iface colon", dp(`exception_iface = "a:b"`), false},
		{"iface percent", dp(`exception_iface = "a%b"`), false},
		{"iface comma", dp(`exception_iface = "a,b"`), false},
		{"iface eq", dp(`exception_iface = "a=b"`), false},
		{"iface tab", dp(`exception_iface = "a\tb"`), false},
		{"vip name 64", vip(`name = "` + strings.Repeat("n", 64) + `"`), true},
		{"vip name 65", vip(`name = "` + strings.Repeat("n", 65) + `"`), false},
		{"vip name zwsp", vip(`name = "a\u200bb"`), false},
		{"vip name NFD", vip(`name = "e\u0301"`), false},
		{"vip name ..", vip(`name = ".."`), false},
		{"table 5000011", vip(`table_size = 5000011`), true},
		{"table 5000077", vip(`table_size = 5000077`), false},
		{"weight 65535", base + "  weight = 65535\n", true},
		{"weight 65536", base + "  weight = 65536\n", false},
		{"hash_prefix 32", vip("hash = \"src-ip-prefix\"\nhash_prefix = 32"), true},
		{"hash_prefix 33", vip("hash = \"src-ip-prefix\"\nhash_prefix = 33"), false},
		{"hash_prefix6 128", vip("hash = \"src-ip-prefix\"\nhash_prefix6 = 128"), true},
		{"hash_prefix6 129", vip("hash = \"src-ip-prefix\"\nhash_prefix6 = 129"), false},
		{"hash_prefix with 5-tuple", vip("hash_prefix = 24"), false},
		{"3-tuple with p2c", vip("hash = \"3-tuple\"\nscheduler = \"p2c\""), false},
		{"path 4096", health(`kind = "http"`)[0:0] + base + "\n[health]\nkind = \"http\"\npath = \"/" + strings.Repeat("p", 4095) + "\"\n", true},
		{"path 4097", base + "\n[health]\nkind = \"http\"\npath = \"/" + strings.Repeat("p", 4096) + "\"\n", false},
		{"path fragment", base + "\n[health]\nkind = \"http\"\npath = \"/a#b\"\n", false},
		{"host 253", base + "\n[health]\nkind = \"http\"\nhost = \"" + strings.Repeat("h", 253) + "\"\n", true},
		{"host 254", base + "\n[health]\nkind = \"http\"\nhost = \"" + strings.Repeat("h", 254) + "\"\n", false},
		{"host 253 with port", base + "\n[health]\nkind = \"http\"\nhost = \"" + strings.Repeat("h", 253) + ":8080\"\n", true},
		{"max_conns 4096", base + "\n[admin]\nmax_conns = 4096\n", true},
		{"max_conns 4097", base + "\n[admin]\nmax_conns = 4097\n", false},
		{"unix 107", base + "\n[admin]\nlisten = \"unix:/" + strings.Repeat("u", 106) + "\"\n", true},
		{"unix 108", base + "\n[admin]\nlisten = \"unix:/" + strings.Repeat("u", 107) + "\"\n", false},
		{"unix abstract", base + "\n[admin]\nlisten = \"unix:@x\"\n", false},
		{"token 16", base + "\n[admin]\ntoken = \"" + strings.Repeat("t", 16) + "\"\n", true},
		{"token 15", base + "\n[admin]\ntoken = \"" + strings.Repeat("t", 15) + "\"\n", false},
		{"token blank", base + "\n[admin]\ntoken = \"" + strings.Repeat("t", 16) + " x\"\n", false},
		{"off-loopback no token", base + "\n[admin]\nlisten = \"10.0.0.5:9180\"\n", false},
		{"second_chance_window 24h", dp("second_chance = true\nsecond_chance_window = \"24h\""), true},
		{"second_chance_window 24h1s", dp("second_chance = true\nsecond_chance_window = \"24h0m1s\""), false},
		{"mtu lb_ipv6 1280", dp("lb_ipv6 = \"2001:db8:100::10\"\nmtu = 1280"), true},
		{"mtu lb_ipv6 1279", dp("lb_ipv6 = \"2001:db8:100::10\"\nmtu = 1279"), false},
		{"next_hop_mac multicast", rep(`gateway_ipv4 = "192.0.2.1"`, `next_hop_mac = "01:00:5e:00:00:01"`), false},
		{"backend link-local", rep(`"10.0.1.1"`, `"169.254.1.1"`), false},
		{"backend mapped", rep(`"10.0.1.1"`, `"::ffff:10.0.1.1"`), false},
		{"vip 240/4", rep(`"203.0.113.7"`, `"240.0.0.1"`), false},
		{"vip 0/8", rep(`"203.0.113.7"`, `"0.1.2.3"`), false},
		{"backend at lb", rep(`"10.0.1.1"`, `"192.0.2.10"`), false},
		{"gateway backend ok", rep(`"10.0.1.1"`, `"192.0.2.1"`), true},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.toml), "p.toml")
		if (err == nil) != c.ok {
			t.Errorf("%s: ok=%v, got err %v", c.name, c.ok, err)
		}
	}
}

// README: eal.extra_args may not repeat an option the [eal] keys set.
// DPDK's getopt_long takes any unambiguous prefix of a long option, so an
// abbreviation sets the option as well (dpdk-testpmd --file-pre=X
// creates /var/run/dpdk/X).
func TestDocClaimsEALAbbrev(t *testing.T) {
	eal := func(extra string) string {
		return strings.Replace(base, "memory_mb = 256\n", "memory_mb = 256\n"+extra+"\n", 1)
	}
	for _, c := range []struct {
		name string
		toml string
		ok   bool
	}{
		{"extra --file-pre abbreviated", eal(`extra_args = ["--file-pre=.."]`), false},
		{"extra --main abbreviated", eal(`extra_args = ["--main=5"]`), false},
		{"extra --lcore abbreviated", eal(`extra_args = ["--lcore=0-7"]`), false},
		{"extra --vde abbreviated", eal(`extra_args = ["--vde=net_null0"]`), false},
		{"extra --no-hug abbreviated", eal(`extra_args = ["--no-hug"]`), false},
		{"extra --no-pc abbreviated", eal(`extra_args = ["--no-pc"]`), false},
	} {
		if _, err := Parse([]byte(c.toml), "p.toml"); (err == nil) != c.ok {
			t.Errorf("%s: accepted", c.name)
		}
	}
}
