package config_test

import (
	"fmt"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/health"
)

// Found by a mutation audit (no other test pinned it down): a
// [dataplane.punt] health written exactly at what the configured checks
// need is enough, and is kept; one below is refused. (TestPuntHealthSizedByChecks
// tries need+1 and far below, so "<" for "<=" survived.)
func TestEdgePuntHealthExactlyTheNeed(t *testing.T) {
	parse := func(punt string) (*config.Config, error) {
		b := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
			VIP("web", "203.0.113.7", 80).Sub("[vip.health]", `kind = "http"`, `interval = "100ms"`, `timeout = "50ms"`)
		for i := range 500 {
			b.Backend(fmt.Sprintf("b%d", i), fmt.Sprintf("10.0.%d.%d", 1+i/250, 1+i%250))
		}
		toml := b.String()
		if punt != "" {
			toml += "\n[dataplane.punt]\n" + punt + "\n"
		}
		return config.Parse([]byte(toml), "punt.toml")
	}
	need := 2 * 500 * health.AnswersPerCheck(health.KindHTTP) * 10
	c, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dataplane.Punt.Health != need {
		t.Fatalf("health left out: %d, want %d", c.Dataplane.Punt.Health, need)
	}
	if c, err := parse(fmt.Sprintf("health = %d", need)); err != nil || c.Dataplane.Punt.Health != need {
		t.Errorf("health = %d, exactly the need: err %v; want accepted and kept", need, err)
	}
	if _, err := parse(fmt.Sprintf("health = %d", need-1)); err == nil {
		t.Errorf("health = %d, one below the need: accepted; want refused", need-1)
	}
}

// Found by a mutation audit: rx_desc, tx_desc and mempool_size accept
// config.MinDesc itself (the bound is inclusive, as the error text
// "outside 64..N" says); one less is refused.
func TestEdgeDescriptorsAtMinimum(t *testing.T) {
	for _, key := range []string{"rx_desc", "tx_desc", "mempool_size"} {
		parse := func(n int) (*config.Config, error) {
			toml := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, fmt.Sprintf("%s = %d", key, n)).Web(1).String()
			return config.Parse([]byte(toml), "desc.toml")
		}
		if _, err := parse(config.MinDesc); err != nil {
			t.Errorf("%s = %d (MinDesc): %v; want accepted", key, config.MinDesc, err)
		}
		if _, err := parse(config.MinDesc - 1); err == nil {
			t.Errorf("%s = %d: accepted; want refused", key, config.MinDesc-1)
		}
	}
}
