package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/flow"
)

// TestStatsNewFlowsCumulative: --stats-json documents every counter
// as "cumulative since start" (docs/benchmarks.md names new_flows among
// them), but new_flows is the sum of the per-VIP counters of the VIPs in
// the current snapshot: a reload that removes a VIP takes its new flows
// out of the total, which falls.
func TestStatsNewFlowsCumulative(t *testing.T) {
	two := statsConfig + `
[[vip]]
name = "api"
address = "203.0.113.8"
port = 80
  [[vip.backend]]
  address = "10.0.2.1"
`
	cfg, err := config.Parse([]byte(two), "stats.toml")
	if err != nil {
		t.Fatal(err)
	}
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	shared := &dataplane.Shared{}
	lc := dptest.NewLcore(t, shared, cfg.Conntrack, key)
	plane, err := control.New(cfg, shared, []*dataplane.Worker{lc.Worker}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		for _, dst := range []string{"203.0.113.7:80", "203.0.113.8:80"} {
			if r := lc.Send(dptest.TCP(t, uint16(1000+i), netip.MustParseAddrPort(dst), "S")); r.Verdict != dataplane.Tx {
				t.Fatalf("SYN to %s: %v", dst, r.Verdict)
			}
		}
	}
	sr := newStatsReader([]snapshotter{lc.Worker})
	newFlows := func() uint64 {
		var b strings.Builder
		if err := sr.writeJSON(&b, time.Now()); err != nil {
			t.Fatal(err)
		}
		var v struct {
			NewFlows uint64 `json:"new_flows"`
		}
		if err := json.Unmarshal([]byte(b.String()), &v); err != nil {
			t.Fatal(err)
		}
		return v.NewFlows
	}
	before := newFlows()
	one, err := config.Parse([]byte(statsConfig), "stats.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := plane.Apply(one); err != nil {
		t.Fatal(err)
	}
	lc.Send(dptest.TCP(t, 3000, netip.MustParseAddrPort("203.0.113.7:80"), "S")) // the worker takes the snapshot
	after := newFlows()
	if before != 20 || after < before {
		t.Errorf("new_flows %d before the reload that removed api, %d after one more new flow: a cumulative counter fell", before, after)
	}
}
