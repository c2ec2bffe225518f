// Command fulcrum-sim shows what Fulcrum's backend selection does, without
// a dataplane: the Maglev table an operator gets for a backend set, the seed
// chapter's comparison of modulo, ring and Maglev hashing, and what each
// scheduler (package sched, the code the dataplane runs for a new flow)
// does to latency and to a slow backend.
//
//	fulcrum-sim table --backends NAME[:WEIGHT],... [--size M] [--summary]
//	fulcrum-sim hashing [--flows 500000] [--seed 7]
//	fulcrum-sim policies [--servers 10] [--load 0.8] [--requests 200000] [--seed 3]
//	fulcrum-sim slow [--clients 32] [--requests 30000] [--warmup 3000] [--seed 3]
//	fulcrum-sim ewma NAME... < commands
//
// Exit status: 0 on success, 2 on a usage error or bad input (the message on
// stderr names the bad part), 1 if the output cannot be written. ewma
// reports a bad command line on stderr and carries on; it exits 0 once its
// input ends.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fulcrumlb/fulcrum/cmd/fulcrum-sim/internal/sim"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/maglev"
)

const usage = `usage: fulcrum-sim <command> [flags]

commands:
  table     print the Maglev table for a backend set
  hashing   compare modulo, ring and Maglev hashing (the load-balancing chapter, section 3.4)
  policies  mean and p99 latency per scheduling rule: the chapter's section 1.1
            queueing experiment, plus least-connections, peak EWMA and
            random(2) with and without distinct draws
  slow      one slow server among fast ones in a closed loop (section 4.2, and
            the HAProxy random(<draws>) patch's farms): the share of requests
            each rule sends to the slow servers, and the latencies
  ewma      the EWMA least-response-time exercise: reads PICK, DONE <name> <ms>
            and STATUS lines on stdin for the named backends

Run "fulcrum-sim <command> -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// errUsage marks errors after which the user needs the usage text, not just
// the message; flag has already printed it.
var errUsage = errors.New("usage")

// run is the whole command, testable: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "table":
		err = runTable(args[1:], stdout, stderr)
	case "hashing":
		err = runHashing(args[1:], stdout, stderr)
	case "policies":
		err = runPolicies(args[1:], stdout, stderr)
	case "slow":
		err = runSlow(args[1:], stdout, stderr)
	case "ewma":
		err = runEWMA(args[1:], stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "fulcrum-sim: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	var out outputError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &out):
		fmt.Fprintf(stderr, "fulcrum-sim %s: %v\n", args[0], err)
		return 1
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "fulcrum-sim %s: %v\n", args[0], err)
		return 2
	}
}

// outputError is a failure to write the results (exit status 1), as opposed
// to bad input (2).
type outputError struct{ err error }

func (e outputError) Error() string { return "write output: " + e.err.Error() }
func (e outputError) Unwrap() error { return e.err }

// parseFlags parses a subcommand's flags and refuses positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage // flag printed the error and the usage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: the command takes only flags (see -h)", fs.Arg(0))
	}
	return nil
}

func runTable(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fulcrum-sim table", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("backends", "", "backends as `NAME[:WEIGHT],...`; the text after a name's last ':' is its weight\n"+
		"(default 1, 0 takes it out of the table; at most 65535, as in the configuration), so a name containing ':' needs an explicit weight: 10.0.0.1:80:1")
	size := fs.Uint64("size", maglev.DefaultSize, "table size `M`, a prime larger than the number of backends")
	summary := fs.Bool("summary", false, "print each backend's slot count and share instead of the slots")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *spec == "" {
		return errors.New("--backends is required, e.g. --backends a,b:2,c")
	}
	backends, err := parseBackends(*spec)
	if err != nil {
		return err
	}
	t, err := maglev.Build(backends, *size)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	if *summary {
		writeSummary(w, t)
	} else {
		for s := range t.Size() {
			fmt.Fprintf(w, "%d %s\n", s, t.Backend(t.Slot(s)).Key)
		}
	}
	if err := w.Flush(); err != nil {
		return outputError{err}
	}
	return nil
}

// parseBackends reads NAME[:WEIGHT],... . Errors name the entry at fault.
func parseBackends(spec string) ([]maglev.Backend, error) {
	var bs []maglev.Backend
	for i, item := range strings.Split(spec, ",") {
		name, weight := item, uint32(1)
		if j := strings.LastIndexByte(item, ':'); j >= 0 {
			name = item[:j]
			// An IPv6 address without a weight ("2001:db8::1"): its
			// last group would be read as the weight of the name
			// "2001:db8:", a key no configuration gives it.
			if _, err := netip.ParseAddr(strings.TrimSpace(item)); err == nil {
				if _, err := netip.ParseAddr(strings.TrimSpace(name)); err != nil {
					return nil, fmt.Errorf("backend #%d %q: an IPv6 address needs its weight written after it (%s:1)", i+1, item, strings.TrimSpace(item))
				}
			}
			w := strings.TrimSpace(item[j+1:])
			n, err := strconv.ParseUint(w, 10, 32)
			switch {
			case err == nil && n <= config.MaxWeight:
				weight = uint32(n)
			case strings.HasPrefix(w, "-"):
				return nil, fmt.Errorf("backend #%d %q: weight %q is negative", i+1, item, w)
			case err == nil || errors.Is(err, strconv.ErrRange):
				// The daemon's limit (config, the admin API, fulcrumctl).
				return nil, fmt.Errorf("backend #%d %q: weight %s is too large (at most %d)", i+1, item, w, config.MaxWeight)
			default:
				return nil, fmt.Errorf("backend #%d %q: weight %q is not a whole number", i+1, item, w)
			}
		}
		// The daemon's key: a name has no blanks (config refuses them, so
		// "a, b" lists a and b), and a name that is an address is the
		// address in its standard form, as config keeps it.
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("backend #%d %q: empty name", i+1, item)
		}
		if a, err := netip.ParseAddr(name); err == nil {
			name = a.WithZone("").Unmap().String()
		} else if err := config.CheckName(name); err != nil {
			// A name no configuration can hold builds no daemon's table
			// (and a name not in NFC is written otherwise there).
			return nil, fmt.Errorf("backend #%d: %v", i+1, err)
		}
		bs = append(bs, maglev.Backend{Key: name, Weight: weight})
	}
	return bs, nil
}

func writeSummary(w io.Writer, t *maglev.Table) {
	fmt.Fprintf(w, "table size %d, %d backends (in key order)\n", t.Size(), t.Len())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tweight\tslots\tshare")
	for i := range t.Len() {
		b := t.Backend(i)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f%%\n", b.Key, b.Weight, t.Count(i), 100*float64(t.Count(i))/float64(t.Size()))
	}
	tw.Flush()
}

func runHashing(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fulcrum-sim hashing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	flows := fs.Int("flows", sim.DefaultFlows, "number of random flow hashes to sample")
	seed := fs.Uint64("seed", sim.DefaultSeed, "seed of the flow hashes (Python's random.Random(seed))")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *flows <= 0 || *flows > 100_000_000 {
		return fmt.Errorf("--flows %d: must be between 1 and 100000000", *flows)
	}
	rows, err := sim.Compare(*flows, *seed)
	if err != nil {
		return err
	}
	if err := sim.Write(stdout, rows, *flows, *seed); err != nil {
		return outputError{err}
	}
	return nil
}

func runPolicies(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fulcrum-sim policies", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := sim.DefaultPolicyConfig()
	fs.IntVar(&c.Servers, "servers", c.Servers, "number of servers, each serving one request at a time (FIFO)")
	fs.Float64Var(&c.Load, "load", c.Load, "the fleet's utilisation, at least 0.0001 and below 1: arrivals per ms = load × servers")
	fs.IntVar(&c.Requests, "requests", c.Requests, "number of requests measured")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the random numbers (each rule starts from it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	res, err := sim.Policies(c)
	if err != nil {
		return err
	}
	if err := sim.WritePolicies(stdout, c, res); err != nil {
		return outputError{err}
	}
	return nil
}

func runSlow(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fulcrum-sim slow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := sim.DefaultSlowConfig()
	fs.IntVar(&c.Clients, "clients", c.Clients, "clients in the closed loop, each sending its next request when the last one returns")
	fs.IntVar(&c.Requests, "requests", c.Requests, "number of requests measured")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "requests sent before the measured ones")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the random numbers (each rule starts from it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	res, err := sim.Slow(c)
	if err != nil {
		return err
	}
	if err := sim.WriteSlow(stdout, c, res); err != nil {
		return outputError{err}
	}
	return nil
}

const ewmaUsage = `usage: fulcrum-sim ewma NAME... < commands

Reads one command per line on stdin (the EWMA least-response-time
exercise) for the backends NAME...:
  PICK              print the backend of lowest ewma × (inflight + 1), ties to
                    the smaller name, and count a request in flight on it
  DONE <name> <ms>  end a request: inflight - 1 (never below 0), and blend the
                    latency into the average: ewma = (3*sample + 7*ewma) / 10 in
                    thousandths of a millisecond, truncated; the first sample
                    starts the average
  STATUS            print "<name> ewma=<ms>.<3 digits> inflight=<n>" per backend,
                    sorted by name
A backend without samples has ewma 0 (the exercise's cold-start trap, kept on
purpose). A bad line is reported on stderr and skipped.
`

func runEWMA(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fulcrum-sim ewma", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, ewmaUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	pool, err := sim.NewPool(fs.Args())
	if err != nil {
		return err
	}
	if _, err := pool.Run(stdin, stdout, stderr); err != nil {
		if sim.IsOutputError(err) {
			return outputError{err}
		}
		return err
	}
	return nil
}
