package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
)

// "--json prints the API's JSON": the API answers an empty listing with
// "conns": [] (fulcrumctl itself refuses an answer without it); a script
// iterating it (jq '.conns[]', for c in d["conns"]) must get an empty
// list from fulcrumctl too, not null.
func TestConnsJSONEmptyIsAList(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config)
	for _, args := range [][]string{{"--json", "conns"}, {"--json", "conns", "--vip", "web"}, {"--json", "conns", "--backend", "be1"}} {
		out := mustRun(t, with(base, args...)...)
		var v map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%q: %v: %s", args, err, out)
		}
		if string(v["conns"]) != "[]" {
			t.Errorf("%q with no connection: \"conns\" is %s, want [] (the API's answer)", args, v["conns"])
		}
	}
}

// A selector given twice ("flush --backend be1 --backend be2", a script
// that appends to a base command) is ambiguous: flushing only the last
// one and saying nothing acts on a backend the operator may not have
// meant, and leaves the other alone. Refused as bad usage, before
// anything is sent, as a selector the command does not take is.
func TestDuplicateSelectorRefused(t *testing.T) {
	p, base := probeDaemon(t, admintest.Config)
	sendFlows(t, p, 45000, 30)
	be2Conns := func() int {
		var c struct{ Conns []json.RawMessage }
		json.Unmarshal([]byte(mustRun(t, with(base, "--json", "conns", "--limit", "1000", "--backend", "be2")...)), &c)
		return len(c.Conns)
	}
	before := be2Conns()
	if before == 0 {
		t.Fatal("no flow on be2")
	}
	for _, args := range [][]string{
		{"flush", "--backend", "be1", "--backend", "be2"},
		{"flush", "--vip", "dns", "--vip", "web", "--backend", "be2"},
		{"conns", "--vip", "dns", "--vip", "web"},
	} {
		failClean(t, exitUsage, with(base, args...)...)
	}
	if got := be2Conns(); got != before {
		t.Errorf("be2's flows: %d before, %d after the refused flushes", before, got)
	}
}

// An IPv6 link-local admin address is written with its zone, as the
// daemon's [admin] listen takes it and as net.Dial does:
// "[fe80::1%lo]:9180". fulcrumctl must dial it (here: nothing listens,
// so "cannot reach", exit 1), not fail to build its own URL.
func TestAddrWithZone(t *testing.T) {
	probeEnv(t)
	code, out, errs := ctl("--addr", "[fe80::1%lo]:1", "--timeout", "2s", "status")
	t.Logf("exit %d stdout %q stderr %q", code, out, errs)
	if strings.Contains(errs, "invalid URL escape") {
		t.Errorf("--addr [fe80::1%%lo]:1: fulcrumctl cannot even form the request: %q", errs)
	}
}
