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
