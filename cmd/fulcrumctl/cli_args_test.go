package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
)

// failingStdout fails every write, as a closed stdout (fulcrumctl status
// >&-) or a full disk (fulcrumctl vips > /full/file) does.
type failingStdout struct{}

func (failingStdout) Write([]byte) (int, error) {
	return 0, errors.New("write /dev/stdout: no space left on device")
}

// A read command whose table cannot be written exits non-zero, as the
// same command with --json already does: before, the tables' write
// errors were dropped and fulcrumctl exited 0 having printed nothing, so
// a script saving "fulcrumctl vips > f" kept an empty file as a success.
func TestHumanOutputWriteErrorIsAnError(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config)
	for _, c := range [][]string{
		{"status"}, {"vips"}, {"backends", "web"}, {"show"}, {"table", "web"},
		{"lookup", "198.51.100.10", "203.0.113.7", "40000", "80"}, {"conns"},
	} {
		for _, js := range []bool{false, true} {
			args := with(base, c...)
			if js {
				args = append(args, "--json")
			}
			var errb strings.Builder
			code := run(args, failingStdout{}, &errb)
			if code != exitAPI {
				t.Errorf("fulcrumctl %s (json %v) with stdout failing: exit %d, want %d; stderr %q", c[0], js, code, exitAPI, errb.String())
			}
		}
	}
}

// FULCRUM_CA exported for the fleet's TLS daemons (README: --ca /
// FULCRUM_CA) is a default, and an explicit unix: or http:// --addr, which
// speak no TLS, must win over it: "fulcrumctl --addr unix:/run/f.sock
// status" was refused (exit 2) with "--ca and --insecure need an https://
// or host:port address", naming a flag the operator never gave.
func TestEnvCADoesNotRefuseAnExplicitUnixAddr(t *testing.T) {
	_, base := probeDaemon(t, admintest.Config) // base[1] is unix:/path
	t.Setenv("FULCRUM_CA", "/etc/fulcrum/admin-ca.crt")
	code, out, errs := ctl(with(base, "status")...)
	if code != exitOK || out == "" {
		t.Errorf("FULCRUM_CA set, --addr %s status: exit %d, stderr %q; want the status (exit 0)", base[1], code, errs)
	}
	// An explicit --ca with a unix: address is still a contradiction.
	code, _, errs = ctl(with(base, "--ca", "/etc/fulcrum/admin-ca.crt", "status")...)
	if code != exitUsage || !strings.Contains(errs, "--ca") {
		t.Errorf("--ca with --addr %s: exit %d, stderr %q; want exit 2 naming --ca", base[1], code, errs)
	}
}
