package health

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// A health endpoint that answers the check's GET with 101 Switching
// Protocols (a WebSocket or other upgrade handler mounted on the health
// path, a broken or hostile backend) and then keeps the connection open.
// net/http hands a 101's connection over as the body and no longer
// watches the request's context, so the check's io.Copy of the body
// ignores the timeout and blocks for as long as the backend holds the
// connection: the checker stops checking (its verdict frozen, a dead
// backend kept up), and Manager.Set and Close, which wait for a stopped
// checker's goroutine, never return (package control calls Set from a
// reload with the plane's lock held).
func TestHTTPCheck101DoesNotHoldChecker(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	addr := rawHTTPServer(t, func(c *net.TCPConn, stop <-chan struct{}) {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		select {
		case <-stop:
		case <-release:
		}
	})
	m := NewManager(ManagerOptions{})
	t.Cleanup(m.Close)
	t.Cleanup(free) // runs first: lets a stuck check go before Close waits for it
	if err := m.Set(map[string]Target{"b": {Addr: addr, Config: fastConfig(KindHTTP)}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitFor)
	s, _ := m.Status("b")
	for s.Checks < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		s, _ = m.Status("b")
	}
	if s.Checks < 4 || s.State != Down {
		t.Errorf("after %v of checks every 50 ms (timeout 45 ms) against a 101 answer: %d checks completed, state %v (%q); want every check to end within its timeout, and the backend down",
			waitFor, s.Checks, s.State, s.LastError)
	}
	done := make(chan error, 1)
	go func() { done <- m.Set(nil) }() // a reload removes the backend
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitFor):
		t.Errorf("Set removing the backend has not returned after %v: it waits for a check stuck reading a 101's connection", waitFor)
		free()
		<-done
	}
}
