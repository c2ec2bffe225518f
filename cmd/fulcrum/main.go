// Command fulcrum is the Fulcrum load balancer daemon.
//
//	fulcrum run   -c fulcrum.toml   forward traffic until SIGTERM/SIGINT (SIGHUP reloads)
//	fulcrum check -c fulcrum.toml   validate and print the effective configuration
//	fulcrum version
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage:
  fulcrum run -c FILE [--log-format text|json] [--exit-when-idle DURATION]
  fulcrum check -c FILE
  fulcrum version
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
		fmt.Fprintf(stdout, "fulcrum %s (%s, %s/%s, dpdk %s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, dpdkSupport)
		return 0
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "fulcrum: unknown command %q\n%s", args[0], usage)
	return 2
}

func loadConfig(fs *flag.FlagSet, path string, stderr io.Writer) (*config.Config, int) {
	if path == "" {
		fmt.Fprintf(stderr, "fulcrum %s: -c FILE is required\n", fs.Name())
		return nil, 2
	}
	cfg, err := config.Load(path)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") { // config.Errors: one problem a line
			fmt.Fprintf(stderr, "fulcrum: %s\n", line)
		}
		return nil, 2
	}
	return cfg, 0
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "", "configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, code := loadConfig(fs, *path, stderr)
	if cfg == nil {
		return code
	}
	// config.Load validated everything; the tables are built to print them.
	svc, err := control.BuildServices(cfg, nil, nil, dataplane.NextHop{})
	if err != nil {
		fmt.Fprintf(stderr, "fulcrum: %s: %v\n", cfg.File, err)
		return 2
	}
	out, err := cfg.Encode()
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

func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch strings.ToLower(format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, errors.New("--log-format must be text or json")
}
