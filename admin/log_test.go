package admin_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/internal/syncbuf"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// syncBuffer is the server's JSON log, safe for its goroutines.
type syncBuffer struct{ syncbuf.Buffer }

func (s *syncBuffer) records(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestCallsLogged: every mutation, applied or refused, and every failed
// call is logged with the caller's address and the outcome.
func TestCallsLogged(t *testing.T) {
	var buf syncBuffer
	p := admintest.New(t, admintest.Config)
	e := serveLog(t, p, loopback(), p.File, slog.New(slog.NewJSONHandler(&buf, nil)))

	var b api.Backend
	e.ok("POST", api.ActionPath("web", "be1", api.ActionDrain), "", &b)
	if err := os.WriteFile(p.File, []byte(admintest.Config+"\nbogus = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.fails("POST", api.ReloadPath, "", 422, "bogus")
	e.fails("GET", api.VIPPath("nope"), "", 404)
	e.fails("POST", api.ActionPath("web", "be1", "explode"), "", 404)

	type want struct {
		level, path string
		status      float64
	}
	wants := []want{
		{"INFO", api.ActionPath("web", "be1", api.ActionDrain), 200},
		{"WARN", api.ReloadPath, 422},
		{"INFO", api.VIPPath("nope"), 404},
		{"WARN", api.ActionPath("web", "be1", "explode"), 404},
	}
	var calls []map[string]any
	for _, r := range buf.records(t) {
		if r["path"] != nil {
			calls = append(calls, r)
		}
	}
	if len(calls) != len(wants) {
		t.Fatalf("%d call records, want %d: %v", len(calls), len(wants), calls)
	}
	for i, w := range wants {
		r := calls[i]
		remote, _ := r["remote"].(string)
		if r["level"] != w.level || r["path"] != w.path || r["status"] != w.status || !strings.HasPrefix(remote, "127.0.0.1:") {
			t.Errorf("record %d: %v; want level %s path %s status %v remote 127.0.0.1:*", i, r, w.level, w.path, w.status)
		}
	}
	if err, _ := calls[1]["err"].(string); !strings.Contains(err, "bogus") {
		t.Errorf("refused reload logged without its reason: %v", calls[1])
	}
}
