package config_test

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// TestEffectiveConfigOfIPIPUnderSecondChance: a VIP tunnelled with ipip
// under dataplane.second_chance = true is accepted (docs/second-chance.md:
// "inherited from [dataplane], it is simply off"), so the effective
// configuration `fulcrum check` prints for it must be accepted too, and
// say the VIP has no second chance. Found by control's FuzzConfigPlan.
func TestEffectiveConfigOfIPIPUnderSecondChance(t *testing.T) {
	for _, tc := range []struct {
		name string
		dp   []string
		vip  []string
	}{
		{"vip encap ipip", []string{`next_hop_mac = "02:00:00:00:00:fe"`, "second_chance = true"}, []string{`encap = "ipip"`}},
		{"dataplane encap ipip", []string{`next_hop_mac = "02:00:00:00:00:fe"`, "second_chance = true", `encap = "ipip"`}, nil},
	} {
		toml := configtest.New().Dataplane(tc.dp...).VIP("a", "203.0.113.7", 80, tc.vip...).Backend("b1", "10.0.0.1").String()
		c, err := config.Parse([]byte(toml), "sc.toml")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if *c.VIPs[0].SecondChance {
			t.Errorf("%s: the ipip VIP's effective second_chance is true; it has none", tc.name)
		}
		enc, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.Parse([]byte(enc), "effective.toml"); err != nil {
			t.Errorf("%s: the effective configuration is refused: %v", tc.name, err)
		}
	}
}
