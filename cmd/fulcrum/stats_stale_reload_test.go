package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestStatsNewFlowsStaleWorkerAcrossReload: --stats-json's new_flows
// is cumulative since start. A worker that misses one reading (busy,
// stuck for a while) keeps its last reading; a reload between that grew
// the VIP and backend ids must not make its VIPs' counts look retired
// and then count them again once it answers.
func TestStatsNewFlowsStaleWorkerAcrossReload(t *testing.T) {
	w, plane, mac := statsWorker(t)
	const n = 7
	pkts := make([]dataplane.Pkt, n)
	for i := range pkts {
		f := synFrame(t, mac, uint16(4000+i))
		buf := make([]byte, 128+len(f)+64)
		copy(buf[128:], f)
		pkts[i] = dataplane.Pkt{Buf: buf, Off: 128, Len: len(f)}
	}
	w.Process(pkts, 1000)
	// poll runs the worker's idle polls (its lcore) until stopped.
	poll := func() (stop func()) {
		done, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-done:
					return
				default:
				}
				w.Idle(conntrack.Time(1000))
				time.Sleep(50 * time.Microsecond)
			}
		}()
		return func() { close(done); <-stopped }
	}
	sr := newStatsReader([]snapshotter{w})
	newFlows := func() uint64 {
		var out strings.Builder
		if err := sr.writeJSON(&out, time.Now()); err != nil {
			t.Fatal(err)
		}
		var got struct {
			NewFlows uint64 `json:"new_flows"`
		}
		if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
			t.Fatal(err)
		}
		return got.NewFlows
	}
	stop := poll()
	a := newFlows()
	stop() // stuck for a while
	grown := statsConfig + `
[[vip]]
name = "api"
address = "203.0.113.9"
port = 443
  [[vip.backend]]
  address = "10.0.3.1"
  [[vip.backend]]
  address = "10.0.3.2"
  [[vip.backend]]
  address = "10.0.3.3"
  [[vip.backend]]
  address = "10.0.3.4"
`
	gcfg, err := config.Parse([]byte(grown), "stats.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := plane.Apply(gcfg); err != nil {
		t.Fatal(err)
	}
	b := newFlows() // the worker does not answer: its last reading stays
	stop = poll()
	defer stop()
	c := newFlows()
	if a != n || b != n || c != n {
		t.Errorf("new_flows: %d, then %d with the worker stale after a reload, then %d when it answers again; want %d throughout", a, b, c, n)
	}
}
