package admin_test

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestMetricsConservation: after mixed traffic (forwarded, punted, dropped
// for several reasons), /metrics and the status JSON tell the same story
// as the workers' counters, summed: every drop reason has its
// fulcrum_drops_total series, and
// rx = forwarded + too-big replies + echo replies + punted + drops
// holds in both.
func TestMetricsConservation(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	for i := range 20 {
		e.plane.Send(admintest.TCP(t, uint16(2000+i), webVIP, "S"))
	}
	e.plane.Send(admintest.TCP(t, 9, netip.AddrPortFrom(webVIP.Addr(), 81), "S"))     // no-service
	e.plane.Send(admintest.UDP(t, 9, netip.MustParseAddrPort("192.0.2.10:9")))        // punted
	e.plane.Send(admintest.UDP(t, 9, netip.MustParseAddrPort("198.51.100.99:9")))     // not-for-host
	e.plane.Send(admintest.TCP(t, 10, webVIP, "S")[:40])                              // truncated
	e.plane.Send(admintest.TCP(t, 11, netip.MustParseAddrPort("203.0.113.7:80"), "")) // bad flags

	fams := e.scrape()
	var st api.Status
	e.ok("GET", api.StatusPath, "", &st)
	var raw map[string]json.RawMessage
	_, body := e.call("GET", api.StatusPath, "")
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	sumWorkers := func(name string, labels ...string) float64 {
		var n float64
		for i := range st.Workers {
			v, ok := value(fams, name, append([]string{"worker", itoa(i)}, labels...)...)
			if !ok {
				t.Errorf("%s worker %d %v: missing", name, i, labels)
			}
			n += v
		}
		return n
	}
	tot := st.Total
	rx := sumWorkers("fulcrum_worker_rx_packets_total")
	fwd := sumWorkers("fulcrum_worker_forwarded_packets_total")
	tooBig := sumWorkers("fulcrum_worker_icmp_replies_total", "type", "too-big")
	echo := sumWorkers("fulcrum_worker_icmp_replies_total", "type", "echo")
	punted := sumWorkers("fulcrum_worker_punted_packets_total")
	var drops float64
	reasons := 0
	dataplane.ForEachDrop(&dataplane.Counters{}, func(reason string, _ uint64) {
		reasons++
		v, ok := value(fams, "fulcrum_drops_total", "reason", reason)
		if !ok {
			t.Errorf("drop reason %q has no fulcrum_drops_total series", reason)
		}
		if v != float64(tot.Drops[reason]) {
			t.Errorf("fulcrum_drops_total{reason=%q} = %v, status total says %d", reason, v, tot.Drops[reason])
		}
		drops += v
	})
	if got := len(fams["fulcrum_drops_total"].GetMetric()); got != reasons {
		t.Errorf("%d fulcrum_drops_total series, %d reasons", got, reasons)
	}
	if rx != 25 || rx != float64(tot.RxPackets) || fwd != float64(tot.Forwarded) || punted != float64(tot.Punted) ||
		tooBig != float64(tot.ICMPReplies) || echo != float64(tot.EchoReplies) || drops != float64(tot.Dropped) {
		t.Errorf("metrics rx %v fwd %v too-big %v echo %v punted %v drops %v; status %+v", rx, fwd, tooBig, echo, punted, drops, tot)
	}
	if rx != fwd+tooBig+echo+punted+drops {
		t.Errorf("metrics: rx %v != forwarded %v + too-big %v + echo %v + punted %v + drops %v", rx, fwd, tooBig, echo, punted, drops)
	}
	var byReason uint64
	for _, n := range tot.Drops {
		byReason += n
	}
	if tot.RxPackets != tot.Forwarded+tot.ICMPReplies+tot.EchoReplies+tot.Punted+tot.Dropped || byReason != tot.Dropped {
		t.Errorf("status total does not add up: %+v (drops by reason %d)", tot, byReason)
	}
	// The total is the workers' sum, field by field for the identity.
	var w api.Worker
	for _, x := range st.Workers {
		w.RxPackets += x.RxPackets
		w.Forwarded += x.Forwarded
		w.Punted += x.Punted
		w.Dropped += x.Dropped
		w.EchoReplies += x.EchoReplies
		w.ICMPReplies += x.ICMPReplies
	}
	if w.RxPackets != tot.RxPackets || w.Forwarded != tot.Forwarded || w.Punted != tot.Punted || w.Dropped != tot.Dropped ||
		w.EchoReplies != tot.EchoReplies || w.ICMPReplies != tot.ICMPReplies {
		t.Errorf("status total %+v is not the workers' sum %+v", tot, w)
	}
	if _, ok := raw["total"]; !ok {
		t.Error("status JSON has no total")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
