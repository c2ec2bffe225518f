package bgp_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/fulcrumlb/fulcrum/bgp"
)

// The speaker's life in the daemon: start, let the control plane set what
// is announced, and on SIGTERM withdraw, drain, stop.
func Example() {
	med := uint32(100)
	cfg := bgp.Config{
		ASN:         65100,
		RouterID:    "192.0.2.10",
		Communities: []string{"65000:100"},
		MED:         &med,
		Neighbors: []bgp.Neighbor{
			{Address: "192.0.2.1", PeerASN: 65000},
			{Address: "2001:db8::1", PeerASN: 65000, Password: "secret"},
		},
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := bgp.New(cfg, log)
	if err != nil {
		log.Error("bad [bgp] config", "err", err)
		return
	}
	if err := s.Start(context.Background()); err != nil {
		log.Error("bgp", "err", err)
		return
	}

	// The control plane, whenever the set of serving VIPs changes:
	_ = s.SetAnnounced(map[netip.Prefix]bgp.VIPAttrs{
		netip.MustParsePrefix("203.0.113.7/32"):  {},
		netip.MustParsePrefix("2001:db8::7/128"): {},
	})

	// On SIGTERM: withdraw, keep forwarding while routers move the flows,
	// then close the sessions.
	_ = s.WithdrawAll()
	time.Sleep(cfg.WithDefaults().DrainTime)
	s.Stop()
}
