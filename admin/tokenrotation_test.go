package admin_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
)

// An operator rotates a leaked token: new contents in the same token_file,
// then a reload (the API's or SIGHUP's). From the moment the reload is in
// force the old token is refused and the new one accepted, without a
// restart.
func TestReloadRotatesTokenFile(t *testing.T) {
	const (
		tok1 = "0123456789abcdef0123-first"
		tok2 = "ffffffffffffffffffff-rotated"
		tok3 = "3333333333333333333333-third"
	)
	tf := filepath.Join(t.TempDir(), "admin.token")
	write := func(tok string) {
		t.Helper()
		if err := os.WriteFile(tf, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tok1)
	p := admintest.New(t, admintest.Config+"\n[admin]\ntoken_file = \""+tf+"\"\n")
	ac := p.Config().Admin
	ac.Listen = "127.0.0.1:0"
	e := serve(t, p, ac, p.File)
	drain := api.ActionPath("web", "be1", "undrain")
	expect := func(what, tok string, want int) {
		t.Helper()
		var hdr []string
		if tok != "" {
			hdr = []string{"Authorization", "Bearer " + tok}
		}
		code, body := e.call(http.MethodPost, drain, "", hdr...)
		refused := code == http.StatusUnauthorized || code == http.StatusForbidden
		if want == http.StatusOK && code != http.StatusOK || want != http.StatusOK && !refused {
			t.Errorf("%s: %d %s; want %d", what, code, body, want)
		}
	}
	expect("the first token before any rotation", tok1, http.StatusOK)
	expect("no token", "", http.StatusUnauthorized)

	// Rotation through the API: the reload call itself still carries the
	// old token.
	write(tok2)
	if code, body := e.call(http.MethodPost, api.ReloadPath, "", "Authorization", "Bearer "+tok1); code != http.StatusOK {
		t.Fatalf("reload after rotating the token file: %d %s", code, body)
	}
	expect("the old token after the reload", tok1, http.StatusUnauthorized)
	expect("the new token after the reload", tok2, http.StatusOK)

	// Rotation through SIGHUP's path (Plane.Reload).
	write(tok3)
	if err := p.Reload(p.File); err != nil {
		t.Fatal(err)
	}
	expect("the second token after the next reload", tok2, http.StatusUnauthorized)
	expect("the first token after the next reload", tok1, http.StatusUnauthorized)
	expect("the third token", tok3, http.StatusOK)

	// A reload refused (the file's token is now too short) changes nothing.
	write("short")
	if err := p.Reload(p.File); err == nil {
		t.Fatal("a token file with a 5-character token was accepted")
	}
	expect("the third token after a refused reload", tok3, http.StatusOK)
	expect("the refused file's token", "short", http.StatusUnauthorized)
}
