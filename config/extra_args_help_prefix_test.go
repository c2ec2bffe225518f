package config_test

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// DPDK parses its arguments with getopt_long, which takes any unambiguous
// prefix of a long option (ealArgProblem judges it so, and refuses --file-pre=..).
// Among EAL's long options only "help" begins with "he": "--he" and
// "--hel" are --help, and rte_eal_init prints its usage and exits 0
// (checked by hand: `dpdk-testpmd --no-huge --he` prints the usage, rc 0).
// extra_args refuses "--help" for that reason; its prefixes must be too.
func TestExtraArgsHelpPrefixRefused(t *testing.T) {
	for _, args := range []string{`["--he"]`, `["--hel"]`} {
		cfg := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("eal", "extra_args = "+args).Web(2).String()
		_, err := config.Parse([]byte(cfg), "t.toml")
		if err == nil || !strings.Contains(err.Error(), "eal.extra_args") {
			t.Errorf("extra_args = %s: accepted (err %v), want it refused at eal.extra_args like --help", args, err)
		}
	}
}
