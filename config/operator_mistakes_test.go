package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// problemKeys returns the keys every problem of err names.
func problemKeys(err error) []string {
	var out []string
	var es config.Errors
	if errors.As(err, &es) {
		for _, p := range es {
			out = append(out, p.Key)
		}
	}
	return out
}

// TestLimitsNameTheirKey: values at and past every limit are refused with a
// problem naming the key (never a panic, never silently clamped).
func TestLimitsNameTheirKey(t *testing.T) {
	type c struct {
		name string
		toml string
		key  string
	}
	dp := func(k ...string) string {
		return configtest.New().Dataplane(append([]string{`gateway_ipv4 = "192.0.2.1"`}, k...)...).Web(2).String()
	}
	sec := func(s string, k ...string) string {
		return configtest.New().Dataplane(`gateway_ipv4 = "192.0.2.1"`).Section(s, k...).Web(2).String()
	}
	vip := func(k ...string) string {
		return configtest.New().Dataplane(`gateway_ipv4 = "192.0.2.1"`).Web(2, k...).String()
	}
	vh := func(k ...string) string {
		return configtest.New().Dataplane(`gateway_ipv4 = "192.0.2.1"`).VIP("web", "203.0.113.7", 80).Sub("[vip.health]", k...).Backend("b1", "10.0.1.1").String()
	}
	be := func(k ...string) string {
		return configtest.New().Dataplane(`gateway_ipv4 = "192.0.2.1"`).VIP("web", "203.0.113.7", 80).Backend("b1", "10.0.1.1", k...).Backend("b2", "10.0.1.2").String()
	}
	cases := []c{
		{"mtu 0 explicit", dp("mtu = -1"), "dataplane.mtu"},
		{"mtu huge", dp("mtu = 65536"), "dataplane.mtu"},
		{"mtu small", dp("mtu = 575"), "dataplane.mtu"},
		{"ttl 0", dp("ttl = -1"), "dataplane.ttl"},
		{"ttl 256", dp("ttl = 256"), "dataplane.ttl"},
		{"gue_port neg", dp("gue_port = -1"), "dataplane.gue_port"},
		{"gue_port big", dp("gue_port = 65536"), "dataplane.gue_port"},
		{"burst 65", dp("burst = 65"), "dataplane.burst"},
		{"burst -1", dp("burst = -1"), "dataplane.burst"},
		{"rx_desc big", dp("rx_desc = 32769"), "dataplane.rx_desc"},
		{"idle sleep", dp(`idle_max_sleep = "2s"`), "dataplane.idle_max_sleep"},
		{"idle sleep neg", dp(`idle_max_sleep = "-1ns"`), "dataplane.idle_max_sleep"},
		{"sc window huge", dp(`second_chance_window = "2562047h"`), "dataplane.second_chance_window"},
		{"lb prefix 33", dp("lb_ipv4_prefix = 33"), "dataplane.lb_ipv4_prefix"},
		{"lb prefix -1", dp("lb_ipv4_prefix = -1"), "dataplane.lb_ipv4_prefix"},
		{"iface empty-ish", dp(`exception_iface = " "`), "dataplane.exception_iface"},
		{"iface 16", dp(`exception_iface = "abcdefghijklmnop"`), "dataplane.exception_iface"},
		{"iface dotdot", dp(`exception_iface = ".."`), "dataplane.exception_iface"},
		{"iface slash", dp(`exception_iface = "../x"`), "dataplane.exception_iface"},
		{"iface nul", dp(`exception_iface = "a\u0000b"`), "dataplane.exception_iface"},
		{"iface newline", dp(`exception_iface = "a\nb"`), "dataplane.exception_iface"},
		{"port empty", strings.Replace(dp(), `port = "net_ring0"`, `port = ""`, 1), "dataplane.port"},
		{"hash key short", strings.Replace(dp(), configtest.HashKey, "00", 1), "dataplane.hash_key"},
		{"punt neg", sec("dataplane.punt", "bgp = -1"), "dataplane.punt.bgp"},
		{"punt huge", sec("dataplane.punt", "other = 9223372036854775807"), "dataplane.punt.other"},
		{"ct cap huge", sec("conntrack", "capacity = 9223372036854775807"), "conntrack.capacity"},
		{"ct cap neg", sec("conntrack", "capacity = -1"), "conntrack.capacity"},
		{"ct dur huge", sec("conntrack", `udp = "2562047h"`), "conntrack.udp"},
		{"ctl slow huge", sec("control", `slow_start = "2h"`), "control.slow_start"},
		{"ctl slow neg", sec("control", `slow_start = "-1s"`), "control.slow_start"},
		{"ctl drain neg", sec("control", `drain_timeout = "-1s"`), "control.drain_timeout"},
		{"ctl panic 1.1", sec("control", `panic_threshold = 1.1`), "control.panic_threshold"},
		{"ctl panic -0.1", sec("control", `panic_threshold = -0.1`), "control.panic_threshold"},
		{"ctl ssm neg", sec("control", `slow_start_min = -0.5`), "control.slow_start_min"},
		{"admin max_conns", sec("admin", `max_conns = 4097`), "admin.max_conns"},
		{"admin max_conns neg", sec("admin", `max_conns = -1`), "admin.max_conns"},
		{"admin listen junk", sec("admin", `listen = "foo"`), "admin.listen"},
		{"admin listen port", sec("admin", `listen = "127.0.0.1:70000"`), "admin.listen"},
		{"admin unix rel", sec("admin", `listen = "unix:"`), "admin.listen"},
		{"admin token_file dir", sec("admin", `token_file = "/"`), "admin.token_file"},
		{"admin tls missing", sec("admin", `tls_cert = "/nonexistent"`, `tls_key = "/nonexistent"`), "admin.tls_cert"},
		{"health interval 0ns", sec("health", `interval = "1ns"`), "health.interval"},
		{"health timeout > interval", sec("health", `kind = "tcp"`, `timeout = "3s"`), "health.timeout"},
		{"health rise 0", sec("health", `rise = -1`), "health.rise"},
		{"health fall huge", sec("health", `fall = 9223372036854775807`), "health.fall"},
		{"health jitter 1.5", sec("health", `jitter = 1.5`), "health.jitter"},
		{"health jitter neg", sec("health", `jitter = -0.1`), "health.jitter"},
		{"health port neg", sec("health", `port = -1`), "health.port"},
		{"health port big", sec("health", `port = 65536`), "health.port"},
		{"health flap_window neg", sec("health", `flap_window = -1`), "health.flap_window"},
		{"health flap_window huge", sec("health", `flap_window = 9223372036854775807`), "health.flap_window"},
		{"health passive_min huge", sec("health", `passive_min = 2000000`), "health.passive_min"},
		{"health passive_min neg", sec("health", `passive_min = -1`), "health.passive_min"},
		{"health passive_window 1s", sec("health", `passive_window = "1s"`), "health.passive_window"},
		{"health passive bogus", sec("health", `passive = "yes"`), "health.passive"},
		{"health through bogus", sec("health", `through = "both"`), "health.through"},
		{"health kind bogus", sec("health", `kind = "icmp"`), "health.kind"},
		{"health expect 99", sec("health", `expect = "99"`), "health.expect"},
		{"health expect 600", sec("health", `expect = "200-600"`), "health.expect"},
		{"health expect rev", sec("health", `expect = "399-200"`), "health.expect"},
		{"health path rel", sec("health", `path = "healthz"`), "health.path"},
		{"vh interval", vh(`kind = "tcp"`, `interval = "0.5ms"`), "vip[0].health.interval"},
		{"vh port 0 on all-ports", configtest.New().Dataplane(`gateway_ipv4 = "192.0.2.1"`).VIP("web", "203.0.113.7", 0).Sub("[vip.health]", `kind = "tcp"`).Backend("b1", "10.0.1.1").String(), "vip[0].health.port"},
		{"vip port neg", vip(), "vip[0].port"},
		{"vip table_size 2", vip("table_size = 2"), "vip[0].table_size"},
		{"vip table_size -1", vip("table_size = -1"), "vip[0].table_size"},
		{"vip draws -1", vip(`scheduler = "p2c"`, "draws = -1"), "vip[0].draws"},
		{"vip draws huge", vip(`scheduler = "p2c"`, "draws = 9223372036854775807"), "vip[0].draws"},
		{"vip penalty neg", vip(`scheduler = "peak-ewma"`, `ewma_penalty = "-1s"`), "vip[0].ewma_penalty"},
		{"vip penalty huge", vip(`scheduler = "peak-ewma"`, `ewma_penalty = "2562047h"`), "vip[0].ewma_penalty"},
		{"vip hash_prefix 0", vip(`hash = "src-ip-prefix"`, "hash_prefix = 0"), "vip[0].hash_prefix"},
		{"vip hash_prefix 33", vip(`hash = "src-ip-prefix"`, "hash_prefix = 33"), "vip[0].hash_prefix"},
		{"vip hash_prefix6 129", vip(`hash = "src-ip-prefix"`, "hash_prefix6 = 129"), "vip[0].hash_prefix6"},
		{"vip protocol TCP", vip(`protocol = "TCP"`), "vip[0].protocol"},
		{"vip on_down", vip(`on_down = "Move"`), "vip[0].on_down"},
		{"vip quic cid 21", vip(`protocol = "udp"`, "quic = true", "quic_cid_len = 21"), "vip[0].quic_cid_len"},
		{"vip quic sid 0", vip(`protocol = "udp"`, "quic = true", "quic_server_id_len = -1"), "vip[0].quic_server_id_len"},
		{"vip quic cfg 7", vip(`protocol = "udp"`, "quic = true", "quic_config_id = 7"), "vip[0].quic_config_id"},
		{"be weight neg", be("weight = -1"), "vip[0].backend[0].weight"},
		{"be weight big", be("weight = 65536"), "vip[0].backend[0].weight"},
		{"be name empty?", be(), ""},
		{"eal lcore_map junk", sec("eal", `lcore_map = "x"`), "eal.lcore_map"},
		{"eal lcore_map cpu neg", sec("eal", `lcore_map = "0@-1,1@0"`), "eal.lcore_map"},
		{"eal file_prefix unicode", sec("eal", `file_prefix = "fülcrum"`), "eal.file_prefix"},
		{"eal file_prefix 65", sec("eal", `file_prefix = "`+strings.Repeat("a", 65)+`"`), "eal.file_prefix"},
		{"eal worker dup main", sec("eal", `main_lcore = 1`, `worker_lcores = [1]`), "eal.worker_lcores"},
		{"eal mem 63", sec("eal", `memory_mb = 63`), "eal.memory_mb"},
	}
	for i := range cases {
		if cases[i].name == "vip port neg" {
			cases[i].toml = strings.Replace(cases[i].toml, "port = 80", "port = -1", 1)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			c, err := config.Parse([]byte(tc.toml), "a.toml")
			if tc.key == "" {
				return
			}
			if err == nil {
				t.Errorf("accepted; want a problem at %s (effective: dp.mtu=%d ttl=%d)", tc.key, c.Dataplane.MTU, c.Dataplane.TTL)
				return
			}
			for _, k := range problemKeys(err) {
				if k == tc.key {
					return
				}
			}
			t.Errorf("problems at %v, want %s: %v", problemKeys(err), tc.key, err)
		})
	}
}

// TestTableBudget: each VIP's table_size is within its limit
// (5000011), and there may be 4096 VIPs; together they are a snapshot of
// 4096 x 5000011 x 2 bytes = 41 GB, built twice by a reload (the dry run
// and the rebuild) next to the one in force. Parse accepts it: no key
// bounds the total, so `fulcrum check` and a reload find out by running
// out of memory instead of naming a key.
func TestTableBudget(t *testing.T) {
	b := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`)
	for i := 0; i < 4096; i++ {
		b.VIP("v"+strings.Repeat("x", 0)+itoa(i), "203.0.113.7", 1+i, "table_size = 5000011").Backend("b", "10.0.1.1")
	}
	c, err := config.Parse([]byte(b.String()), "big.toml")
	if err == nil {
		total := 0
		for _, v := range c.VIPs {
			total += v.TableSize
		}
		t.Errorf("accepted: %d VIPs, %d Maglev slots in all (%d MB at 2 bytes a slot); want a problem naming a key (vip[N].table_size) past a total budget", len(c.VIPs), total, total*2>>20)
	}
}

func itoa(i int) string {
	s := ""
	for {
		s = string(rune('0'+i%10)) + s
		i /= 10
		if i == 0 {
			return s
		}
	}
}

// A relative token_file (tls_cert, tls_key and unix: listen likewise) is
// read relative to the working directory of whoever loads the file, not
// to the configuration file: `fulcrum check -c /etc/fulcrum/fulcrum.toml`
// run in /etc/fulcrum accepts what `fulcrum run` started by systemd
// (working directory /) refuses, or reads another file; a reload reads it
// from the daemon's working directory. The file is the same, the answer
// differs.
func TestRelativeTokenFileRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toml := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("admin", `token_file = "admin.token"`).Web(2).String()
	cfgPath := filepath.Join(dir, "fulcrum.toml")
	if err := os.WriteFile(cfgPath, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	_, errIn := config.Load(cfgPath)
	t.Chdir("/")
	_, errRoot := config.Load(cfgPath)
	if (errIn == nil) != (errRoot == nil) {
		t.Errorf("the same file %s: loaded from its directory: %v; from /: %v; want one answer (a relative path resolved against the file's directory, or refused as relative)", cfgPath, errIn, errRoot)
	}
}

// TestBareIntegerDuration: a duration written as a bare integer
// (`drain_timeout = 300`, the operator's "300 seconds") decodes as
// nanoseconds and is accepted wherever the nanoseconds are in range:
// silently a 300 ns drain timeout (drained flows moved at once), a 60 ns
// slow start (none), a 300 ns second-chance window (the previous table
// dropped at once), ... README: `Durations are positive and bounded`, and
// the example writes them as strings ("300s"); the decoder's message for a
// bad one asks for `"300s"`. Every duration key must refuse an integer,
// naming the key.
func TestBareIntegerDuration(t *testing.T) {
	base := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Web(2).String()
	with := func(section, kv string) string {
		return strings.Replace(base, "[[vip]]", "["+section+"]\n"+kv+"\n\n[[vip]]", 1)
	}
	for _, tc := range []struct{ key, toml string }{
		{"control.drain_timeout", with("control", "drain_timeout = 300")},
		{"control.slow_start", with("control", "slow_start = 60")},
		{"dataplane.second_chance_window", strings.Replace(base, `next_hop_mac = "02:00:00:00:00:fe"`, "next_hop_mac = \"02:00:00:00:00:fe\"\nsecond_chance = true\nsecond_chance_window = 300", 1)},
		{"dataplane.idle_max_sleep", strings.Replace(base, `next_hop_mac = "02:00:00:00:00:fe"`, "next_hop_mac = \"02:00:00:00:00:fe\"\nidle_max_sleep = 200", 1)},
		{"vip[0].ewma_penalty", strings.Replace(base, "port = 80", "port = 80\nscheduler = \"peak-ewma\"\newma_penalty = 30", 1)},
		{"health.interval", with("health", `kind = "tcp"`+"\ninterval = 2")},
		{"conntrack.udp", with("conntrack", "udp = 30")},
		{"health.flap_backoff", with("health", "flap_backoff = 10")},
	} {
		t.Run(tc.key, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.toml), "a.toml")
			if err == nil {
				t.Errorf("%s as a bare integer accepted (effective: drain_timeout %v, slow_start %v, second_chance_window %v, idle_max_sleep %v, ewma_penalty %v); want a problem naming %s", tc.key,
					c.Control.DrainTimeout, c.Control.SlowStart, c.Dataplane.SecondChanceWindow, c.Dataplane.IdleMaxSleep, c.VIPs[0].Penalty, tc.key)
				return
			}
			for _, k := range problemKeys(err) {
				if k == tc.key {
					return
				}
			}
			t.Errorf("keys %q, want %s: %v", problemKeys(err), tc.key, err)
		})
	}
}

// The same for [bgp]: drain_time = 5 (meant: seconds) is 5 ns.
func TestBareIntegerBGPDuration(t *testing.T) {
	toml := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("bgp", "asn = 65100", `router_id = "192.0.2.10"`, "drain_time = 5").
		Sub("[[bgp.neighbor]]", `address = "192.0.2.1"`, "peer_asn = 65000").
		Web(2).String()
	c, err := config.Parse([]byte(toml), "a.toml")
	if err == nil {
		t.Errorf("accepted: bgp.drain_time %v (written 5, meant seconds); want a problem naming bgp.drain_time", c.BGP.DrainTime)
	} else {
		t.Logf("refused: %v", err)
	}
}

// TestExtraArgsCannotOverrideOwnedOptions: extra_args is appended after the
// options EALArgs writes from [eal]'s checked keys, and DPDK takes the last
// of two; "--file-prefix=.." there named the directory shutdown removes,
// which eal.file_prefix refuses. Every option [eal] owns is refused in
// extra_args, naming the key; others pass.
func TestExtraArgsCannotOverrideOwnedOptions(t *testing.T) {
	for _, args := range []string{`["--file-prefix=.."]`, `["--file-prefix", "x"]`, `["-m", "99999"]`, `["-m99999"]`, `["-l", "0-3"]`, `["--lcores=0@1"]`,
		`["--main-lcore=3"]`, `["--no-huge"]`, `["-a", "0000:01:00.0"]`, `["--vdev=net_null0"]`, `["--no-pci"]`} {
		cfg := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("eal", "extra_args = "+args).Web(2).String()
		_, err := config.Parse([]byte(cfg), "t.toml")
		if err == nil || !strings.Contains(err.Error(), "eal.extra_args") {
			t.Errorf("extra_args = %s: err %v, want it refused at eal.extra_args", args, err)
		}
	}
	for _, args := range []string{`["--huge-dir", "/mnt/huge"]`, `["--log-level=debug"]`, `["-n", "4"]`} {
		cfg := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("eal", "extra_args = "+args).Web(2).String()
		if _, err := config.Parse([]byte(cfg), "t.toml"); err != nil {
			t.Errorf("extra_args = %s: %v, want it accepted", args, err)
		}
	}
}
