package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/config"
)

// The --token line of the help names exactly the commands that a local
// listener with a token refuses without it. It once said "drain, undrain,
// weight and reload": flush and capture need the token too.
func TestHelpNamesTheCommandsThatNeedTheToken(t *testing.T) {
	t.Setenv("FULCRUM_ADDR", "")
	t.Setenv("FULCRUM_TOKEN", "")
	dir, err := os.MkdirTemp("", "fulcrumctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "unix:" + filepath.Join(dir, "admin.sock"), Token: "0123456789abcdef-help"})

	calls := map[string][]string{
		"status":   {"status"},
		"vips":     {"vips"},
		"backends": {"backends", "web"},
		"drain":    {"drain", "web", "be1"},
		"undrain":  {"undrain", "web", "be1"},
		"weight":   {"weight", "web", "be1", "2"},
		"lookup":   {"lookup", "198.51.100.10", "203.0.113.7", "40000", "80", "tcp"},
		"table":    {"table", "web"},
		"reload":   {"reload"},
		"show":     {"show"},
		"conns":    {"conns"},
		"flush":    {"flush", "--backend", "be1", "--vip", "web"},
		"capture":  {"capture", "--count", "1", "--duration", "1s", "-w", filepath.Join(dir, "c.pcapng")},
	}
	var refused []string
	for name, args := range calls {
		if _, ok := commands[name]; !ok {
			t.Fatalf("no command %q", name)
		}
		code, _, errs := ctl(append([]string{"--addr", addr, "--timeout", "5s"}, args...)...)
		if code != exitOK && strings.Contains(errs, "401") {
			refused = append(refused, name)
		} else if code != exitOK {
			t.Errorf("%s without the token: exit %d, not a 401: %s", name, code, errs)
		}
	}
	if len(calls) != len(commands) {
		t.Errorf("the test calls %d commands, fulcrumctl has %d", len(calls), len(commands))
	}

	m := regexp.MustCompile(`(?s)--token TOKEN(.*?)need it`).FindStringSubmatch(usage)
	if m == nil {
		t.Fatalf("no --token ... need it in the usage:\n%s", usage)
	}
	var listed []string
	for name := range commands {
		if regexp.MustCompile(`\b` + name + `\b`).MatchString(m[1]) {
			listed = append(listed, name)
		}
	}
	sort.Strings(refused)
	sort.Strings(listed)
	if strings.Join(listed, " ") != strings.Join(refused, " ") {
		t.Errorf("the help's --token line names %v; the commands refused without the token are %v", listed, refused)
	}
}
