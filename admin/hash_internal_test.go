package admin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// The status page names a VIP's hash fields when they are not the
// default 5-tuple, and says nothing more for the default.
func TestPageShowsHashFields(t *testing.T) {
	d := pageData{Refresh: 5, VIPs: []api.VIP{
		{Name: "web", Address: "203.0.113.7", Port: 80, Protocol: "tcp", Encap: "gre", HashFields: "src-ip-prefix /24 /48", Serving: true},
		{Name: "dns", Address: "203.0.113.7", Port: 53, Protocol: "udp", Encap: "gre", HashFields: "5-tuple", Serving: true},
	}}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, "· hash src-ip-prefix /24 /48</span>") {
		t.Errorf("web's hash fields missing:\n%s", page)
	}
	if strings.Count(page, "· hash ") != 1 {
		t.Errorf("want one hash note (the default is not shown):\n%s", page)
	}
}
