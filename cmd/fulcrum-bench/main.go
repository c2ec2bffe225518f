// Command fulcrum-bench measures Fulcrum's forwarding rate side by side with
// DPDK's I/O ceiling (issue 6): for each scenario it writes a pcap with
// fulcrum-gen, then alternates `dpdk-testpmd` io forwarding (A) and
// `fulcrum run` (B) on the same virtual ports (net_pcap replaying the pcap
// in a loop, net_null as the sink), the same lcores and the same mbuf
// pool, A B A B ... for -pairs pairs. Each program's rate comes from its
// own counters over the same window after the same warm-up. It prints, per
// scenario, both rates, their ratio, the time Fulcrum's own processing
// costs per packet (1/F - 1/T), peak memory and GC cycles, and at the end a
// markdown summary for docs/benchmarks.md.
//
// Before measuring, each scenario is verified: Fulcrum forwards a sample
// of the same traffic into a capture file and every frame's backend is
// checked against the Maglev table (verify.go). Fulcrum's counters are its
// --stats-json lines, and every wait has a time limit.
//
// With -cref PATH it also runs a third program in each pair, after
// Fulcrum: bench/cref/cref.c (built by `make cref`), Fulcrum's fused fast
// path written in C (parse, VIP match, conntrack probe, Maglev choice, GRE
// header, counters, with nothing else), the yardstick of the performance
// issue's "as fast in Go as the same pipeline written in C". It takes
// testpmd's command line and prints testpmd's port statistics, and is
// measured the same way, on the scenarios whose traffic it handles
// (Scenario.CRef: syn-1m, est-10k, est-1m). Its rate, its ratio to testpmd
// and Fulcrum's ratio to it appear in the tables only with -cref.
//
// No figure is judged: there is no pass/fail threshold on a timing. The
// exit status is 1 when a run could not be measured or a verification
// found a frame at the wrong backend.
//
// scripts/bench.sh (`make bench`) builds the binaries and runs it.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
)

func main() { os.Exit(run()) }

type options struct {
	bin, testpmd, cache, work, prefix, out string
	cref                                   string // the C pipeline's binary (-cref; "": not run)
	profile                                string // directory of the Fulcrum runs' CPU profiles (-profile; "": none)
	pairs, retries, nice                   int
	maxOther                               float64
	retryLeft                              time.Duration // time the remaining retries may take, to keep the whole run within its time
	quick, list, verify                    bool
	only                                   string
	tm                                     Timing
}

func run() int {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory holding the fulcrum and fulcrum-gen binaries (built with -tags dpdk)")
	flag.StringVar(&o.testpmd, "testpmd", "dpdk-testpmd", "the testpmd binary")
	flag.StringVar(&o.cref, "cref", "", "also run this build of bench/cref/cref.c (make cref: bin/cref), Fulcrum's fast path written in C, third in each pair on the scenarios it handles ("+strings.Join(crefScenarios(), ", ")+"), with testpmd's arguments; default: not run")
	flag.StringVar(&o.cache, "cache", filepath.Join(os.TempDir(), "fulcrum-bench-cache"), "directory of generated pcaps, kept between runs (named by fulcrum-gen's digest and flags)")
	flag.StringVar(&o.work, "work", "", "directory for configurations and logs (default: a new temporary directory, removed at exit)")
	flag.StringVar(&o.prefix, "prefix", fmt.Sprintf("fbench-%d", os.Getpid()), "EAL --file-prefix base; each run appends its own suffix")
	flag.StringVar(&o.out, "o", "", "also write the markdown summary to this file")
	flag.StringVar(&o.profile, "profile", "", "write a Go CPU profile of every measured Fulcrum run into this directory (fulcrum run --cpu-profile), one file a run: what make pgo merges into cmd/fulcrum/default.pgo")
	flag.IntVar(&o.pairs, "pairs", 3, "A/B pairs per scenario (testpmd then Fulcrum)")
	flag.IntVar(&o.retries, "retries", 1, "times a pair is measured again when other programs used more than -max-other CPUs during it")
	flag.Float64Var(&o.maxOther, "max-other", 0.5, "CPUs other programs may use beside the measured one before a pair counts as noisy")
	flag.IntVar(&o.nice, "nice", -10, "niceness of testpmd and Fulcrum alike (0: leave as is), so that other programs on a shared machine disturb the forwarding core less")
	flag.BoolVar(&o.quick, "quick", false, "QUICK mode: the scenarios marked quick, one pair each, short windows")
	flag.BoolVar(&o.list, "list", false, "list the scenarios and exit")
	flag.BoolVar(&o.verify, "verify", true, "before measuring a scenario, forward a 2000-frame sample of its traffic into a capture file and check every frame's backend against the Maglev table; a scenario with a misrouted frame fails")
	flag.IntVar(&Burst, "burst", 0, "rx/tx burst of testpmd (--burst) and Fulcrum ([dataplane] burst) alike, 1 to 64; default: both at 32")
	flag.StringVar(&HugeDir, "hugepages", "", "run testpmd and Fulcrum alike on the hugepages of the hugetlbfs mounted at this directory (reserve -m's worth first: vm.nr_hugepages); default --no-huge")
	flag.StringVar(&o.only, "only", "", "comma-separated scenario names to run (default: all, or the quick ones)")
	vipsOf := flag.String("vips", "", "print the [[vip]] configuration of this scenario (for real-hardware runs) and exit")
	flag.DurationVar(&o.tm.Warmup, "warmup", 2*time.Second, "traffic before the window")
	flag.DurationVar(&o.tm.Window, "window", 5*time.Second, "measured span")
	flag.Parse()
	// Refused before anything runs or is printed: flag stops at the
	// first argument and drops the flags after it ("fulcrum-bench
	// syn-1m -pairs 5" ran every scenario, 3 pairs); -retries below 0
	// measured no pair at all (a summary of zeros, exit 0); -window 0
	// took one stats interval as the window.
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fulcrum-bench: unexpected argument %q: fulcrum-bench takes only flags (a scenario: -only NAME)\n", flag.Arg(0))
		return 2
	}
	for _, bad := range []struct {
		ok  bool
		msg string
	}{
		{o.retries >= 0, fmt.Sprintf("-retries %d: must be 0 or more", o.retries)},
		{o.tm.Window > 0, fmt.Sprintf("-window %v: must be positive", o.tm.Window)},
		{o.tm.Warmup >= 0, fmt.Sprintf("-warmup %v: must be 0 or positive", o.tm.Warmup)},
		{o.maxOther >= 0, fmt.Sprintf("-max-other %v: must be 0 or more", o.maxOther)}, // NaN too
	} {
		if !bad.ok {
			fmt.Fprintf(os.Stderr, "fulcrum-bench: %s\n", bad.msg)
			return 2
		}
	}
	if Burst < 0 || Burst > conntrack.MaxBurst {
		fmt.Fprintf(os.Stderr, "fulcrum-bench: -burst %d: outside 1..%d (0: the default)\n", Burst, conntrack.MaxBurst)
		os.Exit(2)
	}
	o.tm.Startup, o.tm.Stall = 90*time.Second, 15*time.Second
	if o.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["pairs"] {
			o.pairs = 1
		}
		if !set["warmup"] {
			o.tm.Warmup = time.Second
		}
		if !set["window"] {
			o.tm.Window = 3 * time.Second
		}
	}
	if o.list {
		for _, s := range Scenarios {
			q := ""
			if s.Quick {
				q = " (quick)"
			}
			fmt.Printf("%-14s %s%s\n", s.Name, s.Title, q)
		}
		return 0
	}
	if *vipsOf != "" {
		scs, err := selectScenarios(*vipsOf, false)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-bench: %v\n", err)
			return 2
		}
		fmt.Printf("# fulcrum-bench scenario %s: %s\n# conntrack: capacity = %d per worker\n%s", scs[0].Name, scs[0].Title, scs[0].ctCapacity(), scs[0].VIPsTOML())
		return 0
	}
	scs, err := selectScenarios(o.only, o.quick)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fulcrum-bench: %v\n", err)
		return 2
	}
	if o.pairs < 1 {
		fmt.Fprintln(os.Stderr, "fulcrum-bench: -pairs must be at least 1")
		return 2
	}
	if o.cref != "" {
		// Found now, not as a failure in every pair.
		p, err := exec.LookPath(o.cref)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-bench: -cref: %v (make cref builds bin/cref)\n", err)
			return 2
		}
		o.cref = p
	}

	// A bench killed by SIGKILL (or an out-of-memory kill) left its DPDK
	// runtime directories behind; this run removes those of dead runs.
	for _, d := range sweepStale(filepath.Dir(dpdkRuntimeDir("x")), pidAlive) {
		fmt.Fprintf(os.Stderr, "fulcrum-bench: removed %s, left by a run that was killed\n", d)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if o.work == "" {
		d, err := os.MkdirTemp("", "fulcrum-bench-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-bench: %v\n", err)
			return 1
		}
		defer os.RemoveAll(d)
		o.work = d
	}
	if o.profile != "" {
		p, err := filepath.Abs(o.profile) // fulcrum may run elsewhere
		if err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-bench: -profile: %v\n", err)
			return 2
		}
		o.profile = p
	}
	for _, d := range []string{o.cache, o.work, o.profile} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-bench: %v\n", err)
			return 1
		}
	}
	pids := NewPIDFile(filepath.Join(o.work, "pids"))

	fmt.Println(machine())
	if Burst > 0 {
		fmt.Printf("burst: %d packets, testpmd and Fulcrum alike\n", Burst)
	}
	order, all := "testpmd, then Fulcrum", "both"
	if o.cref != "" {
		order, all = "testpmd, then Fulcrum, then the C pipeline where it applies", "all"
	}
	fmt.Printf("mode: %s; %d pair(s) per scenario (%s); warm-up %v, window %v; %s at nice %d; a pair during which other programs used more than %.2f CPUs is measured again (up to %d times)\n",
		map[bool]string{true: "QUICK", false: "full"}[o.quick], o.pairs, order, o.tm.Warmup, o.tm.Window, all, o.nice, o.maxOther, o.retries)
	fmt.Println("columns: ns/pkt = 1/Fulcrum - 1/testpmd; new Mflows/s per core = new flows given a backend per second and forwarding lcore (millions; Fulcrum's --stats-json new_flows); RSS = peak resident memory (VmHWM); GC = Go GC cycles (GODEBUG=gctrace=1) ending in the window / in the run;\n" +
		"  slowest interval = slowest stats interval (1-2 s) of the window in % of the window's rate, (GC) if a GC cycle ended in it; ct miss = conntrack misses among lookups;\n" +
		"  other load = CPUs used by other programs beside the measured one during the window (testpmd/Fulcrum runs; C: the C pipeline's run);\n" +
		"  C = the C pipeline (bench/cref/cref.c: Fulcrum's fused fast path written in C, the yardstick \"as fast in Go as the same pipeline written in C\"), measured like testpmd with its arguments:\n" +
		"  C Mpps, C/testpmd = C / testpmd, Fulcrum/C = Fulcrum / C; only with -cref and on " + strings.Join(crefScenarios(), ", ") + ", \"-\" otherwise")
	if o.cref == "" {
		fmt.Println("  (-cref not given: the C pipeline is not run)")
	}
	if o.pairs < 3 {
		fmt.Println("note: fewer than 3 pairs: each figure is a single measurement, not a median; use the full mode for the record")
	}
	fmt.Println()

	genDigest, err := fileDigest(filepath.Join(o.bin, "fulcrum-gen"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "fulcrum-bench: %v\n", err)
		return 1
	}
	start := time.Now()
	// Retries add up on a busy machine; once they have taken this long, a
	// noisy pair is kept (flagged) so that the whole run stays near 2
	// (QUICK) or 10 minutes.
	o.retryLeft = 120 * time.Second
	if o.quick {
		o.retryLeft = 30 * time.Second
	}
	var sums []summary
	failed := false
	for si := range scs {
		s := &scs[si]
		sum, err := runScenario(ctx, &o, s, genDigest, pids)
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "fulcrum-bench: interrupted; stopped the running program and removed its files")
			return 130
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-bench: %s: %v\n", s.Name, err)
			failed = true
		}
		sums = append(sums, sum)
	}
	md := markdown(sums, &o)
	fmt.Printf("\nsummary (medians over pairs; pairs during which other programs used more than %.2f CPUs are left out when a quieter pair exists; the C pipeline's columns over the pairs that measured all three programs, \"-\" where it did not run (-cref); %s; %v in all; load average after: %s)\n\n%s",
		o.maxOther, mode(&o), time.Since(start).Round(time.Second), loadavg(), md)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "fulcrum-bench: %v\n", err)
			failed = true
		}
	}
	if failed {
		return 1
	}
	return 0
}

func mode(o *options) string {
	if o.quick {
		return fmt.Sprintf("QUICK, %d pair(s), window %v", o.pairs, o.tm.Window)
	}
	return fmt.Sprintf("%d pairs, window %v", o.pairs, o.tm.Window)
}

// crefScenarios are the names of the scenarios the C pipeline runs.
func crefScenarios() []string {
	var out []string
	for _, s := range Scenarios {
		if s.CRef {
			out = append(out, s.Name)
		}
	}
	return out
}

func selectScenarios(only string, quick bool) ([]Scenario, error) {
	if only == "" {
		var out []Scenario
		for _, s := range Scenarios {
			if !quick || s.Quick {
				out = append(out, s)
			}
		}
		return out, nil
	}
	var out []Scenario
	for _, n := range strings.Split(only, ",") {
		i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == strings.TrimSpace(n) })
		if i < 0 {
			return nil, fmt.Errorf("-only: no scenario %q (see -list)", n)
		}
		out = append(out, Scenarios[i])
	}
	return out, nil
}

// pair is one A/B measurement, with the C pipeline's run after them when
// -cref is given and the scenario has CRef (else C is zero, CErr nil).
type pair struct {
	T, F       Result
	TErr, FErr error
	C          Result // the C pipeline (bench/cref)
	CErr       error
	Noisy      bool // other programs took more than -max-other CPUs during a window
}

// noise is the most CPU other programs used during any of the windows.
func (p *pair) noise() float64 { return max(p.T.OtherCPUs, p.F.OtherCPUs, p.C.OtherCPUs) }

// summary is one scenario's outcome.
type summary struct {
	S        *Scenario
	Pairs    []pair
	Note     string
	Verified *Verified // nil: not verified (-verify=false)
}

func runScenario(ctx context.Context, o *options, s *Scenario, genDigest string, pids *PIDFile) (summary, error) {
	sum := summary{S: s}
	fmt.Printf("== %s: %s\n", s.Name, s.Title)
	pcaps := s.PcapPaths(o.cache, genDigest)
	for q, p := range pcaps {
		if err := ensurePcap(ctx, o.bin, p, s.GenArgs(q)); err != nil {
			return sum, err
		}
	}
	if o.verify {
		v, err := verifyScenario(ctx, o, s, genDigest, pids)
		if err != nil {
			return sum, err
		}
		sum.Verified = &v
		fmt.Printf("   verified: %s frames of a sample went to the backend their flow's Maglev table names (conntrack %d per worker)\n", v, s.ctCapacity())
	}
	lcores, lcoreMap, fulcrumSkip := "0,1", "", ""
	if w := s.workers(); w > 1 {
		lcores = "0-" + fmt.Sprint(w)
		if runtime.NumCPU() < w+1 {
			// Both programs' main lcores only wait or print statistics, so
			// they share a CPU with the first forwarding lcore.
			lcores = "0@0,1@0,2@1"
			lcoreMap = lcores
			sum.Note = fmt.Sprintf("main lcore shares CPU 0 with worker 1 (%d CPUs)", runtime.NumCPU())
		}
	}
	var firstErr error
	pairs := o.pairs
	if fulcrumSkip != "" {
		pairs = 1 // testpmd alone: its two-queue ceiling, once
	}
	for i := 1; i <= pairs; i++ {
		// The machine may be shared: a pair during which other programs
		// took more than -max-other CPUs is measured again (-retries
		// times), and the quietest attempt kept, flagged if still noisy.
		var best pair
		for attempt := 0; attempt <= o.retries; attempt++ {
			tag := fmt.Sprint(i)
			if attempt > 0 {
				tag += fmt.Sprintf("r%d", attempt)
			}
			began := time.Now()
			p, err := runPair(ctx, o, s, pcaps, lcores, lcoreMap, fulcrumSkip, tag, pids)
			if err != nil {
				return sum, err
			}
			if attempt > 0 {
				o.retryLeft -= time.Since(began)
			}
			if attempt == 0 || p.noise() < best.noise() {
				best = p
			}
			if p.TErr != nil || p.FErr != nil || p.CErr != nil || p.noise() <= o.maxOther || o.retryLeft <= 0 {
				break
			}
			if attempt < o.retries {
				fmt.Printf("   pair %d: other programs used %.2f CPUs beside the measured one (limit %.2f): measuring the pair again\n", i, p.noise(), o.maxOther)
			}
		}
		best.Noisy = best.noise() > o.maxOther
		for _, e := range []error{best.TErr, best.FErr, best.CErr} {
			if e != nil && !errorsIsSkipped(e) && firstErr == nil {
				firstErr = e
			}
		}
		sum.Pairs = append(sum.Pairs, best)
	}
	printScenario(os.Stdout, &sum, o.maxOther)
	return sum, firstErr
}

// runPair measures testpmd (A), then Fulcrum (B), then, with -cref on a
// scenario that has CRef, the C pipeline. Its error is a setup error or an
// interruption; a run that could not be measured is in the pair's
// TErr/FErr/CErr, and the others are measured all the same.
func runPair(ctx context.Context, o *options, s *Scenario, pcaps []string, lcores, lcoreMap, fulcrumSkip, tag string, pids *PIDFile) (pair, error) {
	var p pair
	var nice []string
	if o.nice != 0 {
		nice = []string{"nice", "-n", fmt.Sprint(o.nice)}
	}
	// testpmdJob runs bin with testpmd's command line for the scenario,
	// under this pair's file prefix ending in suffix: testpmd itself, or
	// the C pipeline, which takes the same line and prints testpmd's
	// statistics.
	testpmdJob := func(label, bin, suffix string, env []string) (*Job, error) {
		prefix := fmt.Sprintf("%s-%s-%s-%s", o.prefix, s.Name, tag, suffix)
		args, err := s.TestpmdArgs(prefix, pcaps, lcores)
		if err != nil {
			return nil, err
		}
		argv := append(append(slices.Clone(nice), "stdbuf", "-oL", bin), args...) // testpmd block-buffers stdout into a pipe
		return &Job{Label: label, Argv: argv, Env: env, Prefix: prefix, LogPath: filepath.Join(o.work, prefix+".log"), Parser: newTestpmdParser()}, nil
	}
	j, err := testpmdJob("testpmd", o.testpmd, "t", nil)
	if err != nil {
		return p, err
	}
	p.T, p.TErr = Measure(ctx, j, o.tm, pids)
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	if fulcrumSkip != "" {
		p.FErr = fmt.Errorf("%w: %s", errSkipped, fulcrumSkip)
		return p, nil
	}
	fp := fmt.Sprintf("%s-%s-%s-f", o.prefix, s.Name, tag)
	cfg, err := s.FulcrumConfig(fp, pcaps, lcoreMap)
	if err != nil {
		return p, err
	}
	path := filepath.Join(o.work, fp+".toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return p, err
	}
	argv := append(slices.Clone(nice), filepath.Join(o.bin, "fulcrum"), "run", "-c", path, "--stats-interval", "1s", "--stats-json")
	if o.profile != "" {
		argv = append(argv, "--cpu-profile", filepath.Join(o.profile, fp+".pprof"))
	}
	p.F, p.FErr = Measure(ctx, &Job{Label: "fulcrum", Argv: argv, Env: []string{"GODEBUG=gctrace=1"}, Prefix: fp, LogPath: filepath.Join(o.work, fp+".log"), Parser: newFulcrumParser(s.workers())}, o.tm, pids)
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	if o.cref == "" || !s.CRef {
		return p, nil
	}
	// The C pipeline, its conntrack sized as Fulcrum's is.
	if j, err = testpmdJob("cref", o.cref, "c", []string{fmt.Sprintf("CREF_CT_CAPACITY=%d", s.ctCapacity())}); err != nil {
		return p, err
	}
	p.C, p.CErr = Measure(ctx, j, o.tm, pids)
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	return p, nil
}

func errorsIsSkipped(err error) bool { return errors.Is(err, errSkipped) }

// genTimeout bounds one fulcrum-gen run.
const genTimeout = 10 * time.Minute

// ensurePcap writes the pcap unless the cache has it already.
func ensurePcap(ctx context.Context, bin, path string, args []string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	tmp := path + ".tmp"
	// Writing a 1M-frame pcap takes seconds; a generator that hangs must
	// not hang the run.
	ctx, cancel := context.WithTimeout(ctx, genTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "fulcrum-gen"), append([]string{"-o", tmp}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fulcrum-gen %s: %w", strings.Join(args, " "), err)
	}
	fmt.Printf("   generated %s: %s", filepath.Base(path), strings.TrimPrefix(strings.Replace(string(out), tmp, filepath.Base(path), 1), "fulcrum-gen: "))
	return os.Rename(tmp, path)
}

// ratio and ns are per pair: adjacent runs see the same machine load.
func (p *pair) ok() bool       { return p.TErr == nil && p.FErr == nil && p.T.Mpps > 0 && p.F.Mpps > 0 }
func (p *pair) ratio() float64 { return p.F.Mpps / p.T.Mpps }

// ns is the time per packet Fulcrum spends beyond testpmd's io forwarding:
// 1/F - 1/T, in nanoseconds.
func (p *pair) ns() float64 { return 1e3/p.F.Mpps - 1e3/p.T.Mpps }

// cOK: the C pipeline ran in this pair and was measured.
func (p *pair) cOK() bool { return p.CErr == nil && p.C.Mpps > 0 }

// tcOK: testpmd and the C pipeline were both measured (C/testpmd).
func (p *pair) tcOK() bool { return p.cOK() && p.TErr == nil && p.T.Mpps > 0 }

// cRatio is the C pipeline's rate over testpmd's (tcOK), fcRatio
// Fulcrum's over the C pipeline's (ok and cOK).
func (p *pair) cRatio() float64  { return p.C.Mpps / p.T.Mpps }
func (p *pair) fcRatio() float64 { return p.F.Mpps / p.C.Mpps }

// cMpps is the C pipeline's cell: its rate, "failed", or "-" when not run.
func cMpps(p *pair) string {
	if p.CErr == nil && p.C.Mpps <= 0 {
		return "-"
	}
	return mpps(p.C, p.CErr)
}

func printScenario(w io.Writer, s *summary, maxOther float64) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pair\ttestpmd Mpps\tFulcrum Mpps\tratio\tFulcrum ns/pkt\tnew Mflows/s per core\tC Mpps\tC/testpmd\tFulcrum/C\tRSS testpmd MiB\tRSS Fulcrum MiB\tGo heap MiB\tGC in window/run\tslowest interval T/F %\tct miss %\tother load T/F (CPUs)\tother load C (CPUs)\t")
	for i, p := range s.Pairs {
		label := fmt.Sprint(i + 1)
		if p.Noisy {
			label += "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t", label, mpps(p.T, p.TErr), mpps(p.F, p.FErr))
		if p.ok() {
			fmt.Fprintf(tw, "%.3f\t%.1f\t%.3f\t", p.ratio(), p.ns(), p.F.NewMfps/float64(s.S.workers()))
		} else {
			fmt.Fprint(tw, "-\t-\t-\t")
		}
		fmt.Fprintf(tw, "%s\t", cMpps(&p))
		if p.tcOK() {
			fmt.Fprintf(tw, "%.3f\t", p.cRatio())
		} else {
			fmt.Fprint(tw, "-\t")
		}
		if p.ok() && p.cOK() {
			fmt.Fprintf(tw, "%.3f\t", p.fcRatio())
		} else {
			fmt.Fprint(tw, "-\t")
		}
		fmt.Fprintf(tw, "%s\t%s\t", mib(p.T, p.TErr), mib(p.F, p.FErr))
		if p.FErr == nil {
			gc := ""
			if p.F.MinGC {
				gc = " (GC)"
			}
			fmt.Fprintf(tw, "%d\t%d/%d\t%.0f/%.0f%s\t%.2f\t", p.F.HeapMB, p.F.GCWindow, p.F.GCTotal, p.T.MinPct, p.F.MinPct, gc, p.F.CTMissPct)
		} else {
			fmt.Fprint(tw, "-\t-\t-\t-\t")
		}
		fmt.Fprintf(tw, "%.2f/%.2f\t", p.T.OtherCPUs, p.F.OtherCPUs)
		if p.cOK() {
			fmt.Fprintf(tw, "%.2f\t\n", p.C.OtherCPUs)
		} else {
			fmt.Fprint(tw, "-\t\n")
		}
	}
	if m, ok := s.medians(); ok {
		fmt.Fprintf(tw, "median\t%.2f\t%.2f\t%.3f\t%.1f\t%.3f\t", m.T, m.F, m.Ratio, m.NS, m.NewMfps/float64(s.S.workers()))
		if m.NC > 0 {
			fmt.Fprintf(tw, "%.2f\t%.3f\t%.3f\t", m.C, m.CRatio, m.FC)
		} else {
			fmt.Fprint(tw, "-\t-\t-\t")
		}
		fmt.Fprint(tw, "\t\t\t\t\t\t\t\t\n")
	}
	tw.Flush()
	if m, ok := s.medians(); ok && m.Noisy > 0 {
		if m.N > 0 && m.N < len(s.Pairs) {
			fmt.Fprintf(w, "   * other programs used more than %.2f CPUs during this pair: left out of the median\n", maxOther)
		} else {
			fmt.Fprintf(w, "   * other programs used more than %.2f CPUs during these pairs: every pair was noisy, the median is of noisy pairs\n", maxOther)
		}
	}
	for i, p := range s.Pairs {
		for _, e := range []error{p.TErr, p.FErr, p.CErr} {
			if e != nil {
				fmt.Fprintf(w, "   pair %d: %v\n", i+1, e)
			}
		}
	}
	if s.Note != "" && len(s.Pairs) == 0 {
		fmt.Fprintf(w, "   %s\n", s.Note)
	}
	fmt.Fprintln(w)
}

func mpps(r Result, err error) string {
	if err != nil {
		if errorsIsSkipped(err) {
			return "skipped"
		}
		return "failed"
	}
	return fmt.Sprintf("%.2f", r.Mpps)
}

func mib(r Result, err error) string {
	if err != nil {
		return "-"
	}
	return fmt.Sprintf("%d", r.HWMkB/1024)
}

// medians of a scenario over the pairs that measured both programs.
type medians struct {
	T, F, Ratio, NS, MinRatio, MaxRatio float64
	N                                   int
	TMiB, FMiB, HeapMB                  uint64
	GCWindow, GCTotal                   int
	CTMiss                              float64
	NewMfps                             float64 // all workers
	Other                               float64
	Noisy                               int // pairs left out (or, if every pair was noisy, kept) for other programs' load
	MinPctT, MinPctF                    float64
	// The C pipeline, over those of the pairs above that measured it
	// too (NC of them; 0: none, the figures are not set): its rate, its
	// ratio to testpmd, Fulcrum's ratio to it.
	C, CRatio, FC float64
	NC            int
}

func (s *summary) medians() (medians, bool) {
	var t, f, r, ns, ct, other, nf, c, cr, fc []float64
	var m medians
	m.MinRatio = math.Inf(1)
	m.MinPctT, m.MinPctF = 100, 100
	clean := 0
	for _, p := range s.Pairs {
		if p.ok() && !p.Noisy {
			clean++
		}
		if p.ok() && p.Noisy {
			m.Noisy++
		}
	}
	for _, p := range s.Pairs {
		// Noisy pairs count only when there is nothing else.
		if !p.ok() || (p.Noisy && clean > 0) {
			continue
		}
		t, f, r, ns = append(t, p.T.Mpps), append(f, p.F.Mpps), append(r, p.ratio()), append(ns, p.ns())
		ct, other = append(ct, p.F.CTMissPct), append(other, max(p.T.OtherCPUs, p.F.OtherCPUs))
		nf = append(nf, p.F.NewMfps)
		m.MinRatio, m.MaxRatio = min(m.MinRatio, p.ratio()), max(m.MaxRatio, p.ratio())
		m.TMiB, m.FMiB = max(m.TMiB, p.T.HWMkB/1024), max(m.FMiB, p.F.HWMkB/1024)
		m.HeapMB = max(m.HeapMB, uint64(p.F.HeapMB))
		m.GCWindow, m.GCTotal = m.GCWindow+p.F.GCWindow, m.GCTotal+p.F.GCTotal
		m.MinPctT, m.MinPctF = min(m.MinPctT, p.T.MinPct), min(m.MinPctF, p.F.MinPct)
		if p.cOK() {
			c, cr, fc = append(c, p.C.Mpps), append(cr, p.cRatio()), append(fc, p.fcRatio())
		}
	}
	if len(t) == 0 {
		return m, false
	}
	m.N = clean
	m.T, m.F, m.Ratio, m.NS, m.CTMiss, m.Other = median(t), median(f), median(r), median(ns), median(ct), median(other)
	m.NewMfps = median(nf)
	if m.NC = len(c); m.NC > 0 {
		m.C, m.CRatio, m.FC = median(c), median(cr), median(fc)
	}
	return m, true
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// markdown is the summary table for docs/benchmarks.md: one row per
// scenario. The C pipeline's columns are medians over the pairs that
// measured all three programs, "-" where it did not run (no -cref, or a
// scenario without CRef).
func markdown(sums []summary, o *options) string {
	var b strings.Builder
	b.WriteString("| scenario | pairs | testpmd Mpps | Fulcrum Mpps | ratio (min-max) | Fulcrum ns/pkt | new Mflows/s per core | C pipeline Mpps (ratio to testpmd) | Fulcrum / C | verified frames | peak RSS testpmd / Fulcrum MiB | Go heap MiB | GC in windows / runs | slowest interval T / F % | ct miss % | other load CPUs |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for i := range sums {
		s := &sums[i]
		m, ok := s.medians()
		if !ok {
			t := "-"
			var tv []float64
			for _, p := range s.Pairs {
				if p.TErr == nil {
					tv = append(tv, p.T.Mpps)
				}
			}
			if len(tv) > 0 {
				t = fmt.Sprintf("%.2f", median(tv))
			}
			// The C pipeline against testpmd, where both were measured.
			cp := "-"
			var cv, crv []float64
			for _, p := range s.Pairs {
				if p.tcOK() {
					cv, crv = append(cv, p.C.Mpps), append(crv, p.cRatio())
				}
			}
			if len(cv) > 0 {
				cp = fmt.Sprintf("%.2f (%.3f)", median(cv), median(crv))
			}
			reason := "failed"
			if s.Note != "" {
				reason = "not run: " + s.Note
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | | | | %s | - | %s | | | | | | |\n", s.S.Name, len(s.Pairs), t, reason, cp, verified(s))
			continue
		}
		cp, fc := "-", "-"
		if m.NC > 0 {
			cp, fc = fmt.Sprintf("%.2f (%.3f)", m.C, m.CRatio), fmt.Sprintf("%.3f", m.FC)
		}
		pairs := fmt.Sprint(m.N)
		if m.N == 0 {
			pairs = fmt.Sprintf("%d noisy", m.Noisy)
		} else if m.Noisy > 0 {
			pairs += fmt.Sprintf(" (+%d noisy)", m.Noisy)
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.3f (%.3f-%.3f) | %.1f | %.3f | %s | %s | %s | %d / %d | %d | %d / %d | %.0f / %.0f | %.2f | %.2f |\n",
			s.S.Name, pairs, m.T, m.F, m.Ratio, m.MinRatio, m.MaxRatio, m.NS, m.NewMfps/float64(s.S.workers()), cp, fc, verified(s), m.TMiB, m.FMiB, m.HeapMB, m.GCWindow, m.GCTotal, m.MinPctT, m.MinPctF, m.CTMiss, m.Other)
	}
	return b.String()
}

// verified is the summary's verification column: checked frames that went
// to their backend, of the sample, or "no" when not verified.
func verified(s *summary) string {
	if s.Verified == nil {
		return "no"
	}
	return s.Verified.String()
}

// machine describes the host for the record: CPU model, CPUs, memory,
// kernel, DPDK, load.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	var u syscall.Utsname
	kernel := ""
	if syscall.Uname(&u) == nil {
		kernel = utsString(u.Release[:])
	}
	dpdk := "?"
	if out, err := exec.Command("pkg-config", "--modversion", "libdpdk").Output(); err == nil {
		dpdk = strings.TrimSpace(string(out))
	}
	memGiB := float64(procKB("/proc/meminfo", "MemTotal:")) / (1 << 20)
	return fmt.Sprintf("machine: %s, %d CPUs, %.1f GiB, Linux %s, DPDK %s, %s; load average before: %s",
		model, runtime.NumCPU(), memGiB, kernel, dpdk, runtime.Version(), loadavg())
}

func utsString(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func fileDigest(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("fulcrum-gen binary: %w (build it with `go build -o DIR/ ./cmd/fulcrum-gen` and pass -bin DIR)", err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// digest names a cached file by what made it.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
