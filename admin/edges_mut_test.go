package admin_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
)

// Found by a mutation audit (no other test pinned it down): the
// DNS-rebinding guard is for loopback TCP listeners only. Over a unix
// socket (file permissions are the access control) any Host is answered:
// `curl --unix-socket /run/fulcrum/admin.sock http://fulcrum/api/v1/status`
// must work, as the package documentation says. Every existing unix test
// sent Host "localhost", so applying the guard there too survived.
func TestEdgeUnixSocketAnswersAnyHost(t *testing.T) {
	dir, err := os.MkdirTemp("", "fulcrum-edge")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := start(t, admintest.Config, config.Admin{Listen: "unix:" + filepath.Join(dir, "admin.sock")})
	for _, host := range []string{"fulcrum", "lb.example.com", "localhost"} {
		code, b := e.call(http.MethodGet, api.StatusPath, "", "Host", host)
		if code != http.StatusOK {
			t.Errorf("GET status over the unix socket with Host %q: %d %s; want 200", host, code, b)
		}
	}
	// The loopback TCP listener still refuses a name (the guard is on).
	l := start(t, admintest.Config, loopback())
	if code, _ := l.call(http.MethodGet, api.StatusPath, "", "Host", "fulcrum"); code != http.StatusForbidden {
		t.Errorf("GET status on loopback TCP with Host %q: %d, want 403", "fulcrum", code)
	}
}

// Found by a mutation audit: the API's weight bounds are inclusive at both
// ends. 65535 (the largest, as in the configuration) is set; 65536 is
// refused (tested elsewhere), and 0 is set (tested elsewhere).
func TestEdgeWeightAtMaximumAccepted(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	var b api.Backend
	e.ok(http.MethodPost, api.ActionPath("web", "be2", api.ActionWeight), `{"weight": 65535}`, &b)
	if b.Weight != 65535 || e.backend("web", "be2").Weight != 65535 {
		t.Errorf("after weight 65535: answer weight %d, plane weight %d; want 65535", b.Weight, e.backend("web", "be2").Weight)
	}
	e.ok(http.MethodPost, api.ActionPath("web", "be2", api.ActionWeight)+"?weight=65535", "", &b)
	if b.Weight != 65535 {
		t.Errorf("?weight=65535: answer weight %d", b.Weight)
	}
}

// Found by a mutation audit: limit is accepted in 1..control.MaxConnsPage,
// both ends included (0 and MaxConnsPage+1 are refused, tested elsewhere).
func TestEdgeConnsLimitBoundsInclusive(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	for _, n := range []int{1, control.MaxConnsPage} {
		code, b := e.call(http.MethodGet, api.ConnsQuery("", "", n, ""), "")
		var page api.Conns
		if code != http.StatusOK || json.Unmarshal(b, &page) != nil {
			t.Errorf("GET conns limit=%d: %d %s; want 200 and a page", n, code, b)
		}
	}
}

// Found by a mutation audit: the token after "Bearer" is taken with the
// blanks around it trimmed, so "Bearer  <token>" (two spaces, as some
// scripts build it) is the token, and a wrong token stays wrong. Without
// TrimSpace every test still passed.
func TestEdgeBearerTokenBlanksTrimmed(t *testing.T) {
	const token = "edge-test-token-0123456789abcdef"
	e := start(t, admintest.Config, config.Admin{Listen: "127.0.0.1:0", Token: token})
	var b api.Backend
	e.ok(http.MethodPost, api.ActionPath("web", "be1", api.ActionDrain), "", &b, "Authorization", "Bearer  "+token)
	if !b.Drained {
		t.Errorf("drain with %q: answer %+v, want drained", "Bearer  <token>", b)
	}
	if code, _ := e.call(http.MethodPost, api.ActionPath("web", "be1", api.ActionUndrain), "", "Authorization", "Bearer  x"+token); code != http.StatusUnauthorized {
		t.Errorf("undrain with a wrong token: %d, want 401", code)
	}
}

// Found by a mutation audit: the DNS-rebinding guard
// of a loopback TCP listener answers every Host that names an address or
// localhost, as written by any client: "LOCALHOST" (host names are case
// blind), and a bracketed IPv6 address without a port ("[::1]", as a
// client on port 80 sends it). Refusing them answered 403 to a local
// operator's correct request.
func TestEdgeLoopbackHostForms(t *testing.T) {
	l := start(t, admintest.Config, loopback())
	for _, host := range []string{"LOCALHOST", "LocalHost:9180", "[::1]", "[::1]:9180", "127.0.0.1"} {
		if code, b := l.call(http.MethodGet, api.StatusPath, "", "Host", host); code != http.StatusOK {
			t.Errorf("GET status on loopback TCP with Host %q: %d %s; want 200", host, code, b)
		}
	}
	for _, host := range []string{"[fulcrum]", "localhost.example.com"} {
		if code, _ := l.call(http.MethodGet, api.StatusPath, "", "Host", host); code != http.StatusForbidden {
			t.Errorf("GET status on loopback TCP with Host %q: %d, want 403", host, code)
		}
	}
}

// A VIP named by its bare address is resolved only when one VIP has that
// address. With web:80 and tls:443 on 203.0.113.7, "drain be1 of
// 203.0.113.7" names no one VIP: it is refused (400), and neither VIP's
// backend is touched. Acting on the first match drained web's be1 when the
// operator may have meant tls's, with a 200 saying all went well.
func TestEdgeAmbiguousVIPAddressRefused(t *testing.T) {
	toml := admintest.Config + `
[[vip]]
name = "tls"
address = "203.0.113.7"
port = 443
  [[vip.backend]]
  name = "be1"
  address = "10.0.1.1"
`
	e := start(t, toml, loopback())
	code, b := e.call(http.MethodPost, api.ActionPath("203.0.113.7", "be1", api.ActionDrain), "")
	if code != http.StatusBadRequest {
		t.Errorf("drain be1 of 203.0.113.7 (web:80 and tls:443 there): %d %s; want 400", code, b)
	}
	if e.backend("web", "be1").Drained || e.backend("tls", "be1").Drained {
		t.Errorf("an ambiguous VIP reference drained a backend: web/be1 %v, tls/be1 %v", e.backend("web", "be1").Drained, e.backend("tls", "be1").Drained)
	}
	// The full form names one VIP.
	var out api.Backend
	e.ok(http.MethodPost, api.ActionPath("203.0.113.7:443", "be1", api.ActionDrain), "", &out)
	if !e.backend("tls", "be1").Drained || e.backend("web", "be1").Drained {
		t.Errorf("drain be1 of 203.0.113.7:443: tls/be1 drained %v, web/be1 drained %v; want true, false", e.backend("tls", "be1").Drained, e.backend("web", "be1").Drained)
	}
}

// GET /vips?backends=<not a boolean> is refused (400): answering 200 with
// an empty ("null") document told a script there were no VIPs.
func TestEdgeVIPsBackendsNotBoolRefused(t *testing.T) {
	e := start(t, admintest.Config, loopback())
	for _, q := range []string{"yes", "2", "on"} {
		code, b := e.call(http.MethodGet, api.VIPsPath+"?backends="+q, "")
		if code != http.StatusBadRequest {
			t.Errorf("GET vips?backends=%s: %d %s; want 400", q, code, b)
		}
	}
	code, b := e.call(http.MethodGet, api.VIPsPath+"?backends=true", "")
	if code != http.StatusOK || len(b) < 10 {
		t.Errorf("GET vips?backends=true: %d %s; want 200 and the VIPs", code, b)
	}
}
