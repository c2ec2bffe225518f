package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// TestStringsProbeHostileNamesPrintable: names in a daemon's successful
// answers (a daemon reached with --insecure, or a proxy in between) reach
// the terminal escaped, from the plain lines as from the tables: the
// errors and the table cells were escaped, the "vip NAME" lines of
// backends, table, lookup and drain, and status's PANIC and announced
// lines were not.
func TestStringsProbeHostileNamesPrintable(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	const evil = "w\x1b]0;pwned\x07\x1b[2J\nforged"
	addr, _ := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var v any
		switch p := r.URL.Path; {
		case p == api.StatusPath:
			v = api.Status{PanicVIPs: []string{evil}, Announced: []string{evil}, LastError: evil}
		case p == api.LookupPath:
			v = api.Lookup{VIP: evil, Backend: evil, Address: "10.0.1.1", Proto: "tcp", Scheduler: "maglev"}
		case strings.HasSuffix(p, "/table"):
			v = api.Table{VIP: evil, Size: 1, Digest: "x", Slots: []string{evil}}
		case strings.HasSuffix(p, "/drain"):
			v = api.Backend{VIP: evil, Name: evil, Drained: true}
		default:
			v = api.VIP{Name: evil, Address: "203.0.113.7", Port: 80, Protocol: "tcp", Encap: "gre", HashFields: evil,
				Backends: []api.Backend{{Name: evil, Address: "10.0.1.1", Health: evil}}}
		}
		json.NewEncoder(w).Encode(v)
	})
	for _, args := range [][]string{
		{"status"}, {"backends", "web"}, {"table", "web"}, {"drain", "web", "be1"},
		{"lookup", "198.51.100.1", "203.0.113.7", "1000", "80"},
	} {
		code, out, errs := ctl(append([]string{"--addr", addr, "--timeout", "5s"}, args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errs)
			continue
		}
		if hasControl(out) || strings.Contains(out, "\nforged") {
			t.Errorf("%v: a name's control characters reach the terminal: %q", args, out)
		}
	}
}
