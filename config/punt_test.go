package config_test

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/punt"
)

// TestPuntKeys: [dataplane.punt] takes a rate per class, 0 (or absent)
// for the default (filled in); a negative rate, one over MaxPuntRate and
// an unknown class are refused, each naming its key.
func TestPuntKeys(t *testing.T) {
	parse := func(punt ...string) (*config.Config, error) {
		toml := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
			Web(1).String() + "\n[dataplane.punt]\n" + strings.Join(punt, "\n") + "\n"
		return config.Parse([]byte(toml), "punt.toml")
	}
	c, err := parse("neighbour = 300", "bgp = 40", "health = 0")
	if err != nil {
		t.Fatal(err)
	}
	if want := (punt.Config{Neighbour: 300, BGP: 40, Health: punt.Default.Health, Other: punt.Default.Other}); c.Dataplane.Punt != want {
		t.Errorf("punt %+v, want %+v", c.Dataplane.Punt, want)
	}
	for _, bad := range []struct{ line, want string }{
		{"other = -1", "dataplane.punt.other"},
		{"health = 1000001", "dataplane.punt.health"},
		{"bgp = 1e3", "dataplane.punt"},
		{"arp = 10", "arp"},
	} {
		if _, err := parse(bad.line); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err %v, want one naming %s", bad.line, err, bad.want)
		}
	}
}
