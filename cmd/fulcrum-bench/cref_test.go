package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// scenarioNamed is a copy of the named scenario of the list.
func scenarioNamed(t *testing.T, name string) *Scenario {
	t.Helper()
	i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		t.Fatalf("no scenario %s", name)
	}
	s := Scenarios[i]
	return &s
}

// The C pipeline runs exactly the scenarios whose traffic it handles:
// IPv4 TCP to 203.0.113.7:80, 10 backends, one worker, not the SYN flood.
func TestScenarioCRef(t *testing.T) {
	var got []string
	for _, s := range Scenarios {
		if !s.CRef {
			continue
		}
		got = append(got, s.Name)
		if vips := s.VIPAddrs(); s.IPv6 || len(vips) != 1 || vips[0].String() != "203.0.113.7" || s.Backends != 10 || s.workers() != 1 {
			t.Errorf("%s: CRef, but IPv6 %v, VIPs %v, %d backends, %d workers", s.Name, s.IPv6, vips, s.Backends, s.workers())
		}
	}
	if want := []string{"syn-1m", "est-10k", "est-1m"}; !slices.Equal(got, want) {
		t.Errorf("CRef scenarios %v, want %v", got, want)
	}
}

// The noise of a pair, which decides whether it is measured again and
// left out of the medians, counts the C pipeline's window too.
func TestNoiseIncludesC(t *testing.T) {
	p := pair{T: Result{OtherCPUs: 0.1}, F: Result{OtherCPUs: 0.2}, C: Result{OtherCPUs: 0.7}}
	if got := p.noise(); got != 0.7 {
		t.Errorf("noise with C = %v, want 0.7 (the C run's)", got)
	}
	p.C = Result{}
	if got := p.noise(); got != 0.2 {
		t.Errorf("noise without C = %v, want 0.2", got)
	}
}

// cPairs are constructed pairs whose medians are known: three measured
// all three programs, chosen so that the median of the per-pair ratios
// differs from the ratio of the medians (C/testpmd: 0.9, not 8/10;
// Fulcrum/C: 5/7, not 5/8); one lost its C run; one is noisy (left out).
func cPairs() []pair {
	ok := func(t, f, c, other float64) pair {
		return pair{T: Result{Mpps: t, HWMkB: 1024}, F: Result{Mpps: f, HWMkB: 2048}, C: Result{Mpps: c, OtherCPUs: other}}
	}
	noisy := ok(10, 1, 1, 0.9)
	noisy.Noisy = true
	return []pair{
		ok(10, 4, 9, 0.05), // C/T 0.9, F/C 0.444
		ok(20, 6, 8, 0.1),  // 0.4, 0.75
		ok(5, 5, 7, 0.15),  // 1.4, 0.714
		{T: Result{Mpps: 10}, F: Result{Mpps: 9}, CErr: errors.New("cref exited (exit status 1) before the window was complete")},
		noisy,
	}
}

// mdRows reads a markdown table: its header cells and each row's cells by
// header name, keyed by the first cell. Every row must have the header's
// number of cells.
func mdRows(t *testing.T, md string) ([]string, map[string]map[string]string) {
	t.Helper()
	cells := func(l string) []string {
		c := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		for i := range c {
			c[i] = strings.TrimSpace(c[i])
		}
		return c
	}
	lines := strings.Split(strings.TrimSpace(md), "\n")
	head := cells(lines[0])
	rows := map[string]map[string]string{}
	for _, l := range lines[2:] {
		c := cells(l)
		if len(c) != len(head) {
			t.Fatalf("row of %d cells under a header of %d:\n%s\n%s", len(c), len(head), lines[0], l)
		}
		r := map[string]string{}
		for i, h := range head {
			r[h] = c[i]
		}
		rows[c[0]] = r
	}
	return head, rows
}

func TestMarkdownCColumns(t *testing.T) {
	est, flood := scenarioNamed(t, "est-10k"), scenarioNamed(t, "syn-flood")
	fFailed := []pair{
		{T: Result{Mpps: 10}, C: Result{Mpps: 8}, FErr: errors.New("fulcrum exited")}, // C/T 0.8
		{T: Result{Mpps: 20}, C: Result{Mpps: 9}, FErr: errors.New("fulcrum exited")}, // 0.45
		{T: Result{Mpps: 30}, CErr: errors.New("cref exited"), FErr: errors.New("x")}, // no C
	}
	failedScenario := *est
	failedScenario.Name = "est-10k-f-failed"
	sums := []summary{
		{S: est, Pairs: cPairs()},
		{S: flood, Pairs: []pair{{T: Result{Mpps: 10}, F: Result{Mpps: 5}}, {T: Result{Mpps: 12}, F: Result{Mpps: 6}}}},
		{S: &failedScenario, Pairs: fFailed},
	}
	head, rows := mdRows(t, markdown(sums, &options{}))
	for _, h := range []string{"C pipeline Mpps (ratio to testpmd)", "Fulcrum / C"} {
		if !slices.Contains(head, h) {
			t.Errorf("no column %q in %q", h, head)
		}
	}
	for _, tc := range []struct {
		row, col, want string
	}{
		// Medians over the three pairs that measured all three programs.
		{"est-10k", "C pipeline Mpps (ratio to testpmd)", "8.00 (0.900)"},
		{"est-10k", "Fulcrum / C", "0.714"},
		// The existing columns keep their meaning: the pair without C
		// counts for testpmd and Fulcrum, the noisy one for none.
		{"est-10k", "pairs", "4 (+1 noisy)"},
		{"est-10k", "testpmd Mpps", "10.00"},
		{"est-10k", "Fulcrum Mpps", "5.50"},
		{"est-10k", "ratio (min-max)", "0.650 (0.300-1.000)"},
		// No C run: "-".
		{"syn-flood", "C pipeline Mpps (ratio to testpmd)", "-"},
		{"syn-flood", "Fulcrum / C", "-"},
		{"syn-flood", "Fulcrum Mpps", "5.50"},
		// Fulcrum failed: C against testpmd where both ran, no Fulcrum / C.
		{"est-10k-f-failed", "Fulcrum Mpps", "failed"},
		{"est-10k-f-failed", "testpmd Mpps", "20.00"},
		{"est-10k-f-failed", "C pipeline Mpps (ratio to testpmd)", "8.50 (0.625)"},
		{"est-10k-f-failed", "Fulcrum / C", "-"},
	} {
		if got := rows[tc.row][tc.col]; got != tc.want {
			t.Errorf("%s, %q = %q, want %q", tc.row, tc.col, got, tc.want)
		}
	}
}

// tableRows reads printScenario's table (tabwriter, right-aligned, every
// cell tab-terminated): every column ends where its header ends and every
// line is as wide, so each row's cells are the spans between the header's
// column ends. Rows are keyed by their first cell.
func tableRows(t *testing.T, out string) ([]string, map[string]map[string]string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	header := lines[0]
	head := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(header), -1)
	var ends []int
	pos := 0
	for _, h := range head {
		i := strings.Index(header[pos:], h)
		if i < 0 {
			t.Fatalf("header %q: %q not found after %d", header, h, pos)
		}
		pos += i + len(h)
		ends = append(ends, pos)
	}
	rows := map[string]map[string]string{}
	for _, l := range lines[1:] {
		if len(l) != len(header) {
			break // the table's lines are all as wide; the notes under it are not
		}
		r := map[string]string{}
		start := 0
		for i, h := range head {
			r[h] = strings.TrimSpace(l[start:ends[i]])
			start = ends[i]
		}
		rows[r["pair"]] = r
	}
	return head, rows
}

func TestPrintScenarioCColumns(t *testing.T) {
	est, flood := scenarioNamed(t, "est-10k"), scenarioNamed(t, "syn-flood")
	var b bytes.Buffer
	printScenario(&b, &summary{S: est, Pairs: cPairs()}, 0.5)
	head, rows := tableRows(t, b.String())
	for _, h := range []string{"C Mpps", "C/testpmd", "Fulcrum/C", "other load C (CPUs)"} {
		if !slices.Contains(head, h) {
			t.Errorf("no column %q in %q", h, head)
		}
	}
	for _, tc := range []struct {
		row, col, want string
	}{
		{"1", "C Mpps", "9.00"},
		{"1", "C/testpmd", "0.900"},
		{"1", "Fulcrum/C", "0.444"},
		{"1", "other load C (CPUs)", "0.05"},
		{"1", "ratio", "0.400"},
		{"2", "C/testpmd", "0.400"},
		{"3", "Fulcrum/C", "0.714"},
		{"4", "C Mpps", "failed"},
		{"4", "C/testpmd", "-"},
		{"4", "Fulcrum/C", "-"},
		{"4", "other load C (CPUs)", "-"},
		{"4", "Fulcrum Mpps", "9.00"},
		{"5*", "C Mpps", "1.00"},
		{"median", "C Mpps", "8.00"},
		{"median", "C/testpmd", "0.900"},
		{"median", "Fulcrum/C", "0.714"},
		{"median", "testpmd Mpps", "10.00"},
		{"median", "Fulcrum Mpps", "5.50"},
		{"median", "ratio", "0.650"},
	} {
		if got := rows[tc.row][tc.col]; got != tc.want {
			t.Errorf("pair %s, %q = %q, want %q", tc.row, tc.col, got, tc.want)
		}
	}
	if !strings.Contains(b.String(), "pair 4: cref exited (exit status 1)") {
		t.Errorf("the C run's error is not reported:\n%s", b.String())
	}

	b.Reset()
	printScenario(&b, &summary{S: flood, Pairs: []pair{{T: Result{Mpps: 10}, F: Result{Mpps: 5}}}}, 0.5)
	_, rows = tableRows(t, b.String())
	for _, row := range []string{"1", "median"} {
		for _, col := range []string{"C Mpps", "C/testpmd", "Fulcrum/C"} {
			if got := rows[row][col]; got != "-" {
				t.Errorf("without C: pair %s, %q = %q, want -", row, col, got)
			}
		}
	}
	if got := rows["median"]["Fulcrum Mpps"]; got != "5.00" {
		t.Errorf("without C: median Fulcrum Mpps %q, want 5.00", got)
	}
}

// fakeStats is a shell loop printing counters that grow, every 20 ms, in
// testpmd's format (for testpmd and the C pipeline) or as Fulcrum's
// --stats-json; the script first writes CREF_CT_CAPACITY and its
// arguments to $0.ran.
func fakeStats(json bool) string {
	out := `echo "  ######################## NIC statistics for port 0  ########################"; echo "  RX-packets: $i  RX-missed: 0"
	echo "  ######################## NIC statistics for port 1  ########################"; echo "  TX-packets: $i  TX-errors: 0"`
	if json {
		out = `echo "{\"time_unix_ms\":1,\"workers\":1,\"rx\":$i,\"tx\":$i,\"ct_hits\":$i,\"ct_misses\":0,\"new_flows\":0}"`
	}
	return "#!/bin/sh\nprintf '%s\\n' \"$CREF_CT_CAPACITY\" \"$*\" > \"$0.ran\"\ni=0\nwhile :; do\n\ti=$((i+1000))\n\t" + out + "\n\tsleep 0.02\ndone\n"
}

// runPair runs the C pipeline third, with testpmd's arguments under its
// own file prefix and the scenario's conntrack capacity, only with -cref
// and on a scenario with CRef; a failed C run leaves testpmd's and
// Fulcrum's figures in the pair. The three programs are shell scripts
// printing counters.
func TestRunPairCRef(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	testpmd := write("testpmd", fakeStats(false))
	write("fulcrum", fakeStats(true))
	cref := write("cref", fakeStats(false))
	crefFails := write("cref-fails", "#!/bin/sh\nprintf '%s\\n' \"$CREF_CT_CAPACITY\" \"$*\" > \"$0.ran\"\necho 'cref: EAL init failed' >&2\nexit 1\n")
	est, flood := scenarioNamed(t, "est-10k"), scenarioNamed(t, "syn-flood")
	for _, tc := range []struct {
		name    string
		s       *Scenario
		cref    string
		ran     string // the C script that must have run ("": none)
		cFailed bool
	}{
		{"scenario without CRef", flood, cref, "", false},
		{"no -cref", est, "", "", false},
		{"CRef", est, cref, cref, false},
		{"C fails", est, crefFails, crefFails, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []string{cref, crefFails, testpmd} {
				os.Remove(p + ".ran")
			}
			work := t.TempDir()
			o := &options{bin: dir, testpmd: testpmd, cref: tc.cref, work: work, prefix: fmt.Sprintf("fbench-creftest-%d", os.Getpid()),
				tm: Timing{Warmup: 100 * time.Millisecond, Window: 200 * time.Millisecond, Startup: 30 * time.Second, Stall: 30 * time.Second, Exit: 5 * time.Second}}
			p, err := runPair(context.Background(), o, tc.s, []string{"/cache/x.pcap"}, "0,1", "", "", "1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.TErr != nil || p.FErr != nil || p.T.Mpps <= 0 || p.F.Mpps <= 0 {
				t.Fatalf("testpmd %+v (%v), Fulcrum %+v (%v): want both measured", p.T, p.TErr, p.F, p.FErr)
			}
			for _, c := range []string{cref, crefFails} {
				if _, err := os.Stat(c + ".ran"); (err == nil) != (c == tc.ran) {
					t.Errorf("%s ran: %v, want %v", filepath.Base(c), err == nil, c == tc.ran)
				}
			}
			switch {
			case tc.ran == "":
				if p.C != (Result{}) || p.CErr != nil || p.cOK() {
					t.Errorf("C not run, but C %+v, CErr %v", p.C, p.CErr)
				}
				return
			case tc.cFailed:
				if p.CErr == nil || p.cOK() {
					t.Errorf("C failed, but CErr nil, C %+v", p.C)
				}
			default:
				if p.CErr != nil || p.C.Mpps <= 0 {
					t.Errorf("C %+v, %v: want measured", p.C, p.CErr)
				}
			}
			// The C run: the scenario's conntrack capacity, testpmd's
			// arguments with its own file prefix.
			b, err := os.ReadFile(tc.ran + ".ran")
			if err != nil {
				t.Fatal(err)
			}
			tb, err := os.ReadFile(testpmd + ".ran")
			if err != nil {
				t.Fatal(err)
			}
			got := strings.SplitN(strings.TrimSuffix(string(b), "\n"), "\n", 2)
			targs := strings.SplitN(strings.TrimSuffix(string(tb), "\n"), "\n", 2)[1]
			tp, cp := o.prefix+"-est-10k-1-t", o.prefix+"-est-10k-1-c"
			if want := fmt.Sprint(tc.s.ctCapacity()); got[0] != want {
				t.Errorf("CREF_CT_CAPACITY=%q, want %s", got[0], want)
			}
			if !strings.Contains(targs, " --file-prefix "+tp+" ") || got[1] != strings.Replace(targs, tp, cp, 1) {
				t.Errorf("C arguments\n  %s\nwant testpmd's with prefix %s\n  %s", got[1], cp, targs)
			}
		})
	}
}

// runPair asks each measured Fulcrum run for a CPU profile in -profile's
// directory, one file a run named by its file prefix, and asks nothing
// without -profile.
func TestRunPairProfile(t *testing.T) {
	dir := t.TempDir()
	for name, json := range map[string]bool{"testpmd": false, "fulcrum": true} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fakeStats(json)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, profile := range []string{"", filepath.Join(t.TempDir(), "prof")} {
		os.Remove(filepath.Join(dir, "fulcrum.ran"))
		o := &options{bin: dir, testpmd: filepath.Join(dir, "testpmd"), work: t.TempDir(), profile: profile, prefix: fmt.Sprintf("fbench-proftest-%d", os.Getpid()),
			tm: Timing{Warmup: 100 * time.Millisecond, Window: 200 * time.Millisecond, Startup: 30 * time.Second, Stall: 30 * time.Second, Exit: 5 * time.Second}}
		p, err := runPair(context.Background(), o, scenarioNamed(t, "est-10k"), []string{"/cache/x.pcap"}, "0,1", "", "", "1", nil)
		if err != nil || p.FErr != nil {
			t.Fatalf("-profile %q: %v, Fulcrum: %v", profile, err, p.FErr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "fulcrum.ran"))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.TrimSuffix(strings.SplitN(string(b), "\n", 2)[1], "\n")
		want := " --cpu-profile " + filepath.Join(profile, o.prefix+"-est-10k-1-f.pprof")
		if profile == "" {
			if strings.Contains(args, "--cpu-profile") {
				t.Errorf("no -profile, but fulcrum ran with %q", args)
			}
		} else if !strings.HasSuffix(args, want) {
			t.Errorf("-profile %s: fulcrum ran with %q, want it to end %q", profile, args, want)
		}
	}
}
