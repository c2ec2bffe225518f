package admin

import (
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
)

// pipeListener accepts n in-memory connections, then fails.
type pipeListener struct{ left int }

func (p *pipeListener) Accept() (net.Conn, error) {
	if p.left == 0 {
		return nil, net.ErrClosed
	}
	p.left--
	a, b := net.Pipe()
	b.Close()
	return a, nil
}
func (p *pipeListener) Close() error   { return nil }
func (p *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestLimitNeverCountsPastMax: with every slot held, a flood of refusals
// never shows more than max_conns open, not even for an instant (the
// count is what the admin API and the metric report). A watcher reads the
// count as fast as it can while 200,000 connections are refused.
func TestLimitNeverCountsPastMax(t *testing.T) {
	const maxConns = 4
	var st connStats
	l := &limitListener{Listener: &pipeListener{left: maxConns + 200_000}, max: maxConns, stats: &st, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var held []net.Conn
	for range maxConns {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	var stop atomic.Bool
	seen := make(chan int64)
	go func() {
		var hi int64
		for !stop.Load() {
			hi = max(hi, st.open.Load())
		}
		seen <- hi
	}()
	if _, err := l.Accept(); err != net.ErrClosed { // refuses the rest, then the listener is done
		t.Fatalf("Accept: %v, want the listener's end", err)
	}
	stop.Store(true)
	if hi := <-seen; hi > maxConns {
		t.Errorf("%d connections counted open at once, max_conns %d", hi, maxConns)
	}
	if got := st.refused.Load(); got != 200_000 {
		t.Errorf("refused %d, want 200000", got)
	}
	for _, c := range held {
		c.Close()
		c.Close() // a second close gives nothing back twice
	}
	if n := st.open.Load(); n != 0 {
		t.Errorf("open %d after every held connection closed, want 0", n)
	}
}
