package config

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/internal/testtls"
)

// TestAdminFilesThatAreNoFile: token_file, tls_cert and tls_key are read
// by every Load, so by every reload (SIGHUP runs it on the daemon's main
// loop, where a SIGTERM waits behind it) and by `fulcrum check` in the
// unit's ExecStartPre. A FIFO named there by mistake must be refused at
// once, as Load refuses one named as the configuration itself
// (TestLoadRefusesWhatIsNoFile), never waited on. Before, token_file's
// open blocked until a writer came, and the TLS files were read until a
// writer closed (and /dev/zero, for ever).
func TestAdminFilesThatAreNoFile(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := testtls.SelfSigned(t, dir, "a")
	for _, tc := range []struct {
		name  string
		admin func(fifo string) string
	}{
		{"token_file", func(fifo string) string { return `token_file = "` + fifo + `"` }},
		{"tls_cert", func(fifo string) string { return `tls_cert = "` + fifo + `"` + "\n" + `tls_key = "` + key + `"` }},
		{"tls_key", func(fifo string) string { return `tls_cert = "` + cert + `"` + "\n" + `tls_key = "` + fifo + `"` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			// A writer that stays, as a forgotten `cat > fifo` would: a
			// read of the FIFO then waits for data, not for the open.
			var w *os.File
			if tc.name != "token_file" {
				var err error
				if w, err = os.OpenFile(fifo, os.O_RDWR, 0); err != nil {
					t.Fatal(err)
				}
				defer w.Close()
			}
			done := make(chan error, 1)
			go func() {
				_, err := Parse([]byte(base+"\n[admin]\n"+tc.admin(fifo)+"\n"), "f.toml")
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("a FIFO as %s accepted", tc.name)
				}
			case <-time.After(10 * time.Second):
				// Let the reader go: a writer that opens and leaves.
				if w == nil {
					if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
						f.Close()
					}
				} else {
					w.Close()
					w = nil
				}
				<-done
				t.Errorf("Load still reading %s, a FIFO, after 10 s: a reload would hang the daemon's main loop", tc.name)
			}
		})
	}
}
