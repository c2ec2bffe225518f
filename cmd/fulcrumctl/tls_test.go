package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
)

// A daemon configured for the network (token on every call, TLS), bound
// for the test on loopback: fulcrumctl reaches it with --ca and --token.
func TestTLSAndTokenOffLoopback(t *testing.T) {
	const token = "0123456789abcdef-ctl"
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_ADDR", "")
	t.Setenv("FULCRUM_CA", "")
	dir := t.TempDir()
	certFile, keyFile, _ := admintest.SelfSigned(t, dir)
	p := admintest.New(t, admintest.Config)
	srv := admin.New(p.Plane, config.Admin{Listen: "192.0.2.10:9180", Token: token, TLSCert: certFile, TLSKey: keyFile}, p.File, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := ln.Addr().String()
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)

	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--addr", addr, "--ca", certFile, "--token", token, "status"}, 0, ""},
		{[]string{"--addr", "https://" + addr, "--ca", certFile, "--token", token, "vips"}, 0, ""},
		{[]string{"--addr", addr, "--insecure", "--token", token, "table", "web"}, 0, ""},
		{[]string{"--addr", addr, "--ca", certFile, "status"}, 1, "HTTP 401"},
		{[]string{"--addr", addr, "--ca", certFile, "--token", "wrong-0123456789abcdef", "status"}, 1, "HTTP 401"},
		{[]string{"--addr", addr, "--token", token, "status"}, 1, "speaks TLS"},
		{[]string{"--addr", "https://" + addr, "--token", token, "status"}, 1, "certificate"},
		{[]string{"--addr", addr, "--ca", filepath.Join(dir, "nope.pem"), "status"}, 2, "--ca " + filepath.Join(dir, "nope.pem")},
		{[]string{"--addr", addr, "--ca", notPEM, "status"}, 2, "--ca " + notPEM + ": no PEM certificate"},
		{[]string{"--addr", "http://" + addr, "--ca", certFile, "status"}, 2, "need an https://"},
	} {
		code, _, errs := ctl(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.err) {
			t.Errorf("fulcrumctl %q: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, errs, tc.code, tc.err)
		}
	}

	// The environment carries the token and the CA.
	t.Setenv("FULCRUM_TOKEN", token)
	t.Setenv("FULCRUM_CA", certFile)
	out := mustRun(t, "--addr", addr, "--json", "status")
	var st api.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.VIPs != 2 {
		t.Errorf("status over TLS with the token from the environment: %v, %d VIPs", err, st.VIPs)
	}
	mustRun(t, "--addr", addr, "drain", "web", "be1")
	if !drained(p, "web", "be1") {
		t.Error("drain over TLS did not take effect")
	}
}

func drained(p *admintest.Plane, vip, backend string) bool {
	for _, v := range p.Plane.Status(false).VIPs {
		if v.Name != vip {
			continue
		}
		for _, b := range v.Backends {
			if b.Name == backend {
				return b.Drained
			}
		}
	}
	return false
}
