package main

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/fulcrumlb/fulcrum/internal/syncbuf"

	"context"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/config"
)

// TestOperatorCommandsBadUsage: bad flags and arguments of show, conns,
// flush and capture exit 2 with a message naming the problem, print
// nothing on stdout, and never reach the daemon's capture.
func TestOperatorCommandsBadUsage(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_ADDR", "")
	p := admintest.New(t, admintest.Config)
	var log syncbuf.Buffer
	srv := admin.New(p.Plane, config.Admin{Listen: "127.0.0.1:0"}, p.File, slog.New(slog.NewJSONHandler(&log, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := ln.Addr().String()

	dir := t.TempDir()
	// Not a directory (root may write anywhere a mode allows).
	notDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.pcapng")
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--addr", addr, "show", "extra"}, 2, "usage"},
		{[]string{"--addr", addr, "conns", "web"}, 2, "usage"},
		{[]string{"--addr", addr, "conns", "--limit", "0"}, 2, "--limit"},
		{[]string{"--addr", addr, "conns", "--limit", "-5"}, 2, "--limit"},
		{[]string{"--addr", addr, "conns", "--limit", "many"}, 2, "limit"},
		{[]string{"--addr", addr, "conns", "--limit", "99999999999999999999999"}, 2, "limit"},
		{[]string{"--addr", addr, "conns", "--limit"}, 2, "limit"},
		{[]string{"--addr", addr, "conns", "--vip", "nope"}, 1, "nope"},
		{[]string{"--addr", addr, "conns", "--backend", "nope"}, 1, "nope"},
		{[]string{"--addr", addr, "flush"}, 2, "--backend"},
		{[]string{"--addr", addr, "flush", "--vip", "web"}, 2, "--backend"},
		{[]string{"--addr", addr, "flush", "be1"}, 2, "usage"},
		{[]string{"--addr", addr, "flush", "--backend", "nope"}, 1, "nope"},
		{[]string{"--addr", addr, "flush", "--vip", "web", "--backend", "ns1"}, 1, "ns1"},
		{[]string{"--addr", addr, "capture", "-w"}, 2, "-w"},
		{[]string{"--addr", addr, "capture", "--count", "-1", "-w", file}, 2, "--count"},
		{[]string{"--addr", addr, "capture", "--duration", "-1s", "-w", file}, 2, "--duration"},
		{[]string{"--addr", addr, "capture", "--duration", "soon", "-w", file}, 2, "duration"},
		{[]string{"--addr", addr, "capture", "--drops", "a", "b", "-w", file}, 2, "usage"},
		{[]string{"--addr", addr, "capture", "--drops", "bogus-reason", "-w", file}, 1, "bogus-reason"},
		{[]string{"--addr", addr, "capture", "--duration", "11m", "-w", file}, 1, "duration"},
		{[]string{"--addr", addr, "capture", "--vip", "nope", "-w", file}, 1, "nope"},
		{[]string{"--addr", addr, "capture", "--duration", "1m", "-w", filepath.Join(notDir, "c.pcapng")}, 1, "c.pcapng"},
		{[]string{"--addr", addr, "capture", "--duration", "1m", "-w", filepath.Join(dir, "no", "such", "dir", "c.pcapng")}, 1, "c.pcapng"},
		{[]string{"--addr", addr, "capture", "--duration", "1m", "-w", dir}, 1, dir},
	} {
		code, out, errs := ctl(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.err) {
			t.Errorf("fulcrumctl %q: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, errs, tc.code, tc.err)
		}
		if out != "" {
			t.Errorf("fulcrumctl %q wrote to stdout on error: %q", tc.args, out)
		}
	}
	// No capture was ever started (a refused one is logged as failed),
	// and a refused capture left no file behind.
	if strings.Contains(log.String(), `"status":200`) && strings.Contains(log.String(), `capture`) {
		for _, line := range strings.Split(log.String(), "\n") {
			if strings.Contains(line, `"path":"/api/v1/capture"`) && strings.Contains(line, `"status":200`) {
				t.Errorf("a capture ran: %s", line)
			}
		}
	}
	if _, err := os.Stat(file); err == nil {
		t.Errorf("a refused capture left %s behind", file)
	}
	if p.Worker.Capturing() {
		t.Error("a capture is installed")
	}
}

// TestReasonsPrintable: a check reason with an escape sequence, a tab
// and a newline (what a backend's answer could put there), a bidi
// override that would show the rest of the line reversed and a line
// separator reaches the terminal escaped, on its backend's one line.
func TestReasonsPrintable(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	const reason = "http: \x1b]0;pwned\x07\x1b[2J\tcol\nline\u0085\u202enwod\u2028"
	if err := p.SetHealth("dns", "ns1", false, reason); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"backends", "dns"}, {"show"}} {
		out := mustRun(t, append([]string{"--addr", addr}, args...)...)
		if i := strings.IndexFunc(out, func(r rune) bool {
			return r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp))
		}); i >= 0 {
			t.Errorf("%v: control character %q in the output: %q", args, []rune(out[i:])[0], out)
		}
		lines := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "ns1") {
				lines++
				if args[0] == "backends" && !strings.Contains(l, `http: \x1b]0;pwned\a\x1b[2J\tcol\nline\u0085\u202enwod\u2028`) {
					t.Errorf("%v: ns1's line lacks the escaped reason: %q", args, l)
				}
			}
		}
		if lines != 1 {
			t.Errorf("%v: ns1 on %d lines", args, lines)
		}
	}
}
