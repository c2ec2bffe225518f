// Command fulcrum-conncheck holds N long-lived TCP connections to a VIP and
// exchanges an HTTP/1.1 keep-alive request on each every interval,
// recording which backend answered (X-Backend) and every connection that
// breaks. It is the lab's witness for "0 established connections broken":
// a flow that an LB failure or a table change moves to another backend
// breaks (the new backend has no such connection), so breaks count moves.
//
//	fulcrum-conncheck -target 203.0.113.7:80 -n 200 -interval 100ms -duration 20s
//
// At the end (or on SIGINT/SIGTERM) it prints a JSON report on stdout.
// With -report FILE it also rewrites FILE with the report every second, so
// a test can read progress while it runs: once a disturbance is over, a
// report with "stalled": 0 says every connection that is still open has
// exchanged again since, so the test can stop the checker there instead of
// sleeping for a guessed time.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Report is the checker's result.
type Report struct {
	Target      string         `json:"target"`
	Connections int            `json:"connections"` // opened successfully
	DialErrors  int            `json:"dial_errors"`
	Exchanges   uint64         `json:"exchanges"` // request/response pairs that succeeded
	Broken      []Break        `json:"broken"`    // connections that failed after opening
	Switched    int            `json:"switched"`  // connections answered by a different backend than at first
	PerBackend  map[string]int `json:"per_backend"`
	Alive       int            `json:"alive"` // connections still working at the end
	// Stalled counts the connections still open whose last successful
	// exchange is older than stallAfter (a lost path that TCP is still
	// retransmitting into; it breaks only after -timeout).
	Stalled int `json:"stalled"`
	// LongestStallMS is the longest time, in milliseconds, that any
	// connection went without a successful exchange (counting an open
	// connection's current wait); LongestStallConn is that connection.
	// It shows how long a disturbance held traffic up even when nothing
	// broke, and which connection to look for in a capture.
	LongestStallMS   int64  `json:"longest_stall_ms"`
	LongestStallConn int    `json:"longest_stall_conn"`
	Elapsed          string `json:"elapsed"`
}

// Break is one broken connection.
type Break struct {
	Conn    int    `json:"conn"`
	Backend string `json:"backend"`
	After   string `json:"after"` // since the start
	Err     string `json:"err"`
}

// stallAfter is how old a connection's last successful exchange may be
// before it counts as stalled: ten exchanges at the default interval.
const stallAfter = time.Second

// stopGrace is how long an exchange in flight when the checker stops may
// still take and count its connection alive: a few of TCP's first
// retransmissions, and room for a loaded machine (two busy-polling LBs on
// two CPUs) to schedule 200 goroutines at once.
const stopGrace = 3 * time.Second

type checker struct {
	mu    sync.Mutex
	start time.Time
	rep   Report
	last  map[int]time.Time // open connections: last successful exchange
	// stall is how old a last exchange may be before its connection counts
	// as stalled: stallAfter, or two intervals when -interval is longer
	// (a connection that answers every exchange is not stalled between two).
	stall time.Duration
}

// noteGap records that connection id went gap without a successful
// exchange, if that is the longest yet.
func (r *Report) noteGap(id int, gap time.Duration) {
	if ms := gap.Milliseconds(); ms > r.LongestStallMS {
		r.LongestStallMS, r.LongestStallConn = ms, id
	}
}

// noteGap records connection id's time since its last successful
// exchange (or its opening) at now. c.mu is held.
func (c *checker) noteGap(id int, now time.Time) { c.rep.noteGap(id, now.Sub(c.last[id])) }

func (c *checker) snapshot() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rep
	r.Broken = append([]Break(nil), c.rep.Broken...)
	sort.Slice(r.Broken, func(i, j int) bool { return r.Broken[i].Conn < r.Broken[j].Conn })
	r.PerBackend = map[string]int{}
	for k, v := range c.rep.PerBackend {
		r.PerBackend[k] = v
	}
	now := time.Now()
	for id, at := range c.last {
		gap := now.Sub(at)
		if gap > c.stall {
			r.Stalled++
		}
		r.noteGap(id, gap) // an open connection's current wait counts too
	}
	r.Elapsed = time.Since(c.start).Round(time.Millisecond).String()
	return r
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fulcrum-conncheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "", "VIP:port (required)")
	n := fs.Int("n", 200, "connections to hold")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between exchanges on a connection")
	duration := fs.Duration("duration", 10*time.Second, "how long to run")
	timeout := fs.Duration("timeout", 2*time.Second, "an exchange slower than this breaks the connection")
	reportFile := fs.String("report", "", "rewrite this file with the JSON report every second")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		// flag stops at the first argument: what follows it (-n 5) would
		// be dropped with it.
		fmt.Fprintf(stderr, "fulcrum-conncheck: unexpected argument %q: the checker takes only flags (-target ADDR:PORT)\n", fs.Arg(0))
		return 2
	}
	if *target == "" || *n < 1 || *n > 100000 || *interval <= 0 || *duration <= 0 || *timeout <= 0 {
		fmt.Fprintln(stderr, "fulcrum-conncheck: -target is required; -n 1..100000; -interval, -duration and -timeout positive")
		return 2
	}
	_, port, err := net.SplitHostPort(*target)
	if err != nil {
		fmt.Fprintf(stderr, "fulcrum-conncheck: -target %q: %v\n", *target, err)
		return 2
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		fmt.Fprintf(stderr, "fulcrum-conncheck: -target %q: port %q: not a number in 1..65535\n", *target, port)
		return 2
	}
	if *reportFile != "" {
		if err := checkReportPath(*reportFile); err != nil {
			fmt.Fprintf(stderr, "fulcrum-conncheck: -report %s: %v\n", *reportFile, err)
			return 2
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := &checker{start: time.Now(), rep: Report{Target: *target, PerBackend: map[string]int{}}, last: map[int]time.Time{}, stall: max(stallAfter, 2**interval)}
	var wg sync.WaitGroup
	for i := 0; i < *n && ctx.Err() == nil; i++ { // none tried once stopping
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.hold(ctx, i, *target, *interval, *timeout)
		}()
		time.Sleep(time.Millisecond) // spread the SYNs
	}
	if *reportFile != "" {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					writeReport(*reportFile, c.snapshot())
				}
			}
		}()
	}
	wg.Wait()
	r := c.snapshot()
	if *reportFile != "" {
		writeReport(*reportFile, r)
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Fprintln(stdout, string(out))
	return 0
}

// checkReportPath reports why writeReport could not write path: its
// rewrite goes through path.tmp and a rename.
func checkReportPath(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return errors.New("is a directory")
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644) // as writeReport writes it
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(tmp)
}

func writeReport(path string, r Report) {
	b, _ := json.Marshal(r)
	tmp := path + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		os.Rename(tmp, path)
	}
}

// stopping reports whether ctx has ended or reached its deadline: a dial
// cut by the run's end fails with the dialer's own "i/o timeout" an
// instant before the context's timer marks it done.
func stopping(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}

// hold opens one connection and exchanges requests on it until ctx ends or
// it breaks.
func (c *checker) hold(ctx context.Context, id int, target string, interval, timeout time.Duration) {
	conn, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", target)
	if err != nil {
		if stopping(ctx) {
			return // stopping before it opened: not a dial error
		}
		c.mu.Lock()
		c.rep.DialErrors++
		c.mu.Unlock()
		return
	}
	defer conn.Close()
	c.mu.Lock()
	c.rep.Connections++
	c.last[id] = time.Now()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.noteGap(id, time.Now())
		delete(c.last, id)
		c.mu.Unlock()
	}()
	// Stopping must not wait for a stalled exchange's -timeout, but an
	// exchange in flight gets stopGrace to finish: a working connection
	// is still counted alive.
	defer context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now().Add(stopGrace)) })()
	br := bufio.NewReader(conn)
	first := ""
	switched := false
	t := time.NewTicker(interval)
	defer t.Stop()
	for ctx.Err() == nil {
		conn.SetDeadline(time.Now().Add(timeout))
		backend, err := exchange(conn, br, target)
		if err != nil {
			if ctx.Err() != nil {
				return // stopping, not broken
			}
			c.mu.Lock()
			c.rep.Broken = append(c.rep.Broken, Break{Conn: id, Backend: first, After: time.Since(c.start).Round(time.Millisecond).String(), Err: err.Error()})
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		c.rep.Exchanges++
		now := time.Now()
		c.noteGap(id, now)
		c.last[id] = now
		if first == "" {
			first = backend
			c.rep.PerBackend[backend]++
		} else if backend != first && !switched {
			switched = true
			c.rep.Switched++
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	c.mu.Lock()
	c.rep.Alive++ // its last exchange succeeded
	c.mu.Unlock()
}

func exchange(conn net.Conn, br *bufio.Reader, host string) (string, error) {
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Backend"), nil
}
