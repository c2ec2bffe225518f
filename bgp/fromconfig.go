package bgp

import "github.com/fulcrumlb/fulcrum/config"

// FromConfig maps the [bgp] section onto Config, fills the defaults and
// validates it; errors name the [bgp] key at fault.
func FromConfig(c *config.BGP) (Config, error) {
	out := Config{
		ASN:             c.ASN,
		RouterID:        c.RouterID,
		ListenPort:      c.ListenPort,
		ListenAddresses: c.ListenAddresses,
		Communities:     c.Communities,
		MED:             c.MED,
		NextHopV4:       c.NextHopV4,
		NextHopV6:       c.NextHopV6,
		DrainTime:       c.DrainTime.Duration,
	}
	for _, n := range c.Neighbors {
		out.Neighbors = append(out.Neighbors, Neighbor{
			Address: n.Address, PeerASN: n.PeerASN, Port: n.Port, LocalAddress: n.LocalAddress,
			HoldTime: n.HoldTime.Duration, Keepalive: n.Keepalive.Duration, ConnectRetry: n.ConnectRetry.Duration,
			Password: n.Password, Passive: n.Passive, Multihop: n.Multihop,
		})
	}
	for _, v := range c.VIPs {
		out.VIPs = append(out.VIPs, VIPConfig{Prefix: v.Prefix, Communities: v.Communities, MED: v.MED})
	}
	out = out.WithDefaults()
	if err := out.Validate(); err != nil {
		return Config{}, err // Validate names the [bgp] key
	}
	return out, nil
}
