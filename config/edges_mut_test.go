package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/health"
)

// Found by a mutation audit (no other test pinned it down): a
// [dataplane.punt] health written exactly at what the configured checks
// need is enough, and is kept; one below is refused. (TestPuntHealthSizedByChecks
// tries need+1 and far below, so "<" for "<=" survived.)
func TestEdgePuntHealthExactlyTheNeed(t *testing.T) {
	parse := func(punt string) (*config.Config, error) {
		b := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
			VIP("web", "203.0.113.7", 80).Sub("[vip.health]", `kind = "http"`, `interval = "100ms"`, `timeout = "50ms"`)
		for i := range 500 {
			b.Backend(fmt.Sprintf("b%d", i), fmt.Sprintf("10.0.%d.%d", 1+i/250, 1+i%250))
		}
		toml := b.String()
		if punt != "" {
			toml += "\n[dataplane.punt]\n" + punt + "\n"
		}
		return config.Parse([]byte(toml), "punt.toml")
	}
	need := 2 * 500 * health.AnswersPerCheck(health.KindHTTP) * 10
	c, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dataplane.Punt.Health != need {
		t.Fatalf("health left out: %d, want %d", c.Dataplane.Punt.Health, need)
	}
	if c, err := parse(fmt.Sprintf("health = %d", need)); err != nil || c.Dataplane.Punt.Health != need {
		t.Errorf("health = %d, exactly the need: err %v; want accepted and kept", need, err)
	}
	if _, err := parse(fmt.Sprintf("health = %d", need-1)); err == nil {
		t.Errorf("health = %d, one below the need: accepted; want refused", need-1)
	}
}

// Found by a mutation audit: rx_desc, tx_desc and mempool_size accept
// config.MinDesc itself (the bound is inclusive, as the error text
// "outside 64..N" says); one less is refused.
func TestEdgeDescriptorsAtMinimum(t *testing.T) {
	for _, key := range []string{"rx_desc", "tx_desc", "mempool_size"} {
		parse := func(n int) (*config.Config, error) {
			toml := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, fmt.Sprintf("%s = %d", key, n)).Web(1).String()
			return config.Parse([]byte(toml), "desc.toml")
		}
		if _, err := parse(config.MinDesc); err != nil {
			t.Errorf("%s = %d (MinDesc): %v; want accepted", key, config.MinDesc, err)
		}
		if _, err := parse(config.MinDesc - 1); err == nil {
			t.Errorf("%s = %d: accepted; want refused", key, config.MinDesc-1)
		}
	}
}

// adminWith parses a small configuration with the given [admin] keys.
func adminWith(t *testing.T, keys ...string) (*config.Config, error) {
	t.Helper()
	src := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("admin", keys...).Web(2).String()
	return config.Parse([]byte(src), "f.toml")
}

// edgeTokenFile writes content to a mode-0600 file and returns its path.
func edgeTokenFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Found by a mutation audit (no test held a token
// with a control character that is not a blank, one whose characters are
// multi-byte, or one that is not UTF-8). Each is refused at load:
//   - a control character (U+0001) cannot travel in an Authorization
//     header (net/http's client refuses to send it), so the daemon would
//     start with a token no client can present;
//   - the 16-character floor counts characters: 15 "é" are 30 bytes but
//     15 characters of a guessable alphabet;
//   - a token_file that is not UTF-8.
func TestEdgeAdminTokenCharacterRules(t *testing.T) {
	const good = "0123456789abcdef"
	for _, tc := range []struct {
		name string
		key  string
	}{
		{"control character", `token = "` + good + `\u0001"`},
		{"DEL", `token = "` + good + `\u007f"`},
		{"15 two-byte characters", `token = "` + strings.Repeat("é", 15) + `"`},
		{"not UTF-8 in token_file", `token_file = "` + edgeTokenFile(t, good+"\xff\xfe\n") + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := adminWith(t, tc.key)
			if err == nil {
				t.Fatalf("accepted: Secret() = %q (%d bytes)", c.Admin.Secret(), len(c.Admin.Secret()))
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
		})
	}
	// 16 two-byte characters are 16 characters: accepted.
	c, err := adminWith(t, `token = "`+strings.Repeat("é", 16)+`"`)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Admin.Secret(); got != strings.Repeat("é", 16) {
		t.Fatalf("Secret() = %q", got)
	}
}

// Found by a mutation audit: token_file's first line
// may be as long as the 4 KiB read, with or without its newline; one byte
// more without a newline is refused (cut there it would be refused on
// every call). A token of exactly 4096 bytes followed by "\n" was
// refused when the check ran whatever ended the read.
func TestEdgeAdminTokenFileAtReadLimit(t *testing.T) {
	tok := strings.Repeat("a", 4096)
	for _, content := range []string{tok, tok + "\n", tok + "\nsecond line\n"} {
		c, err := adminWith(t, `token_file = "`+edgeTokenFile(t, content)+`"`)
		if err != nil {
			t.Fatalf("%d bytes: %v", len(content), err)
		}
		if got := c.Admin.Secret(); got != tok {
			t.Fatalf("%d bytes: Secret() is %d bytes, want 4096", len(content), len(got))
		}
	}
	if _, err := adminWith(t, `token_file = "`+edgeTokenFile(t, tok+"a")+`"`); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("a 4097-byte first line: err %v, want ErrInvalid", err)
	}
}

// Found by a mutation audit: an [admin] listen socket path
// holding a NUL byte is refused at load. Accepted, `fulcrum check` passed
// a configuration whose listener cannot be opened (the kernel's sun_path
// ends at the NUL), and the daemon failed at start or on the reload.
func TestEdgeAdminSocketPathNULRefused(t *testing.T) {
	_, err := adminWith(t, `listen = "unix:/run/fulcrum/a\u0000b.sock"`)
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
}
