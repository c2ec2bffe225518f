package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// -listen or -health with port 0 served on a port the kernel picked (and
// a SIGUSR2 reopened the service on yet another), logging "serving" with
// the :0 it was given: the VIP's port never answered. Refused (exit 2,
// naming the flag) before anything listens.
func TestPortZeroRefused(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fulcrum-labsrv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"-name", "be1", "-listen", "127.0.0.1:0"}, "-listen"},
		{[]string{"-name", "be1", "-listen", "127.0.0.1:65536"}, "-listen"},
		{[]string{"-name", "be1", "-listen", "127.0.0.1:18080", "-health", "127.0.0.1:0"}, "-health"},
	} {
		cmd := exec.Command(bin, tc.args...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second): // a bound, not a measurement: a refusal is immediate
			cmd.Process.Kill()
			<-done
			t.Errorf("%q: still serving after 30 s; want exit 2 naming %s", tc.args, tc.flag)
			continue
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(errb.String(), tc.flag) {
			t.Errorf("%q: %v, stderr %q; want exit 2 naming %s", tc.args, err, errb.String(), tc.flag)
		}
	}
}
