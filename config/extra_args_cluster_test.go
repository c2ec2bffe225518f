package config_test

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// TestExtraArgsClusteredShortOptions: DPDK parses its arguments with
// getopt, which takes clustered short options, and -v and -h take no
// argument (librte_eal's "a:b:c:s:d:hl:S:m:n:r:v"): "-vm99999" is -v then
// -m 99999, "-vl0-7" is -v then -l 0-7. Appended after the checked [eal]
// options, they override memory_mb, the lcores and the allow list as
// "-m99999" would, which extra_args refuses. And -h (or --help, or -vh)
// makes rte_eal_init print its usage and exit(0): `fulcrum check` accepts
// the file, and `fulcrum run` exits 0 at start without forwarding or a
// word about why (systemd's Restart=on-failure does not restart it).
func TestExtraArgsClusteredShortOptions(t *testing.T) {
	for _, args := range []string{`["-vm99999"]`, `["-vl0-7"]`, `["-vc", "0xff"]`, `["-va", "0000:01:00.0"]`, `["-vvm", "99999"]`,
		`["-h"]`, `["--help"]`, `["-vh"]`} {
		cfg := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("eal", "extra_args = "+args).Web(2).String()
		_, err := config.Parse([]byte(cfg), "t.toml")
		if err == nil || !strings.Contains(err.Error(), "eal.extra_args") {
			t.Errorf("extra_args = %s: accepted (err %v), want it refused at eal.extra_args", args, err)
		}
	}
	// -v alone only logs DPDK's version.
	cfg := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("eal", `extra_args = ["-v", "-n", "4"]`).Web(2).String()
	if _, err := config.Parse([]byte(cfg), "t.toml"); err != nil {
		t.Errorf("extra_args = [\"-v\", \"-n\", \"4\"]: %v, want it accepted", err)
	}
}
