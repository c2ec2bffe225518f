package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
)

// testpmdOutput is dpdk-testpmd 22.11's --stats-period output as it reads
// through a pipe (one block shortened), then the forward statistics it
// prints at exit, which must not count as a sample.
const testpmdOutput = "\x1b[2J\x1b[1;1H\n" + `
Port statistics ====================================
  ######################## NIC statistics for port 0  ########################
  RX-packets: 43598816   RX-missed: 0          RX-bytes:  2615928960
  RX-errors: 0
  RX-nombuf:  0
  TX-packets: 0          TX-errors: 0          TX-bytes:  0

  Throughput (since last show)
  Rx-pps:     21664212          Rx-bps:  10398821840
  Tx-pps:            0          Tx-bps:            0
  ############################################################################

  ######################## NIC statistics for port 1  ########################
  RX-packets: 0          RX-missed: 0          RX-bytes:  0
  RX-errors: 0
  RX-nombuf:  0
  TX-packets: 43334816   TX-errors: 0          TX-bytes:  0

  Throughput (since last show)
  Rx-pps:            0          Rx-bps:            0
  Tx-pps:     21664247          Tx-bps:            0
  ############################################################################

  ---------------------- Forward statistics for port 1  ----------------------
  RX-packets: 0              RX-dropped: 0             RX-total: 0
  TX-packets: 102392704      TX-dropped: 0             TX-total: 102392704
  ----------------------------------------------------------------------------
`

func TestTestpmdParser(t *testing.T) {
	p := newTestpmdParser()
	var got []Sample
	for _, l := range strings.Split(testpmdOutput, "\n") {
		if s, ok := p.Line(l); ok {
			got = append(got, s)
		}
	}
	if len(got) != 1 || got[0].Tx != 43334816 || got[0].Rx != 43598816 {
		t.Fatalf("samples = %+v, want one with tx 43334816, rx 43598816", got)
	}
}

func TestFulcrumParser(t *testing.T) {
	lines := []string{
		`time=2026-11-30T07:33:51.409Z level=INFO msg="fulcrum starting"`,
		`{"time_unix_ms":1764488031409,"workers":2,"rx":6112618,"rx_bytes":1,"tx":6112585,"tx_bytes":1,"forwarded":6112617,"ct_hits":6100713,"ct_misses":11905,"ct_inserts":11905,"ct_insert_failed":0,"new_flows":11904,"moved":0,"flows":9995,"per_worker":[{"rx":6112608},{"rx":10}]}`,
		`{"time_unix_ms":1764488031409,"workers":1,"rx":5,"tx":5}`, // not this run's worker count
		`{"time_unix_ms":`, // cut short
		`time=2026-11-30T07:33:56.849Z level=INFO msg="final counters" worker=0 rx=39855552 tx=39855520`,
	}
	p := newFulcrumParser(2)
	var got []Sample
	for _, l := range lines {
		if s, ok := p.Line(l); ok {
			got = append(got, s)
		}
	}
	want := Sample{Tx: 6112585, Rx: 6112618, CTHits: 6100713, CTMisses: 11905, NewFlows: 11904}
	if len(got) != 1 || got[0] != want {
		t.Errorf("samples = %+v, want [%+v]", got, want)
	}
}

func TestGCLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		mb   int
		ok   bool
	}{
		{"gc 2 @3.557s 0%: 0.15+2.7+0.026 ms clock, 0.30+0/0.19/0.029+0.053 ms cpu, 6->6->5 MB, 7 MB goal, 0 MB stacks, 0 MB globals, 2 P", 5, true},
		{"gc 1 @5.992s 0%: 0.030+0.91+0.046 ms clock, 0.060+0.11/0.16/0.29+0.093 ms cpu, 130->130->130 MB, 131 MB goal, 2 P", 130, true},
		{"gcc is not a gc line", 0, false},
		{`time=x msg=counters worker=0`, 0, false},
	} {
		mb, ok := gcLine(tc.line)
		if mb != tc.mb || ok != tc.ok {
			t.Errorf("gcLine(%q) = %d, %v; want %d, %v", tc.line, mb, ok, tc.mb, tc.ok)
		}
	}
}

func TestWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int, tx uint64) Sample { return Sample{T: t0.Add(time.Duration(ms) * time.Millisecond), Tx: tx} }
	// testpmd's first print shows (almost) no traffic; its prints then
	// come every 1-2 s.
	ss := []Sample{at(0, 0), at(1000, 10), at(2000, 20), at(3010, 30), at(4980, 50), at(7000, 70), at(8000, 80)}
	for _, tc := range []struct {
		n          int // samples seen so far
		a, b       int
		ok         bool
		warm, span time.Duration
	}{
		{n: 4, ok: false, warm: 2 * time.Second, span: 3 * time.Second},
		{n: 5, ok: false, warm: 2 * time.Second, span: 3 * time.Second},
		{n: 6, a: 3, b: 5, ok: true, warm: 2 * time.Second, span: 3 * time.Second},
		{n: 7, a: 3, b: 4, ok: true, warm: 2 * time.Second, span: 2 * time.Second},
		{n: 2, a: 0, b: 0, ok: false, warm: 0, span: time.Second},
	} {
		a, b, ok := Window(ss[:tc.n], tc.warm, tc.span)
		if a != tc.a || b != tc.b || ok != tc.ok {
			t.Errorf("Window(first %d, %v, %v) = %d, %d, %v; want %d, %d, %v", tc.n, tc.warm, tc.span, a, b, ok, tc.a, tc.b, tc.ok)
		}
	}
	if r := rate(ss[3], ss[5], txOf); r < 10 || r > 10.1 {
		t.Errorf("rate = %v, want 40 packets / 3.99 s", r)
	}
}

// scenarioRuns is what the harness would run for s: Fulcrum's
// configuration, parsed by the daemon's own parser (which must accept it),
// and testpmd's arguments, also joined with a space on each side for
// whole-argument searches.
func scenarioRuns(t *testing.T, s *Scenario) (cfg *config.Config, args []string, joined string) {
	t.Helper()
	pcaps := s.PcapPaths("/cache", "digest")
	text, err := s.FulcrumConfig("fbench-test", pcaps, "")
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	if cfg, err = config.Parse([]byte(text), s.Name+".toml"); err != nil {
		t.Fatalf("%s: %v\n%s", s.Name, err, text)
	}
	if args, err = s.TestpmdArgs("fbench-test", pcaps, "0,1"); err != nil {
		t.Fatalf("%s: testpmd args: %v", s.Name, err)
	}
	return cfg, args, " " + strings.Join(args, " ") + " "
}

// Every scenario's configuration must be one the daemon accepts, with the
// pool holding the whole pcap; with -hugepages too, where both programs run
// on the same hugetlbfs and `fulcrum check`'s memory check counts the
// conntrack tables against memory_mb.
func TestScenarioConfigs(t *testing.T) {
	for _, huge := range []string{"", "/mnt/huge-bench"} {
		HugeDir = huge
		t.Cleanup(func() { HugeDir = "" })
		for _, s := range Scenarios {
			cfg, args, a := scenarioRuns(t, &s)
			if len(cfg.VIPs) != s.VIPs || len(cfg.VIPs[0].Backends) != s.Backends || len(cfg.EAL.WorkerLcores) != s.workers() {
				t.Errorf("%s: %d VIPs of %d backends, %d workers; want %d, %d, %d", s.Name, len(cfg.VIPs), len(cfg.VIPs[0].Backends), len(cfg.EAL.WorkerLcores), s.VIPs, s.Backends, s.workers())
			}
			if pool := cfg.Dataplane.MempoolSize; pool < s.Frames+poolMargin/2 {
				t.Errorf("%s: pool of %d mbufs for %d frames", s.Name, pool, s.Frames)
			}
			if n := strings.Count(cfg.EAL.Vdevs[0], "rx_pcap="); n != s.workers() {
				t.Errorf("%s: %d rx_pcap queues, want %d", s.Name, n, s.workers())
			}
			if !strings.Contains(a, " --forward-mode=io ") {
				t.Errorf("%s: testpmd args %q", s.Name, args)
			}
			if huge == "" {
				if cfg.EAL.Hugepages || !strings.Contains(a, " --no-huge ") {
					t.Errorf("%s: without -hugepages: hugepages %v, testpmd args %q", s.Name, cfg.EAL.Hugepages, args)
				}
				continue
			}
			if !cfg.EAL.Hugepages || strings.Join(cfg.EAL.ExtraArgs, " ") != "--huge-dir "+huge {
				t.Errorf("%s: hugepages %v, extra_args %q", s.Name, cfg.EAL.Hugepages, cfg.EAL.ExtraArgs)
			}
			if !strings.Contains(a, " --huge-dir "+huge+" ") || strings.Contains(a, "--no-huge") {
				t.Errorf("%s: testpmd args %q", s.Name, args)
			}
		}
	}
}

// -burst sets both programs' burst, and without it neither is told one
// (both default to 32): testpmd's --burst and Fulcrum's [dataplane] burst,
// read back through the daemon's own configuration parser.
func TestScenarioBurst(t *testing.T) {
	t.Cleanup(func() { Burst = 0 })
	for _, burst := range []int{0, 64} {
		Burst = burst
		for _, s := range Scenarios {
			cfg, args, a := scenarioRuns(t, &s)
			want, wantArgs := 32, 0
			if burst > 0 {
				want, wantArgs = burst, 1
			}
			if cfg.Dataplane.Burst != want || strings.Count(a, "--burst") != wantArgs ||
				burst > 0 && !strings.Contains(a, fmt.Sprintf(" --burst=%d ", burst)) {
				t.Errorf("-burst %d, %s: Fulcrum's burst %d (want %d), testpmd args %q", burst, s.Name, cfg.Dataplane.Burst, want, args)
			}
		}
	}
}
