package config_test

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// TestKeyOtherCaseRefused: TOML keys are case-sensitive, and Fulcrum's
// are lower case; the decoder falls back to a case-insensitive match, so
// "Port = 443" in a [[vip]] set the VIP's port and was never reported as
// the unknown key it is. With both spellings in one table ("hash_key" and
// "Hash_Key", "weight" and "Weight"), which value wins depends on Go's
// map order: the same file parsed twice gives different configurations
// (another fleet hash key, another port or weight), so two instances, or
// `fulcrum check` and `fulcrum run`, or two reloads of an unchanged file,
// disagree. And "Drain_Timeout = 300" escaped the bare-integer check: a
// 300 ns drain timeout.
func TestKeyOtherCaseRefused(t *testing.T) {
	for _, tc := range []struct{ name, toml, key string }{
		{"vip Port", configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Web(2, "Port = 443").String(), "vip[0].Port"},
		{"Hash_Key beside hash_key", configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, `Hash_Key = "ffffffffffffffffffffffffffffffff"`).Web(2).String(), "dataplane.Hash_Key"},
		{"Drain_Timeout bare", configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("control", "Drain_Timeout = 300").Web(2).String(), "control.Drain_Timeout"},
		{"Capacity", configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Section("conntrack", "Capacity = 1024").Web(2).String(), "conntrack.Capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The same file, parsed again and again, gives one answer.
			seen := map[string]int{}
			for i := 0; i < 50; i++ {
				c, err := config.Parse([]byte(tc.toml), "t.toml")
				if err != nil {
					seen["refused: "+err.Error()]++
					continue
				}
				seen["accepted: hash_key "+c.Dataplane.HashKey+" port "+itoa(c.VIPs[0].Port)+" capacity "+itoa(c.Conntrack.Capacity)+" drain_timeout "+c.Control.DrainTimeout.String()]++
			}
			if len(seen) != 1 {
				t.Errorf("50 parses of one file gave %d different answers: %v", len(seen), seen)
			}
			for s := range seen {
				if !strings.HasPrefix(s, "refused: ") || !strings.Contains(s, tc.key) {
					t.Errorf("%s: want it refused as an unknown key at %s", s, tc.key)
				}
			}
		})
	}
}
