package admin_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/config"
)

// TestListenLeavesBusySocket: admin.listen names a unix socket that
// another program serves (a careless copy of another daemon's path, or a
// second Fulcrum with its own file prefix), and that program is busy: its
// accept queue is full. Listen must refuse and leave the socket where it
// is. removeStaleSocket took the failed probe connection (EAGAIN: a unix
// socket's connect fails at once on a full queue) for "nothing listens",
// unlinked the other program's socket and listened in its place: every
// later client of that program reached Fulcrum's admin API instead.
func TestListenLeavesBusySocket(t *testing.T) {
	p := admintest.New(t, admintest.Config)
	dir := t.TempDir()
	path := filepath.Join(dir, "other.sock")
	// The other program: listening with a backlog of 1, not accepting.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Its clients fill the queue.
	full := false
	for range 16 {
		c, err := net.Dial("unix", path)
		if err != nil {
			if !strings.Contains(err.Error(), "resource temporarily unavailable") {
				t.Fatalf("harness: dial: %v", err)
			}
			full = true
			break
		}
		t.Cleanup(func() { c.Close() })
	}
	if !full {
		t.Fatal("harness: the other program's accept queue never filled")
	}
	srv := admin.New(p.Plane, config.Admin{Listen: "unix:" + path}, "", nil)
	ln, err := srv.Listen()
	if err == nil {
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		t.Errorf("Listen on a socket another program serves (its queue full): took it over, want a refusal")
	}
	after, err := os.Stat(path)
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("the other program's socket %s was replaced or removed (stat: %v)", path, err)
	}
}
