package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
)

// TestConnsJSONNextResumesAfterShownEntries: conns --json prints the
// API's answer, with its "next" cursor. When --limit cuts a page the
// daemon gave whole (a page ends at a bucket boundary), "next" must not
// point past the entries cut: a script that continues the listing from
// it (GET /api/v1/conns?cursor=NEXT) would never see them.
func TestConnsJSONNextResumesAfterShownEntries(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	const n = 20000
	sendFlows(t, p, 6000, n)
	var first api.Conns
	if err := json.Unmarshal([]byte(mustRun(t, "--addr", addr, "--json", "conns", "--limit", "1")), &first); err != nil {
		t.Fatal(err)
	}
	if len(first.Conns) != 1 || first.Next == "" {
		t.Fatalf("conns --limit 1: %d entries, next %q", len(first.Conns), first.Next)
	}
	seen := map[string]bool{}
	for _, c := range first.Conns {
		seen[c.Client] = true
	}
	cursor := first.Next
	for cursor != "" {
		resp, err := http.Get("http://" + addr + api.ConnsQuery("", "", 1000, cursor))
		if err != nil {
			t.Fatal(err)
		}
		var pg api.Conns
		err = json.NewDecoder(resp.Body).Decode(&pg)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pg.Conns {
			seen[c.Client] = true
		}
		cursor = pg.Next
	}
	if len(seen) != n {
		t.Errorf("conns --json --limit 1, then the API from its next: %d of %d connections seen (next %q skips the ones --limit cut)", len(seen), n, first.Next)
	}
}
