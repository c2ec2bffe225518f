package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// TestSecondChanceKeys: dataplane.second_chance defaults to false and its
// window to 5m; a VIP inherits the switch unless it sets its own; a VIP
// tunnelled with ipip cannot ask for it; the window is bounded.
func TestSecondChanceKeys(t *testing.T) {
	parse := func(dp []string, vipKeys ...string) (*config.Config, error) {
		toml := configtest.New().Dataplane(append([]string{`next_hop_mac = "02:00:00:00:00:fe"`}, dp...)...).
			VIP("a", "203.0.113.7", 80, vipKeys...).Backend("b1", "10.0.0.1").
			VIP("b", "203.0.113.8", 80).Backend("b1", "10.0.0.1").String()
		return config.Parse([]byte(toml), "sc.toml")
	}
	c, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if *c.Dataplane.SecondChance || c.Dataplane.SecondChanceWindow != 5*time.Minute || *c.VIPs[0].SecondChance || *c.VIPs[1].SecondChance {
		t.Fatalf("defaults: %v %v %v %v", *c.Dataplane.SecondChance, c.Dataplane.SecondChanceWindow, *c.VIPs[0].SecondChance, *c.VIPs[1].SecondChance)
	}
	c, err = parse([]string{"second_chance = true", `second_chance_window = "90s"`}, "second_chance = false")
	if err != nil {
		t.Fatal(err)
	}
	if *c.VIPs[0].SecondChance || !*c.VIPs[1].SecondChance || c.Dataplane.SecondChanceWindow != 90*time.Second {
		t.Fatalf("override: vip a %v, vip b %v, window %v; want false, true, 90s", *c.VIPs[0].SecondChance, *c.VIPs[1].SecondChance, c.Dataplane.SecondChanceWindow)
	}
	for _, bad := range []struct {
		dp   []string
		vip  []string
		want string
	}{
		{nil, []string{`encap = "ipip"`, "second_chance = true"}, "vip[0].second_chance"},
		{[]string{`second_chance_window = "-1s"`}, nil, "dataplane.second_chance_window"},
		{[]string{`second_chance_window = "25h"`}, nil, "dataplane.second_chance_window"},
	} {
		if _, err := parse(bad.dp, bad.vip...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %v: err %v, want one naming %s", bad.dp, bad.vip, err, bad.want)
		}
	}
	// ipip inheriting the switch from [dataplane] is accepted (no field to
	// carry it: the VIP simply has none).
	if _, err := parse([]string{"second_chance = true"}, `encap = "ipip"`); err != nil {
		t.Errorf("ipip VIP under dataplane.second_chance: %v", err)
	}
}
