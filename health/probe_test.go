package health

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawHTTPServer answers every connection on loopback with respond, after
// reading the request head: for responses net/http's server cannot be made
// to send. respond must return once stop is closed; the server stops when
// the test ends.
func rawHTTPServer(t *testing.T, respond func(c *net.TCPConn, stop <-chan struct{})) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(waitFor))
				br := bufio.NewReader(c)
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if l == "\r\n" {
						break
					}
				}
				respond(c.(*net.TCPConn), stop)
			}()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		ln.Close()
		wg.Wait()
	})
	return netip.MustParseAddrPort(ln.Addr().String())
}

// checkOnce runs one check of cfg against addr as a Checker does (the
// prober under the timeout) and returns its error and duration.
func checkOnce(t *testing.T, cfg Config, addr netip.AddrPort) (error, time.Duration) {
	t.Helper()
	c, err := NewChecker("b", Target{Addr: addr, Config: cfg}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = probeOnce(context.Background(), c.prober, c.addr, cfg.Timeout)
	return err, time.Since(start)
}

// An HTTP check passes only if the response arrives whole: a body cut short
// by the end of the connection or a reset fails the check (ErrRequest),
// one that stalls until the deadline fails it as a timeout, whatever the
// status said. Found by a probe: all three passed, the body's read error
// ignored. A body longer than the check reads (maxBody) still passes, and a
// status that does not pass is still reported as such.
func TestHTTPCheckBrokenBody(t *testing.T) {
	const head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npartial"
	for _, tc := range []struct {
		name    string
		respond func(c *net.TCPConn, stop <-chan struct{})
		want    error // nil: the check passes
	}{
		{"eof before content-length", func(c *net.TCPConn, _ <-chan struct{}) {
			io.WriteString(c, head)
		}, ErrRequest},
		{"reset mid-body", func(c *net.TCPConn, _ <-chan struct{}) {
			io.WriteString(c, head)
			time.Sleep(20 * time.Millisecond) // let the headers go first
			c.SetLinger(0)                    // the close sends a RST
		}, ErrRequest},
		{"chunked, eof before the last chunk", func(c *net.TCPConn, _ <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n")
		}, ErrRequest},
		{"stall mid-body", func(c *net.TCPConn, stop <-chan struct{}) {
			io.WriteString(c, head)
			select {
			case <-stop:
			case <-time.After(waitFor):
			}
		}, ErrTimeout},
		{"status 503, eof mid-body", func(c *net.TCPConn, _ <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 503 Unavailable\r\nContent-Length: 100000\r\n\r\npartial")
		}, ErrStatus},
		{"body beyond the read limit", func(c *net.TCPConn, _ <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n") // no length: until close
			chunk := strings.Repeat("x", 16<<10)
			for range 2 * maxBody / len(chunk) {
				if _, err := io.WriteString(c, chunk); err != nil {
					return // the check stopped reading and closed
				}
			}
		}, nil},
		{"whole body", func(c *net.TCPConn, _ <-chan struct{}) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fastConfig(KindHTTP)
			cfg.Interval, cfg.Timeout = time.Second, 300*time.Millisecond
			err, took := checkOnce(t, cfg, rawHTTPServer(t, tc.respond))
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("check failed: %v", err)
			case tc.want == nil:
			case !errors.Is(err, tc.want):
				t.Fatalf("err %v after %v, want %v", err, took, tc.want)
			case tc.want == ErrRequest && !strings.Contains(err.Error(), "body"):
				t.Fatalf("err %q does not say the body failed", err)
			}
			if took > cfg.Timeout+time.Second {
				t.Fatalf("the check took %v, timeout %v", took, cfg.Timeout)
			}
		})
	}
}
