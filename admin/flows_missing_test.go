package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
)

// README's drain procedure: "`fulcrumctl backends web` shows the flows
// it still holds ... it is safe to stop when they reach 0". A worker
// whose flow count does not finish in time (stuck, or busy) is left out
// of that count, and only GET /api/v1/status says so
// (flows_missing_workers): the backend's own answer, the one a deploy
// script polls for 0, reads 0 while a worker still tracks its flow, and
// carries no sign that it is incomplete.
func TestBackendFlowCountSaysWhenIncomplete(t *testing.T) {
	// Worker 1 is driven by this test alone: it forwards one SYN, then
	// stops answering (a stuck lcore, or one busy past the count's 5 s).
	cfg, _, w1, plane := handDrivenWorkerPlane(t, nil)
	f := dptest.TCP(t, 40000, netip.MustParseAddrPort("203.0.113.7:80"), "S")
	buf := make([]byte, 4096)
	copy(buf[128:], f)
	pkts := []dataplane.Pkt{{Buf: buf, Off: 128, Len: len(f)}}
	w1.ProcessCaptured(pkts, 1)
	if w1.Verdicts[0] != dataplane.Tx {
		t.Fatalf("SYN verdict %v", w1.Verdicts[0])
	}
	to, _ := netip.AddrFromSlice(buf[pkts[0].Off+30 : pkts[0].Off+34])
	var be string
	for _, b := range cfg.VIPs[0].Backends {
		if b.Address.Addr == to {
			be = b.Name
		}
	}
	if be == "" {
		t.Fatalf("SYN sent to %v, no backend of web", to)
	}

	srv := admin.New(plane, config.Admin{Listen: "127.0.0.1:0"}, cfg.File, nil)
	req := httptest.NewRequest(http.MethodGet, api.BackendPath("web", be), nil)
	req.Host = "127.0.0.1"
	rec := httptest.NewRecorder()
	start := time.Now()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET backend: %d %s", rec.Code, rec.Body)
	}
	var got struct {
		ActiveFlows         uint64 `json:"active_flows"`
		FlowsMissingWorkers []int  `json:"flows_missing_workers"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	t.Logf("answer after %v: %s", time.Since(start), rec.Body)
	if got.ActiveFlows == 0 && len(got.FlowsMissingWorkers) == 0 {
		t.Errorf("web/%s: active_flows 0 while worker 1 tracks its flow, and the answer does not say worker 1 was not counted", be)
	}
}
