package admin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// TestBackendState: one word per state, drain first (an operator's
// decision outranks what the checks say).
func TestBackendState(t *testing.T) {
	for _, c := range []struct {
		b    api.Backend
		want string
	}{
		{api.Backend{Health: "up"}, "up"},
		{api.Backend{Health: "unchecked"}, "up"},
		{api.Backend{Health: "unknown"}, "unknown"},
		{api.Backend{Health: "down"}, "down"},
		{api.Backend{Health: "down", Drained: true}, "draining"},
		{api.Backend{Health: "up", Outlier: true}, "outlier"},
		{api.Backend{Health: "up", SlowStart: true}, "slow-start"},
		{api.Backend{Health: "up", SlowStart: true, Drained: true}, "draining"},
	} {
		if got := backendState(&c.b); got != c.want {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
}

// TestPageRendersStates: the template shows a slow start's ramp, an
// outlier's reason, panic mode and a VIP that serves nothing, and escapes
// names.
func TestPageRendersStates(t *testing.T) {
	d := pageData{Refresh: 5, VIPs: []api.VIP{
		{Name: "web", Address: "203.0.113.7", Port: 80, Protocol: "tcp", Panic: true, Serving: true, Backends: []api.Backend{
			{VIP: "web", Name: "be1", State: "slow-start", RampPercent: 40, Weight: 5, EffectiveWeight: 2},
			{VIP: "web", Name: "be2", State: "outlier", Reason: "handshake failures 60% > 50%"},
			{VIP: "web", Name: "<b>x</b>", State: "up", CheckResult: "ok", CheckLatencyMs: 1.25},
		}},
		{Name: "dns", Serving: false},
	}, BGP: []api.BGPPeer{{Address: "192.0.2.1", ASN: 65000, State: "established"}}}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`data-backend="be1" data-state="slow-start">`, `slow-start 40%`,
		`data-state="outlier"`, `handshake failures 60% &gt; 50%`,
		`PANIC MODE`, `NO BACKEND`, `&lt;b&gt;x&lt;/b&gt;`, `1.25`,
		`data-peer="192.0.2.1"`, `established`, `<meta http-equiv="refresh" content="5">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<b>x</b>") || strings.Contains(page, "<script") {
		t.Error("page holds unescaped markup or a script")
	}
}
