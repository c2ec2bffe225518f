package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/internal/testtls"
)

var errAtAdmin = regexp.MustCompile(`^f\.toml:[1-9][0-9]*: admin\.(token|token_file): `)

func TestAdminListenLocal(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:9180":     true,
		"127.0.0.2:9180":     true,
		"[::1]:9180":         true,
		"localhost:9180":     true,
		"unix:/run/f.sock":   true,
		"off":                true,
		"0.0.0.0:9180":       false,
		"[::]:9180":          false,
		":9180":              false, // every address
		"192.0.2.1:9180":     false,
		"[2001:db8::1]:9180": false,
		"lb1.example:9180":   false, // a name may resolve anywhere
		"127.0.0.1":          false, // not host:port: not trusted
	} {
		if got := AdminListenLocal(listen); got != want {
			t.Errorf("AdminListenLocal(%q) = %v, want %v", listen, got, want)
		}
	}
}

// tokenFile writes content to a file with mode perm and returns its path.
func tokenFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

func TestAdminToken(t *testing.T) {
	const good = "0123456789abcdef0123"
	dir := t.TempDir()
	unreadable := tokenFile(t, good+"\n", 0o200)
	okFile := tokenFile(t, "  "+good+"  \nsecond line ignored\n", 0o600)
	groupFile := tokenFile(t, good, 0o640)
	cases := []struct {
		name   string
		admin  string // the [admin] section's keys
		want   string // substring of the error; "" accepts
		secret string // Secret() when accepted
	}{
		{"blank token", `token = "   "`, "admin.token: contains a blank", ""},
		{"short token", `token = "abc"`, "admin.token: is 3 characters long, shorter than 16", ""},
		{"15 characters", `token = "` + good[:15] + `"`, "shorter than 16", ""},
		{"inner blank", `token = "01234567 89abcdef"`, "contains a blank", ""},
		{"tab", `token = "0123456789abcdef\t"`, "contains a blank", ""},
		{"16 characters", `token = "` + good[:16] + `"`, "", good[:16]},
		{"non-loopback without a token", `listen = "192.0.2.10:9180"`, "admin.token: is required (or token_file)", ""},
		{"non-loopback with a token", `listen = "192.0.2.10:9180"` + "\n" + `token = "` + good + `"`, "", good},
		{"token file", `listen = "0.0.0.0:9180"` + "\n" + `token_file = "` + okFile + `"`, "", good},
		{"group-readable token file", `token_file = "` + groupFile + `"`, "", good},
		{"both", `token = "` + good + `"` + "\n" + `token_file = "` + okFile + `"`, "not both", ""},
		{"missing token file", `token_file = "` + filepath.Join(dir, "nope") + `"`, "token file " + filepath.Join(dir, "nope") + ": no such file", ""},
		{"empty token file", `token_file = "` + tokenFile(t, "", 0o600) + `"`, "the first line is empty", ""},
		{"blank first line", `token_file = "` + tokenFile(t, " \n"+good+"\n", 0o600) + `"`, "the first line is empty", ""},
		{"world-readable token file", `token_file = "` + tokenFile(t, good, 0o644) + `"`, "mode 0644 lets every user read it", ""},
		{"short token in file", `token_file = "` + tokenFile(t, "short\n", 0o600) + `"`, "is 5 characters long", ""},
		{"token file under a file", `token_file = "` + okFile + `/x"`, "token file " + okFile + "/x: not a directory", ""},
		{"token file is a directory", `token_file = "` + dir + `"`, "token file " + dir + ": not a regular file", ""},
	}
	if os.Geteuid() != 0 { // root reads a mode-0200 file anyway
		cases = append(cases, struct {
			name, admin, want, secret string
		}{"unreadable token file", `token_file = "` + unreadable + `"`, "token file " + unreadable + ": permission denied", ""})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := base + "\n[admin]\n" + tc.admin + "\n"
			c, err := Parse([]byte(src), "f.toml")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := c.Admin.Secret(); got != tc.secret {
					t.Errorf("Secret() = %q, want %q", got, tc.secret)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			// The error names the file, a line and the [admin] key.
			if !errAtAdmin.MatchString(err.Error()) {
				t.Errorf("error %q is not at f.toml:LINE: admin.KEY", err)
			}
		})
	}
}

// A token read from token_file stays out of the effective configuration
// `fulcrum check` prints, which still loads.
func TestAdminTokenFileNotEncoded(t *testing.T) {
	const secret = "s3cret-from-the-file-0123"
	p := tokenFile(t, secret+"\n", 0o600)
	c, err := Parse([]byte(base+"\n[admin]\ntoken_file = \""+p+"\"\n"), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the encoded configuration holds the secret:\n%s", out)
	}
	c2, err := Parse([]byte(out), "encoded")
	if err != nil {
		t.Fatalf("re-parse: %v", err)
	}
	if c2.Admin.Secret() != secret {
		t.Errorf("re-parsed Secret() = %q", c2.Admin.Secret())
	}
}

// Parse refuses the [admin] values admin.Server.Listen refuses when
// `fulcrum run` starts (it promises to reject everything run would):
// TLS files that are missing or do not make a key pair, a unix socket
// path that is empty, too long or abstract, a port out of range. Each is
// reported at its key's line (the [admin] header is line 17).
func TestAdminRefusesWhatListenRefuses(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := testtls.SelfSigned(t, dir, "a")
	cert2, key2, _ := testtls.SelfSigned(t, dir, "b")
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsKeys := func(c, k string) string { return "tls_cert = \"" + c + "\"\ntls_key = \"" + k + "\"" } // lines 18, 19
	for _, tc := range []struct {
		name  string
		admin string
		key   string
		line  int
		msg   string
	}{
		{"missing cert", tlsKeys(missing, key), "admin.tls_cert", 18, missing + ": no such file"},
		{"missing key", tlsKeys(cert, missing), "admin.tls_key", 19, missing + ": no such file"},
		{"cert is a directory", tlsKeys(dir, key), "admin.tls_cert", 18, "is a directory"},
		{"cert not PEM", tlsKeys(notPEM, key), "admin.tls_cert", 18, "holds no PEM CERTIFICATE block"},
		{"cert is a key", tlsKeys(key, key), "admin.tls_cert", 18, "holds no PEM CERTIFICATE block"},
		{"key not PEM", tlsKeys(cert, notPEM), "admin.tls_key", 19, "with tls_cert " + cert},
		{"key of another certificate", tlsKeys(cert, key2), "admin.tls_key", 19, "does not match"},
		{"empty unix path", `listen = "unix:"`, "admin.listen", 18, "has no path"},
		{"abstract socket", `listen = "unix:@fulcrum"`, "admin.listen", 18, "abstract socket"},
		{"unix path too long", `listen = "unix:/` + strings.Repeat("s", 107) + `"`, "admin.listen", 18, "longer than 107"},
		{"port 99999", `listen = "127.0.0.1:99999"`, "admin.listen", 18, `"99999" is not a port`},
		{"port 65536", `listen = "[::1]:65536"`, "admin.listen", 18, "is not a port"},
		{"negative port", `listen = "127.0.0.1:-1"`, "admin.listen", 18, "is not a port"},
		{"unknown service", `listen = "127.0.0.1:no-such-service"`, "admin.listen", 18, "is not a port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblemAt(t, base+"[admin]\n"+tc.admin+"\n", tc.key, tc.line, tc.msg)
		})
	}
	for name, admin := range map[string]string{
		"key pair":                tlsKeys(cert, key),
		"other key pair":          tlsKeys(cert2, key2),
		"unix path of 107 bytes":  `listen = "unix:/` + strings.Repeat("s", 106) + `"`,
		"relative unix path":      `listen = "unix:fulcrum.sock"`,
		"port 65535":              `listen = "127.0.0.1:65535"`,
		"port 0 (any)":            `listen = "127.0.0.1:0"`,
		"service name":            `listen = "127.0.0.1:http"`,
		"off, with missing files": "listen = \"off\"\n" + tlsKeys(missing, missing), // run never reads them
	} {
		if _, err := Parse([]byte(base+"[admin]\n"+admin+"\n"), "f.toml"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A secret written inline in a configuration every user can read is
// accepted (refusing it would stop a fleet on upgrade) but Load warns of
// it, naming each key; a file kept from other users, or a configuration
// without inline secrets, gets no warning.
func TestInlineSecretInReadableFileWarns(t *testing.T) {
	const tok = "0123456789abcdef0123"
	own := strings.Replace(base, "000102030405060708090a0b0c0d0e0f", "5be1c3e6a07f42d9b81c0e2f6a4d3917", 1) // not a published key: no warning of its own
	withSecrets := own + "[admin]\ntoken = \"" + tok + "\"\n" + bgpSection + "password = \"md5-key\"\n"
	for _, tc := range []struct {
		name string
		src  string
		perm os.FileMode
		want []string // the keys warned of, in order
	}{
		{"world-readable with secrets", withSecrets, 0o644, []string{"admin.token", "bgp.neighbor[0].password"}},
		{"group-readable with secrets", withSecrets, 0o640, nil},
		{"private with secrets", withSecrets, 0o600, nil},
		{"world-readable without secrets", own + bgpSection, 0o644, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "fulcrum.toml")
			if err := os.WriteFile(p, []byte(tc.src), tc.perm); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.perm); err != nil { // past the umask
				t.Fatal(err)
			}
			c, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Warnings) != len(tc.want) {
				t.Fatalf("warnings %q, want one for each of %q", c.Warnings, tc.want)
			}
			for i, key := range tc.want {
				if w := c.Warnings[i]; !strings.HasPrefix(w, key+" is written in "+p+",") || strings.Contains(w, tok) || strings.Contains(w, "md5-key") {
					t.Errorf("warning %d = %q: does not name %s and the file, or shows the secret", i, w, key)
				}
			}
		})
	}
}
