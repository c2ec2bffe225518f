package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/health"
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

// The health budget follows the checks: 500 backends checked over HTTP
// every 100 ms answer with about 30,000 packets a second, over the
// default 10,000, whose drops would call healthy backends down. Left out,
// the rate is sized at twice that; written lower, it is refused at its
// key; written higher, it stays. A few backends keep the default.
func TestPuntHealthSizedByChecks(t *testing.T) {
	parse := func(punt string, n int) (*config.Config, error) {
		b := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
			VIP("web", "203.0.113.7", 80).Sub("[vip.health]", `kind = "http"`, `interval = "100ms"`, `timeout = "50ms"`)
		for i := range n {
			b.Backend(fmt.Sprintf("b%d", i), fmt.Sprintf("10.0.%d.%d", 1+i/250, 1+i%250))
		}
		toml := b.String()
		if punt != "" {
			toml += "\n[dataplane.punt]\n" + punt + "\n"
		}
		return config.Parse([]byte(toml), "punt.toml")
	}
	need := 2 * 500 * health.AnswersPerCheck(health.KindHTTP) * 10
	c, err := parse("", 500)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dataplane.Punt.Health != need {
		t.Errorf("health left out, 500 backends: %d, want %d", c.Dataplane.Punt.Health, need)
	}
	if _, err := parse("health = 20000", 500); err == nil || !strings.Contains(err.Error(), "dataplane.punt.health") {
		t.Errorf("health = 20000 for 500 backends every 100 ms: %v, want refused at dataplane.punt.health", err)
	}
	if c, err := parse(fmt.Sprintf("health = %d", need+1), 500); err != nil || c.Dataplane.Punt.Health != need+1 {
		t.Errorf("health = %d: %v", need+1, err)
	}
	if c, err := parse("", 3); err != nil || c.Dataplane.Punt.Health != punt.Default.Health {
		t.Errorf("3 backends: %v, health %d, want the default", err, c.Dataplane.Punt.Health)
	}
}

// A server that is a backend of several VIPs, checked the same way by
// each, gets one check a round (health.ShareKey): the budget counts it
// once. Four VIPs over the same 500 servers need what one does; another
// path is another check, and so doubles it.
func TestPuntHealthCountsSharedChecksOnce(t *testing.T) {
	build := func(paths ...string) (*config.Config, error) {
		b := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`)
		for v, path := range paths {
			b.VIP(fmt.Sprintf("v%d", v), fmt.Sprintf("203.0.113.%d", 7+v), 80).
				Sub("[vip.health]", `kind = "http"`, `interval = "100ms"`, `timeout = "50ms"`, fmt.Sprintf("path = %q", path), fmt.Sprintf("rise = %d", 2+v))
			for i := range 500 {
				b.Backend(fmt.Sprintf("b%d", i), fmt.Sprintf("10.0.%d.%d", 1+i/250, 1+i%250))
			}
		}
		return config.Parse([]byte(b.String()), "punt.toml")
	}
	need := 2 * 500 * health.AnswersPerCheck(health.KindHTTP) * 10
	c, err := build("/", "/", "/", "/")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dataplane.Punt.Health != need {
		t.Errorf("4 VIPs over the same 500 servers, one check each: health %d, want %d (one VIP's)", c.Dataplane.Punt.Health, need)
	}
	c, err = build("/", "/", "/ready", "/")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dataplane.Punt.Health != 2*need {
		t.Errorf("two checks of the same 500 servers: health %d, want %d", c.Dataplane.Punt.Health, 2*need)
	}
}
