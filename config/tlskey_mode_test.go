package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/internal/testtls"
)

// The admin API's TLS private key is as much a secret as its token: with
// it anyone on the host can impersonate the API to fulcrumctl (which then
// sends the token). A token_file every user can read is refused and an
// inline token in a readable configuration is warned of, but a tls_key
// of mode 0644 (what `openssl req ... -keyout`, cp or an ansible copy
// with the default mode leave) loaded without a word. Load must at least
// warn, naming admin.tls_key and the file; a key kept from other users
// gets no warning.
func TestWorldReadableTLSKeyWarns(t *testing.T) {
	own := strings.Replace(base, "000102030405060708090a0b0c0d0e0f", "5be1c3e6a07f42d9b81c0e2f6a4d3917", 1)
	for _, perm := range []os.FileMode{0o644, 0o640} {
		dir := t.TempDir()
		cert, key, _ := testtls.SelfSigned(t, dir, "a")
		if err := os.Chmod(key, perm); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "fulcrum.toml")
		src := own + "[admin]\ntls_cert = \"" + cert + "\"\ntls_key = \"" + key + "\"\n"
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		var named int
		for _, w := range c.Warnings {
			if strings.HasPrefix(w, "admin.tls_key") && strings.Contains(w, key) {
				named++
			}
		}
		if want := map[os.FileMode]int{0o644: 1, 0o640: 0}[perm]; named != want {
			t.Errorf("tls_key of mode %04o: warnings %q; want %d naming admin.tls_key and %s", perm, c.Warnings, want, key)
		}
	}
}
