package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func recv(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	abstract := fmt.Sprintf("fulcrum-sdnotify-test-%d", os.Getpid())
	for _, tc := range []struct{ env, listen string }{
		{path, path},
		{"@" + abstract, "\x00" + abstract},
	} {
		c := listen(t, tc.listen)
		t.Setenv("NOTIFY_SOCKET", tc.env)
		for _, state := range []string{Ready, Reloading, Stopping, "STATUS=forwarding 2 VIPs\nREADY=1"} {
			sent, err := Notify(state)
			if !sent || err != nil {
				t.Fatalf("NOTIFY_SOCKET=%q: Notify(%q) = %v, %v", tc.env, state, sent, err)
			}
			if got := recv(t, c); got != state {
				t.Errorf("NOTIFY_SOCKET=%q: got %q, want %q", tc.env, got, state)
			}
		}
	}
}

func TestNotifyOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify(Ready); sent || err != nil {
		t.Errorf("without NOTIFY_SOCKET: %v, %v; want false, nil", sent, err)
	}
}

func TestNotifyErrors(t *testing.T) {
	for _, env := range []string{"relative/sock", filepath.Join(t.TempDir(), "nobody-listens")} {
		t.Setenv("NOTIFY_SOCKET", env)
		if sent, err := Notify(Ready); sent || err == nil {
			t.Errorf("NOTIFY_SOCKET=%q: %v, %v; want an error", env, sent, err)
		}
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"90000000", "", 90 * time.Second},
		{"90000000", self, 90 * time.Second},
		{"90000000", "1", 0}, // another process's
		{"0", "", 0},
		{"-5", "", 0},
		{"abc", "", 0},
		{"99999999999999999999", "", 0},
	} {
		t.Setenv("WATCHDOG_USEC", c.usec)
		t.Setenv("WATCHDOG_PID", c.pid)
		if got := WatchdogInterval(); got != c.want {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %v, want %v", c.usec, c.pid, got, c.want)
		}
	}
}
