// Command fulcrum is the Fulcrum load balancer daemon.
//
//	fulcrum run   [-c /etc/fulcrum/fulcrum.toml]   forward traffic until SIGTERM/SIGINT (SIGHUP reloads)
//	fulcrum check [-c /etc/fulcrum/fulcrum.toml]   validate and print the effective configuration
//	fulcrum version
package main

import (
	"encoding"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/internal/errwriter"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultConfig is where the package installs the configuration (a
// conffile) and where run and check look without -c.
const defaultConfig = "/etc/fulcrum/fulcrum.toml"

const usage = `Fulcrum: a Maglev L4 load balancer over DPDK.

usage:
  fulcrum run   [-c FILE] [--log-format text|json] [--log-level LEVEL]
                [--stats-interval DURATION] [--stats-json]
                [--exit-when-idle DURATION] [--cpu-profile FILE]
  fulcrum check [-c FILE]
  fulcrum prereq [-c FILE]
  fulcrum version
  fulcrum help

commands:
  run      forward traffic until SIGTERM or SIGINT; SIGHUP reloads the file
           (a rejected file leaves the running configuration in force).
           A SIGTERM/SIGINT during start-up stops it once the EAL is up
           (exit 0); a second one exits at once (exit 1).
           With a [bgp] section the VIPs are announced once forwarding,
           and withdrawn for bgp.drain_time before stopping (a second
           SIGTERM/SIGINT ends the drain at once). Under systemd
           (Type=notify) it reports READY once the ports are up and the
           tables built, RELOADING around a reload and STOPPING.
  check    validate the file as run would and print the effective
           configuration (defaults filled in) and each VIP's Maglev table
           shares; every error names the file and line.
  prereq   check that this host has what the file needs: hugepages
           reserved and mounted for hugepages = true, each [eal] pci
           device present and bound to vfio-pci (or another driver DPDK
           uses); each problem says how to fix it (exit 1).
  version  print the version, Go version and whether DPDK is built in.

FILE defaults to ` + defaultConfig + `. "fulcrum COMMAND --help" lists
the command's flags. Exit status: 0 ok, 1 runtime failure (DPDK, ports,
admin API, BGP), 2 bad usage or bad configuration. See fulcrum(8) and
fulcrumctl for the admin API.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, for tests. Exit codes: 0 ok, 1 runtime
// failure, 2 bad usage or bad configuration.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		if len(args) > 1 {
			switch args[1] {
			case "-h", "-help", "--help":
				fmt.Fprint(stdout, "usage: fulcrum version: print the version, Go version and whether DPDK is built in\n")
				return 0
			}
			fmt.Fprintf(stderr, "fulcrum version: unexpected argument %q: version takes none\n", args[1])
			return 2
		}
		fmt.Fprintf(stdout, "fulcrum %s (%s, %s/%s, dpdk %s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, dpdkSupport)
		return 0
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "prereq":
		return cmdPrereq(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "fulcrum: unknown command %q\n%s", args[0], usage)
	return 2
}

// newFlagSet is a command's flag set; its -h/--help prints the command's
// usage and every flag to stdout (parse then returns flag.ErrHelp). A bad
// flag's message and the usage after it go to stderr: flag writes the
// message before it calls Usage, and asks for help without one.
func newFlagSet(name, synopsis string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	errw := &countingWriter{w: stderr}
	fs.SetOutput(errw)
	fs.Usage = func() {
		w := stdout
		if errw.n > 0 {
			w = stderr // after flag's error message
		}
		fs.SetOutput(w)
		fmt.Fprintf(w, "usage: fulcrum %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
		fs.SetOutput(errw)
	}
	return fs
}

// countingWriter counts what is written through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return c.w.Write(p)
}

// parseFlags parses args into fs; done reports that the command should
// return code now (help asked for: 0; a bad flag: 2).
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	case err != nil:
		return 2, true
	case fs.NArg() > 0:
		fmt.Fprintf(fs.Output(), "fulcrum %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}

// runOptions are fulcrum run's flags.
type runOptions struct {
	config     string
	logFormat  string
	logLevel   string
	exitIdle   time.Duration
	statsEvery time.Duration
	statsJSON  bool
	cpuProfile string
}

// parseRun parses fulcrum run's flags; they live here so that
// "fulcrum run --help" lists them in a build without DPDK too.
func parseRun(args []string, stdout, stderr io.Writer) (o runOptions, code int, done bool) {
	fs := newFlagSet("run", "run [flags]: forward traffic until SIGTERM/SIGINT; SIGHUP reloads", stdout, stderr)
	fs.StringVar(&o.config, "c", defaultConfig, "configuration `file`")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json (one JSON object per line, DPDK's own log included)")
	fs.StringVar(&o.logLevel, "log-level", "info", "least severe level logged: debug, info, warn or error")
	fs.DurationVar(&o.exitIdle, "exit-when-idle", 0, "exit once packets have arrived and then none for `duration` (replaying a pcap); 0: run until signalled")
	fs.DurationVar(&o.statsEvery, "stats-interval", 10*time.Second, "log the counters every `duration` (0: only at exit)")
	fs.BoolVar(&o.statsJSON, "stats-json", false, "write the counters every stats interval to stdout as one JSON object a line (cumulative, summed over the workers and per worker) instead of logging them")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a Go CPU profile (pprof) of the whole run to `file`, written at exit: for `go tool pprof`, and the source of the build's profile-guided optimization (make pgo)")
	if code, done = parseFlags(fs, args); done {
		return o, code, done
	}
	// A negative duration is a typo, not "off": refused before anything
	// starts, as every other bad flag.
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"stats-interval", o.statsEvery}, {"exit-when-idle", o.exitIdle}} {
		if d.v < 0 {
			fmt.Fprintf(stderr, "fulcrum run: --%s %v: must be 0 or positive\n", d.flag, d.v)
			return o, 2, true
		}
	}
	return o, 0, false
}

func loadConfig(fs *flag.FlagSet, path string, stderr io.Writer) (*config.Config, int) {
	if path == "" {
		fmt.Fprintf(stderr, "fulcrum %s: -c FILE is required\n", fs.Name())
		return nil, 2
	}
	cfg, err := config.Load(path)
	if err != nil {
		for _, line := range config.Lines(err) {
			fmt.Fprintf(stderr, "fulcrum: %s\n", line)
		}
		return nil, 2
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "fulcrum: warning: %s\n", w)
	}
	return cfg, 0
}

// fileCommand parses the flags of a command whose only flag is -c FILE
// and loads the file; a nil Config means return code now.
func fileCommand(name, synopsis string, args []string, stdout, stderr io.Writer) (*config.Config, int) {
	fs := newFlagSet(name, synopsis, stdout, stderr)
	path := fs.String("c", defaultConfig, "configuration `file`")
	if code, done := parseFlags(fs, args); done {
		return nil, code
	}
	return loadConfig(fs, *path, stderr)
}

func cmdCheck(args []string, stdout, stderr io.Writer) (code int) {
	cfg, code := fileCommand("check", "check [flags]: validate the file and print the effective configuration and Maglev tables", args, stdout, stderr)
	if cfg == nil {
		return code
	}
	// config.Load validated everything; the tables are built to print
	// them, by the control plane as `fulcrum run` builds its first ones:
	// a backend written with drain = true takes no slot, and weights are
	// scaled as the daemon scales them.
	shared := &dataplane.Shared{}
	if _, err := control.New(cfg, shared, nil, slog.New(slog.DiscardHandler)); err != nil {
		fmt.Fprintf(stderr, "fulcrum: %s: %v\n", cfg.File, err)
		return 2
	}
	svc := shared.Services.Load()
	// A failed write (stdout closed, a full disk) is an error, not a
	// valid configuration with its output lost.
	ow := &errwriter.Writer{W: stdout}
	stdout = ow
	defer func() {
		if ow.Err != nil && code == 0 {
			fmt.Fprintf(stderr, "fulcrum check: writing the output: %v\n", ow.Err)
			code = 1
		}
	}()
	// Secrets written in the file are not printed: the output goes to
	// terminals and logs (config.RedactedSecret, which Parse refuses).
	out, err := cfg.Redacted().Encode()
	if err != nil {
		fmt.Fprintf(stderr, "fulcrum: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "# %s: valid. Effective configuration, defaults filled in:\n%s\n", cfg.File, out)
	fmt.Fprintln(stdout, "# Maglev tables:")
	for _, v := range svc.VIPs {
		if v == nil {
			continue
		}
		if v.Table == nil {
			fmt.Fprintf(stdout, "#   vip %q %s: no backend takes new flows\n", v.Name, v.Addr)
			continue
		}
		fmt.Fprintf(stdout, "#   vip %q %s port %d proto %d encap %s: M=%d\n", v.Name, v.Addr, v.Port, v.Proto, v.Encap, v.Table.Size())
		type share struct {
			name  string
			slots int
		}
		var sh []share
		for i := 0; i < v.Table.Len(); i++ {
			sh = append(sh, share{v.Table.Backend(i).Key, v.Table.Count(i)})
		}
		sort.Slice(sh, func(a, b int) bool { return sh[a].name < sh[b].name })
		for _, s := range sh {
			fmt.Fprintf(stdout, "#     %-20s %7d slots %6.2f%%\n", s.name, s.slots, 100*float64(s.slots)/float64(v.Table.Size()))
		}
	}
	return 0
}

// newLogger is the daemon's logger: every package's, DPDK's (through
// dpdk.SetLogger) and the standard log package's (slog.SetDefault in
// run). Durations and MAC addresses are written as text ("1.5s",
// "02:00:00:00:00:01"), not as nanoseconds or base64.
func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: must be debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: textValues}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: must be text or json", format)
}

// textValues writes a duration or a Stringer that has no JSON or text
// form of its own (net.HardwareAddr) as its String.
func textValues(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, a.Value.Duration().String())
	case slog.KindAny:
		v := a.Value.Any()
		if _, ok := v.(error); ok {
			return a
		}
		if _, ok := v.(json.Marshaler); ok {
			return a
		}
		if _, ok := v.(encoding.TextMarshaler); ok {
			return a
		}
		if s, ok := v.(fmt.Stringer); ok {
			return slog.String(a.Key, s.String())
		}
	}
	return a
}

// buildInfo is what the start-up line says about this binary: version,
// commit, Go version and DPDK.
func buildInfo() []any {
	out := []any{"version", version, "go", runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision", "vcs.time", "vcs.modified":
				out = append(out, s.Key, s.Value)
			}
		}
	}
	return append(out, "dpdk", dpdkVersion())
}
