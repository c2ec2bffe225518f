package health

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestProbeLogVolumeFlappingBackend: a health endpoint that flaps in the
// pattern that makes the most state changes (each verdict as soon as the
// counts allow) over 24 hours of checks at the default interval. Every
// event becomes one "backend up"/"backend down" record in package
// control: the dampening must keep the rate to a few an hour.
func TestProbeLogVolumeFlappingBackend(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Unix(1_700_000_000, 0)
	m := newMachine("b", netip.MustParseAddrPort("192.0.2.1:80"), cfg, now)
	fail := errors.New("refused")
	const checks = 24 * 3600 / 2 // a day at 2 s
	best := 0
	// Try every period of "up for u checks, down for d checks".
	for u := cfg.Rise; u <= 30; u++ {
		for d := cfg.Fall; d <= 10; d++ {
			m = newMachine("b", netip.MustParseAddrPort("192.0.2.1:80"), cfg, now)
			at := now
			events := 0
			for i := 0; i < checks; i++ {
				at = at.Add(cfg.Interval)
				var err error
				if i%(u+d) >= u {
					err = fail
				}
				if _, ok := m.observe(at, time.Millisecond, err); ok {
					events++
				}
			}
			best = max(best, events)
		}
	}
	perHour := float64(best) / 24
	t.Logf("worst flapping pattern: %d events (log records) in 24 h of checks every %v: %.0f/h per backend", best, cfg.Interval, perHour)
	if perHour > 200 {
		t.Errorf("a flapping endpoint makes %.0f state changes an hour", perHour)
	}
}

// TestProbeLogVolumeGarbageHealthAnswer: a backend's health port answers
// a status line of garbage just under the header limit. The check's error
// becomes the backend's Reason and LastError (kept, and logged with
// every "backend down"): how many bytes of the backend's choosing?
func TestProbeLogVolumeGarbageHealthAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	garbage := strings.Repeat("\x1b[2J<script>", 30<<10/11)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				bufio.NewReader(c).ReadString('\n')
				c.Write([]byte(garbage + "\r\n\r\n"))
			}()
		}
	}()
	cfg := DefaultConfig()
	cfg.Kind, cfg.Path = KindHTTP, "/health"
	p, err := NewProber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, perr := p.Probe(ctx, netip.MustParseAddrPort(ln.Addr().String()))
	if perr == nil {
		t.Fatal("garbage passed")
	}
	t.Logf("garbage status line of %d bytes: check error of %d bytes", len(garbage), len(perr.Error()))
	if len(perr.Error()) > 1024 {
		t.Errorf("a backend's garbage answer makes a %d-byte check error (kept as Reason/LastError, logged per transition): %.120q...", len(perr.Error()), perr.Error())
	}
}
