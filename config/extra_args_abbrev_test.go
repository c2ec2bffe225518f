package config_test

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// getopt_long takes the shortest unambiguous prefix of a long option, and
// refuses one that abbreviates several. extra_args is judged the same way
// against EAL's own option list: "--in" is --in-memory (no runtime
// directory, so no lock against a second daemon) and was taken before,
// since the check wanted at least "--in-"; "--no-" abbreviates five
// options and DPDK would refuse it only when the daemon starts.
func TestExtraArgsAbbreviations(t *testing.T) {
	parse := func(args string) error {
		cfg := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("eal", "extra_args = "+args).Web(2).String()
		_, err := config.Parse([]byte(cfg), "t.toml")
		return err
	}
	for _, args := range []string{
		`["--in"]`, `["--in-mem"]`, `["--no-s"]`, `["--no-sh=1"]`, // --in-memory, --no-shconf
		`["--no-"]`, `["--f=x"]`, `["--tr"]`, // ambiguous
		`["--proc", "secondary"]`, `["--proc-t=auto"]`, `["--mast=0"]`, `["--file-pre=.."]`, `["--he"]`,
		`["-vh"]`, `["-vm512"]`,
	} {
		if err := parse(args); err == nil || !strings.Contains(err.Error(), "eal.extra_args") {
			t.Errorf("extra_args = %s: accepted (err %v), want it refused at eal.extra_args", args, err)
		}
	}
	for _, args := range []string{
		`["--log-level=lib.eal:8"]`, `["--iova-mode", "va"]`, `["--proc-type=PRIMARY"]`, `["--proc", "primary"]`,
		`["--no-telemetry"]`, `["--no-t"]`, `["--huge-unlink"]`, `["-n", "4"]`, `["-v"]`,
	} {
		if err := parse(args); err != nil {
			t.Errorf("extra_args = %s: refused (%v), want it taken", args, err)
		}
	}
}
