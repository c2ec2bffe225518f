package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/config"
)

// README "Admin API and fulcrumctl": "capture -w FILE makes the file mode
// 0600 (it holds the clients' payloads)". A capture written over an
// existing regular file (last week's capture, made 0644 by another tool
// or an older fulcrumctl) must not leave the clients' payloads readable
// by every user of the host.
func TestCaptureOverExistingFileIs0600(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	file := filepath.Join(t.TempDir(), "web.pcapng")
	if err := os.WriteFile(file, []byte("old capture"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := ctl("--addr", addr, "capture", "--vip", "web", "--duration", "1s", "-w", file)
	if code != 0 {
		t.Fatalf("capture: exit %d, %q %q", code, out, errs)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("capture written over an existing file: mode %04o, want 0600 (every user of the host may read the clients' payloads)", perm)
	}
}
