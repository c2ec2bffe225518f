package admin_test

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/config"
)

// lineCounter is a log sink that counts records (one JSON line each) and
// bytes, and keeps nothing.
type lineCounter struct {
	mu           sync.Mutex
	lines, bytes int
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines += bytes.Count(p, []byte{'\n'})
	c.bytes += len(p)
	return len(p), nil
}

func (c *lineCounter) get() (lines, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines, c.bytes
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestProbeLogVolumeRefusedCalls: an outsider without the token, on a
// network listener, sends N requests with a wrong token and a long path
// (also: a cross-origin POST on loopback, a bad Host). Each is refused;
// the log must not grow by a record (with the path twice in it) per
// request: a flood of refusals would fill the disk and bury the signal.
func TestProbeLogVolumeRefusedCalls(t *testing.T) {
	const n = 5000
	p := admintest.New(t, admintest.Config)
	var sink lineCounter
	srv := admin.New(p.Plane, config.Admin{Listen: "192.0.2.10:9180", Token: "0123456789abcdef-admin", MaxConns: 64}, "",
		slog.New(slog.NewJSONHandler(&sink, nil)))
	h := srv.Handler()
	long := "/" + strings.Repeat("a", 8<<10)
	heap0 := heapInUse()
	start := time.Now()
	for i := 0; i < n; i++ {
		r := httptest.NewRequest("GET", long, nil)
		r.Header.Set("Authorization", "Bearer wrong-token-0123456789")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	elapsed := time.Since(start)
	heap1 := heapInUse()
	lines, size := sink.get()
	t.Logf("%d refused requests (8 KiB path, bad token) in %v: %d log records, %d bytes (%.0f B/request); heap %+d B",
		n, elapsed.Round(time.Millisecond), lines, size, float64(size)/n, int64(heap1)-int64(heap0))
	// A cap of a few records a second, plus one summary per window.
	if limit := 20 * (int(elapsed/time.Second) + 1); lines > limit {
		t.Errorf("%d refused requests in %v left %d log records (%d bytes); want at most %d: failed calls are logged without a rate limit",
			n, elapsed.Round(time.Millisecond), lines, size, limit)
	}
	if d := int64(heap1) - int64(heap0); d > 1<<20 {
		t.Errorf("heap grew %d B over %d refused requests", d, n)
	}

	// Loopback listener: a cross-origin POST is refused before the token.
	var sink2 lineCounter
	srv2 := admin.New(p.Plane, config.Admin{Listen: "127.0.0.1:0", MaxConns: 64}, "", slog.New(slog.NewJSONHandler(&sink2, nil)))
	h2 := srv2.Handler()
	start = time.Now()
	for i := 0; i < n; i++ {
		r := httptest.NewRequest("POST", api.ReloadPath, nil)
		r.Host = "127.0.0.1"
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.Header.Set("Origin", "http://evil.example")
		h2.ServeHTTP(httptest.NewRecorder(), r)
	}
	elapsed = time.Since(start)
	lines, size = sink2.get()
	t.Logf("%d cross-origin POSTs on loopback in %v: %d log records, %d bytes", n, elapsed.Round(time.Millisecond), lines, size)
	if limit := 20 * (int(elapsed/time.Second) + 1); lines > limit {
		t.Errorf("%d cross-origin POSTs left %d log records; want at most %d", n, lines, limit)
	}
}

// TestProbeLogVolumeTLSGarbage: N connections to a TLS admin listener
// that send a non-TLS byte and close. net/http logs "TLS handshake error"
// through the server's ErrorLog once per connection.
func TestProbeLogVolumeTLSGarbage(t *testing.T) {
	const n = 300
	certFile, keyFile, _ := admintest.SelfSigned(t, t.TempDir())
	p := admintest.New(t, admintest.Config)
	var sink lineCounter
	srv := admin.New(p.Plane, config.Admin{Listen: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile, MaxConns: 64}, "",
		slog.New(slog.NewJSONHandler(&sink, nil)))
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	addr := ln.Addr().String()
	waitFor(t, "the listening record", 5*time.Second, func() bool { l, _ := sink.get(); return l >= 1 })
	base, _ := sink.get()
	g0 := runtime.NumGoroutine()
	start := time.Now()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06})
		c.Close()
		if i%32 == 31 { // keep under max_conns
			waitFor(t, "connections closed", 10*time.Second, func() bool { return srv.Conns().Open == 0 })
		}
	}
	waitFor(t, "connections closed", 10*time.Second, func() bool { return srv.Conns().Open == 0 })
	elapsed := time.Since(start)
	lines, size := sink.get()
	lines -= base
	t.Logf("%d garbage TLS connections in %v: %d log records, %d bytes; refused at accept %d; goroutines %d -> %d",
		n, elapsed.Round(time.Millisecond), lines, size, srv.Conns().Refused, g0, runtime.NumGoroutine())
	if limit := 20 * (int(elapsed/time.Second) + 1); lines > limit {
		t.Errorf("%d garbage TLS handshakes left %d log records; want at most %d: handshake errors are logged per connection", n, lines, limit)
	}
	// And a real client still gets in.
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestProbeLogVolumeConnFlood: beyond max_conns every connection is
// closed at accept; the refusal warning is rate-limited (one per 10 s).
func TestProbeLogVolumeConnFlood(t *testing.T) {
	const max, n = 2, 500
	p := admintest.New(t, admintest.Config)
	var sink lineCounter
	srv := admin.New(p.Plane, config.Admin{Listen: "127.0.0.1:0", MaxConns: max}, "", slog.New(slog.NewJSONHandler(&sink, nil)))
	srv.SetTimeouts(30*time.Second, 30*time.Second, 30*time.Second, 30*time.Second)
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, srv, ln)
	addr := ln.Addr().String()
	waitFor(t, "the listening record", 5*time.Second, func() bool { l, _ := sink.get(); return l >= 1 })
	var held []net.Conn
	for i := 0; i < max; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	waitFor(t, "slots taken", 5*time.Second, func() bool { return srv.Conns().Open == max })
	base, _ := sink.get()
	g0 := runtime.NumGoroutine()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	waitFor(t, "refusals counted", 10*time.Second, func() bool { return srv.Conns().Refused >= n })
	lines, size := sink.get()
	t.Logf("%d connections over max_conns: %d log records, %d bytes; goroutines %d -> %d",
		n, lines-base, size, g0, runtime.NumGoroutine())
	if lines-base > 2 {
		t.Errorf("%d refused connections left %d log records", n, lines-base)
	}
}
