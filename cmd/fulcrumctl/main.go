// Command fulcrumctl talks to a running fulcrum daemon through its admin
// API, the way HAProxy's runtime socket is used: show the state, drain a
// backend, change a weight, ask where a flow goes, reload.
//
//	fulcrumctl [--addr 127.0.0.1:9180 | --addr unix:/path] [--token T] [--ca FILE] [--json] COMMAND
//
// Human-readable tables by default; --json prints the API's JSON. Exit
// codes: 0 ok, 1 the API refused or could not be reached, 2 bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/internal/errwriter"
)

const usage = `usage: fulcrumctl [flags] COMMAND [ARGS]

commands:
  status                          control plane and per-worker counters
  vips                            every VIP with its totals
  backends VIP                    a VIP's backends (health, weight, drain, flows, packets)
  drain VIP BACKEND               stop new flows to a backend; its flows stay
  undrain VIP BACKEND             let it take new flows again (slow start)
  weight VIP BACKEND N            set a backend's weight (0..65535) until a reload changes it
  lookup SRC DST SPORT DPORT [tcp|udp]
                                  which backend a flow goes to, and why
  table VIP                       the VIP's Maglev table, one slot a line (compare instances)
  reload                          re-read the daemon's configuration file
  show                            every VIP with its backends, states, weights,
                                  flows and rates, in one table
  conns [--vip V] [--backend B] [--limit N]
                                  tracked connections (client, VIP, backend,
                                  state, idle, worker); at most N (default 100)
  flush --backend B [--vip V]     drop a backend's tracked connections: their
                                  next packets are placed by the table again
  capture [--vip V] [--backend B] [--drops [REASON]] [--count N] [--duration D] -w FILE
                                  frames received, sent and dropped, as pcapng
                                  (FILE "-": stdout); the comment of each frame
                                  says rx, tx or drop REASON and the worker

A VIP is its name, or ADDRESS:PORT; a BACKEND is its name or address.

flags (before or after the command):
  --addr ADDR      admin API: host:port, unix:/path or http(s)://... (default
                   $FULCRUM_ADDR or 127.0.0.1:9180)
  --token TOKEN    bearer token (default $FULCRUM_TOKEN): drain, undrain,
                   weight, flush, capture and reload need it; off loopback
                   every call does
  --ca FILE        speak TLS to host:port and trust the PEM certificate(s) in
                   FILE (default $FULCRUM_CA); an https:// address uses the
                   system's roots without it
  --insecure       speak TLS without checking the certificate (tests only)
  --json           print the API's JSON instead of tables
  --timeout D      give up on the daemon after D (default 30s)
  --vip V, --backend B, --limit N
                   select for conns and flush; a backend name or address
                   that only one VIP has needs no --vip
`

// Exit codes.
const (
	exitOK    = 0
	exitAPI   = 1
	exitUsage = 2
)

const defaultAddr = "127.0.0.1:9180"

// maxWeight is the largest weight (config.MaxWeight).
const maxWeight = 65535

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command line the user must fix.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// run is main without the exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fulcrumctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", envOr("FULCRUM_ADDR", defaultAddr), "")
	token := fs.String("token", os.Getenv("FULCRUM_TOKEN"), "")
	caFile := fs.String("ca", os.Getenv("FULCRUM_CA"), "")
	insecure := fs.Bool("insecure", false, "")
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	var sel selection
	fs.Var((*onceString)(&sel.vip), "vip", "")
	fs.Var((*onceString)(&sel.backend), "backend", "")
	fs.IntVar(&sel.limit, "limit", defaultConnsLimit, "")
	fs.BoolVar(&sel.drops, "drops", false, "")
	fs.IntVar(&sel.count, "count", 0, "")
	fs.DurationVar(&sel.duration, "duration", 0, "")
	fs.StringVar(&sel.file, "w", "", "")
	help := fs.Bool("help", false, "")
	fs.BoolVar(help, "h", false, "")

	pos, err := parseInterleaved(fs, args)
	if err != nil {
		fmt.Fprintf(stderr, "fulcrumctl: %v\n\n%s", err, usage)
		return exitUsage
	}
	if *help || (len(pos) > 0 && pos[0] == "help") {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	if len(pos) == 0 {
		fmt.Fprintf(stderr, "fulcrumctl: no command\n\n%s", usage)
		return exitUsage
	}
	cmd, ok := commands[pos[0]]
	if !ok {
		fmt.Fprintf(stderr, "fulcrumctl: unknown command %q\n\n%s", pos[0], usage)
		return exitUsage
	}
	if n := len(pos) - 1; n < cmd.minArgs || n > cmd.maxArgs {
		fmt.Fprintf(stderr, "fulcrumctl: usage: fulcrumctl %s\n", cmd.usage)
		return exitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "fulcrumctl: --timeout %v: must be positive\n", *timeout)
		return exitUsage
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// A selector the command does not use is refused, not dropped: "drain
	// web be1 --backend be2" must not drain be1 silently.
	for _, name := range []string{"vip", "backend", "limit", "drops", "count", "duration", "w"} {
		if given[name] && !strings.Contains(" "+cmd.flags+" ", " "+name+" ") {
			fmt.Fprintf(stderr, "fulcrumctl %s: %s: not a flag of %s\nusage: fulcrumctl %s\n", pos[0], flagName(name), pos[0], cmd.usage)
			return exitUsage
		}
	}
	addrSrc, tokenSrc := "--addr", "--token"
	if !given["addr"] && os.Getenv("FULCRUM_ADDR") != "" {
		addrSrc = "FULCRUM_ADDR"
	}
	if !given["token"] && os.Getenv("FULCRUM_TOKEN") != "" {
		tokenSrc = "FULCRUM_TOKEN"
	}
	// The daemon trims the token it reads and the one it is sent: a
	// newline from a file is not part of it. Another control character
	// cannot be sent in a header at all.
	tok := strings.TrimSpace(*token)
	if strings.ContainsFunc(tok, unicode.IsControl) {
		// Not printed: it may be the real token with a stray character.
		fmt.Fprintf(stderr, "fulcrumctl: %s: the token contains a control character: a token is printable text\n", tokenSrc)
		return exitUsage
	}
	// FULCRUM_CA is a default for the addresses that speak TLS: a unix:
	// or http:// address (given, or from FULCRUM_ADDR) takes none, and is
	// not refused for it. An explicit --ca with one still is.
	if !given["ca"] && (strings.HasPrefix(*addr, "unix:") || strings.HasPrefix(*addr, "http://")) {
		*caFile = ""
	}
	c, err := newClientFrom(addrSrc, *addr, tok, *timeout, tlsOptions{caFile: *caFile, insecure: *insecure})
	if err != nil {
		fmt.Fprintf(stderr, "fulcrumctl: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	sel.timeout = *timeout
	// The tables' printers do not return their write errors: one is kept
	// here, so that a closed stdout or a full disk is an error (exit 1)
	// as it is with --json, not a success that printed nothing.
	sw := &errwriter.Writer{W: stdout}
	out := &output{w: sw, json: *asJSON, sel: sel}
	err = cmd.run(ctx, c, out, pos[1:])
	if err == nil && sw.Err != nil {
		err = fmt.Errorf("writing the output: %w", sw.Err)
	}
	if err != nil {
		var nf *notFulcrumError
		if errors.As(err, &nf) {
			nf.at = addrSrc + " " + *addr
		}
		fmt.Fprintf(stderr, "fulcrumctl %s: %v\n", pos[0], err)
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "usage: fulcrumctl %s\n", cmd.usage)
			return exitUsage
		}
		return exitAPI
	}
	return exitOK
}

// onceString is a selector flag (--vip, --backend): given twice it is
// refused, not the last one taken ("flush --backend be1 --backend be2"
// would flush be2 alone).
type onceString string

func (o *onceString) String() string {
	if o == nil {
		return ""
	}
	return string(*o)
}

func (o *onceString) Set(v string) error {
	if *o != "" {
		return fmt.Errorf("given twice (%q, then %q): name one", string(*o), v)
	}
	*o = onceString(v)
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// parseInterleaved parses flags wherever they stand among the positional
// arguments ("fulcrumctl backends web --json"); "--" ends the flags. A
// negative number is a positional argument, not a flag ("weight web be1
// -1" is refused as a weight, not as "flag provided but not defined"),
// unless it is the value of the flag before it ("--limit -5").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if len(args) > 0 && isNegativeNumber(args[0]) {
			pos = append(pos, args[0])
			args = args[1:]
			continue
		}
		n := flagsBefore(fs, args)
		if err := fs.Parse(args[:n]); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// flag stops at "--" (and drops it) or at the first non-flag.
		consumed := n - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil // n is len(args) when there is a "--"
		}
		if len(rest) > 0 {
			pos = append(pos, rest[0])
			consumed++
		}
		if consumed >= len(args) {
			return pos, nil
		}
		args = args[consumed:]
	}
}

// isNegativeNumber reports whether a looks like "-1" or "-0.5": no flag
// name starts with a digit.
func isNegativeNumber(a string) bool {
	return len(a) > 1 && a[0] == '-' && (a[1] >= '0' && a[1] <= '9' || a[1] == '.')
}

// flagsBefore is the index of the first argument that is a negative
// number and not the value of the flag before it, or len(args): the part
// of args flag may parse. A "--" ends the search (what follows it is
// positional).
func flagsBefore(fs *flag.FlagSet, args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return len(args)
		}
		if isNegativeNumber(a) {
			return i
		}
		name, ok := strings.CutPrefix(a, "-")
		if !ok || name == "" {
			continue
		}
		name = strings.TrimPrefix(name, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++ // its value
			}
		}
	}
	return len(args)
}

type command struct {
	usage            string
	minArgs, maxArgs int
	run              func(ctx context.Context, c *client, out *output, args []string) error
	flags            string // the selection flags it takes, by name: "vip backend limit"
}

// flagName is how the usage spells a flag: -w, --vip.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

var commands = map[string]command{
	"status":   {"status", 0, 0, cmdStatus, ""},
	"vips":     {"vips", 0, 0, cmdVIPs, ""},
	"backends": {"backends VIP", 1, 1, cmdBackends, ""},
	"drain":    {"drain VIP BACKEND", 2, 2, cmdAction(api.ActionDrain), ""},
	"undrain":  {"undrain VIP BACKEND", 2, 2, cmdAction(api.ActionUndrain), ""},
	"weight":   {"weight VIP BACKEND N", 3, 3, cmdAction(api.ActionWeight), ""},
	"lookup":   {"lookup SRC DST SPORT DPORT [tcp|udp]", 4, 5, cmdLookup, ""},
	"table":    {"table VIP", 1, 1, cmdTable, ""},
	"reload":   {"reload", 0, 0, cmdReload, ""},
	"show":     {"show", 0, 0, cmdShow, ""},
	"conns":    {"conns [--vip V] [--backend B] [--limit N]", 0, 0, cmdConns, "vip backend limit"},
	"flush":    {"flush --backend B [--vip V]", 0, 0, cmdFlush, "vip backend"},
	"capture":  {"capture [--vip V] [--backend B] [--drops [REASON]] [--count N] [--duration D] -w FILE", 0, 1, cmdCapture, "vip backend drops count duration w"},
}

// output prints either the API's JSON or a human-readable rendering.
type output struct {
	w    io.Writer
	json bool
	sel  selection
}

// selection is --vip, --backend and --limit, and capture's flags.
type selection struct {
	vip, backend string
	limit        int
	drops        bool
	count        int
	duration     time.Duration
	file         string
	timeout      time.Duration // --timeout
}

// show decodes raw into a T and checks it is the API's answer, then
// prints raw (the API's JSON) with --json, or calls human.
func show[T any](out *output, raw []byte, human func(io.Writer, *T)) error {
	var v T
	if err := decodeAnswer(raw, &v); err != nil {
		return err
	}
	if out.json {
		_, err := out.w.Write(raw)
		return err
	}
	human(out.w, &v)
	return nil
}

// checkName refuses a VIP or backend name that cannot be a path segment:
// the daemon's mux cleans "", "." and ".." away and answers for another
// path.
func checkName(kind, name string) error {
	if name == "" || name == "." || name == ".." {
		return usagef("%s %q: not a name (\"\", \".\" and \"..\" name no VIP or backend)", kind, name)
	}
	return nil
}

func cmdStatus(ctx context.Context, c *client, out *output, _ []string) error {
	raw, err := c.do(ctx, "GET", api.StatusPath, nil)
	if err != nil {
		return err
	}
	return show(out, raw, printStatus)
}

func cmdVIPs(ctx context.Context, c *client, out *output, _ []string) error {
	raw, err := c.do(ctx, "GET", api.VIPsPath, nil)
	if err != nil {
		return err
	}
	return show(out, raw, printVIPs)
}

func cmdBackends(ctx context.Context, c *client, out *output, args []string) error {
	if err := checkName("VIP", args[0]); err != nil {
		return err
	}
	raw, err := c.do(ctx, "GET", api.VIPPath(args[0]), nil)
	if err != nil {
		return err
	}
	return show(out, raw, printBackends)
}

func cmdAction(action string) func(context.Context, *client, *output, []string) error {
	return func(ctx context.Context, c *client, out *output, args []string) error {
		if err := checkName("VIP", args[0]); err != nil {
			return err
		}
		if err := checkName("BACKEND", args[1]); err != nil {
			return err
		}
		var body []byte
		if action == api.ActionWeight {
			w, err := strconv.Atoi(args[2])
			switch {
			case err != nil:
				return usagef("weight %q: not an integer in 0..%d", args[2], maxWeight)
			case w < 0:
				return usagef("weight %q: negative; a weight is 0..%d", args[2], maxWeight)
			case w > maxWeight:
				return usagef("weight %q: above the maximum; a weight is 0..%d", args[2], maxWeight)
			}
			body, _ = json.Marshal(api.WeightRequest{Weight: &w})
		}
		raw, err := c.do(ctx, "POST", api.ActionPath(args[0], args[1], action), body)
		if err != nil {
			return err
		}
		return show(out, raw, func(w io.Writer, b *api.Backend) { printAction(w, action, b) })
	}
}

func cmdLookup(ctx context.Context, c *client, out *output, args []string) error {
	var addrs [2]netip.Addr
	for i, name := range []string{"SRC", "DST"} {
		a, err := netip.ParseAddr(args[i])
		switch {
		case err != nil:
			return usagef("%s %q: not an IP address", name, args[i])
		case a.Zone() != "":
			return usagef("%s %q: an address with a zone: give the address alone", name, args[i])
		}
		addrs[i] = a.Unmap() // as the daemon compares them
	}
	if addrs[0].Is4() != addrs[1].Is4() {
		return usagef("SRC %s and DST %s: of different address families", args[0], args[1])
	}
	var ports [2]uint16
	for i, name := range []string{"SPORT", "DPORT"} {
		p, err := strconv.ParseUint(args[2+i], 10, 16)
		if err != nil {
			return usagef("%s %q: not a port (0..65535)", name, args[2+i])
		}
		ports[i] = uint16(p)
	}
	proto := "tcp"
	if len(args) == 5 {
		proto = strings.ToLower(args[4])
		if proto != "tcp" && proto != "udp" {
			return usagef("protocol %q: not tcp or udp", args[4])
		}
	}
	raw, err := c.do(ctx, "GET", api.LookupQuery(args[0], args[1], ports[0], ports[1], proto), nil)
	if err != nil {
		return err
	}
	return show(out, raw, printLookup)
}

func cmdTable(ctx context.Context, c *client, out *output, args []string) error {
	if err := checkName("VIP", args[0]); err != nil {
		return err
	}
	raw, err := c.do(ctx, "GET", api.TablePath(args[0]), nil)
	if err != nil {
		return err
	}
	return show(out, raw, printTable)
}

func cmdReload(ctx context.Context, c *client, out *output, _ []string) error {
	raw, err := c.do(ctx, "POST", api.ReloadPath, nil)
	if err != nil {
		return err
	}
	return show(out, raw, func(w io.Writer, r *api.Reload) {
		fmt.Fprintf(w, "reloaded %s: generation %d, %d VIPs\n", printable(r.File), r.Generation, r.VIPs)
	})
}
