package configtest_test

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// The base fixture parses, with the values every fixture relies on.
func TestBaseParses(t *testing.T) {
	c, err := config.Parse([]byte(configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Web(3).String()), "base.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dataplane.HashKey != configtest.HashKey || len(c.VIPs) != 1 || c.VIPs[0].Name != "web" || c.VIPs[0].Address.String() != configtest.Web ||
		len(c.VIPs[0].Backends) != 3 || c.VIPs[0].Backends[2].Name != "be3" || c.VIPs[0].Backends[2].Address.String() != "10.0.1.3" {
		t.Fatalf("base fixture: %+v", c)
	}
}
