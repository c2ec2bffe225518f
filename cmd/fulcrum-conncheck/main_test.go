package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHoldsAndReportsBreaks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", "be1")
		w.Write([]byte("be1\n"))
	}))
	defer srv.Close()
	target := strings.TrimPrefix(srv.URL, "http://")
	// Break every connection after a while: the report must count each.
	go func() {
		time.Sleep(700 * time.Millisecond)
		srv.CloseClientConnections()
	}()
	var out, errb bytes.Buffer
	if code := run([]string{"-target", target, "-n", "20", "-interval", "20ms", "-duration", "1500ms"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.Connections != 20 || r.PerBackend["be1"] != 20 || len(r.Broken) != 20 || r.Alive != 0 || r.Exchanges < 20 {
		t.Errorf("report %+v", r)
	}
}

func TestAllAliveWithoutBreaks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", "be2")
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	run([]string{"-target", strings.TrimPrefix(srv.URL, "http://"), "-n", "10", "-interval", "20ms", "-duration", "500ms"}, &out, &errb)
	var r Report
	json.Unmarshal(out.Bytes(), &r)
	if r.Connections != 10 || len(r.Broken) != 0 || r.Alive != 10 {
		t.Errorf("report %+v", r)
	}
	if r.LongestStallMS < 10 {
		t.Errorf("exchanges every 20 ms: longest stall %d ms, want at least 10", r.LongestStallMS)
	}
}

// A server that stops answering leaves its connections open but stalled:
// the report that a test polls with -report must say so before -timeout
// breaks them.
func TestReportsStalledConnections(t *testing.T) {
	var hang atomic.Bool
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			<-release
		}
		w.Header().Set("X-Backend", "be3")
	}))
	defer srv.Close()
	defer close(release)
	file := filepath.Join(t.TempDir(), "report.json")
	done := make(chan int)
	go func() {
		var out, errb bytes.Buffer
		done <- run([]string{"-target", strings.TrimPrefix(srv.URL, "http://"), "-n", "5", "-interval", "20ms",
			"-timeout", "20s", "-duration", "3500ms", "-report", file}, &out, &errb)
	}()
	time.Sleep(500 * time.Millisecond)
	hang.Store(true)
	deadline := time.Now().Add(3 * time.Second)
	var r Report
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(file); err == nil && json.Unmarshal(b, &r) == nil && r.Stalled == 5 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.Stalled != 5 || len(r.Broken) != 0 {
		t.Errorf("while the server hangs: report %+v, want 5 stalled, none broken", r)
	}
	if r.LongestStallMS < 1000 {
		t.Errorf("while 5 connections stall: longest stall %d ms, want over 1000", r.LongestStallMS)
	}
	<-done
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"-target", "nope"}, {"-target", "1.2.3.4:80", "-n", "0"}, {"-bogus"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// With -interval at or above one second, a connection that answers every
// exchange is between two exchanges for longer than stallAfter: the
// progress report must not call it stalled (a test polling for
// "stalled": 0 after a disturbance would otherwise never see it).
func TestHealthyConnectionsNotStalledAtLongInterval(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", "be4")
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "report.json")
	done := make(chan Report)
	go func() {
		var out, errb bytes.Buffer
		run([]string{"-target", strings.TrimPrefix(srv.URL, "http://"), "-n", "3", "-interval", "1500ms",
			"-timeout", "5s", "-duration", "4500ms", "-report", file}, &out, &errb)
		var r Report
		json.Unmarshal(out.Bytes(), &r)
		done <- r
	}()
	maxStalled := 0
	for {
		select {
		case r := <-done:
			if r.Connections != 3 || len(r.Broken) != 0 || r.Alive != 3 {
				t.Fatalf("report %+v", r)
			}
			if maxStalled != 0 {
				t.Errorf("every exchange answered at once, yet a progress report counted %d connections stalled", maxStalled)
			}
			return
		case <-time.After(20 * time.Millisecond):
			var r Report
			if b, err := os.ReadFile(file); err == nil && json.Unmarshal(b, &r) == nil {
				maxStalled = max(maxStalled, r.Stalled)
			}
		}
	}
}
