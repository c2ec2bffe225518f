// Command fulcrum-decap is the backend half of Fulcrum's tunnels for hosts
// whose kernel cannot decapsulate them (the lab's kernel has no GRE, IPIP
// or FOU module): it receives the GRE, IPIP and GUE packets the load
// balancer sends, strips the outer headers with package decap and writes
// the inner packet into a TUN device, so the kernel receives the client's
// packet as if it had arrived on that device. The kernel answers the
// client directly from the VIP (direct server return); nothing goes back
// through this agent.
//
//	fulcrum-decap -tun fdecap0 [-gre] [-ipip] [-gue 6080] [-addr LOCAL]...
//
// Production backends use the kernel's own tunnels instead (ip link add
// type gre / ipip / ip6tnl, or ip fou add port 6080 gue), which do the same
// without a copy through user space.
//
// # What the backend needs
//
//   - The VIP as a local address, on lo (ip addr add 203.0.113.7/32 dev lo)
//     or on the TUN device, and the service bound to it (or to 0.0.0.0).
//   - Reverse-path filtering off or loose for the decapsulated packets: the
//     client's address is not routed via the TUN device, so strict mode
//     (rp_filter=1) drops them. The agent sets
//     net.ipv4.conf.<tun>.rp_filter=0 itself; the kernel uses the larger of
//     that and net.ipv4.conf.all.rp_filter, so "all" must be 0 or 2 (the
//     agent warns when it is 1). accept_local is needed only if clients use
//     the backend's own addresses. IPv6 has no rp_filter.
//   - A route back to the clients (the default route): replies leave with
//     the VIP as source, straight to the client.
//   - Only on an L2 segment shared with the LBs or routers that also carry
//     the VIP: arp_ignore=1 and arp_announce=2 (and a VIP on lo, not on a
//     NIC), so the backend never answers ARP for the VIP. With the VIP on
//     lo behind a routed hop, as in the lab, they do not matter.
//
// # Sockets
//
// Raw IPv4 sockets for protocols 47 (GRE), 4 and 41 (IPIP) deliver the
// whole IPv4 packet, which decap.Strip checks; raw IPv6 sockets deliver the
// payload after the IPv6 header (the kernel keeps it), which
// decap.StripPayload checks; a UDP socket on the GUE port delivers the GUE
// header on, which decap.StripGUE checks. With no -addr the sockets take
// every local address of both families; with -addr, only those addresses.
//
// # Second chance
//
// A tunnel header may name a second-chance backend (a GRE key, a GUE
// private data block: docs/second-chance.md). For such a packet, a TCP
// segment that is not a SYN, the agent asks the kernel (one exact
// NETLINK_SOCK_DIAG lookup) whether a local socket other than a listener
// owns its flow; if none does, it forwards the packet once to the named
// backend, in the same kind of tunnel without the field (so it is never
// forwarded again), and only if that address is within -peers and is not
// one of this host's, nor the network or broadcast address of a -peers
// prefix or of a local subnet (and the sockets it sends from have
// SO_BROADCAST off). Without -peers it never forwards; a -peers prefix of
// every address (0.0.0.0/0, ::/0) is refused, as it would let a forged
// field send packets anywhere.
//
// # What is delivered
//
// Only an inner packet whose destination is one of this host's addresses
// (an interface address such as the VIP on lo, or a local route of the
// kernel's local table) is written to the TUN; any other would be routed
// on by a host with ip_forward=1, with its sender's forged source
// (drop.inner-not-local). The addresses are reread every 2 seconds, and at
// once (at most once a second) when a packet names an unknown one, so a
// VIP added later is served. An inner packet from a martian source
// (loopback, unspecified, multicast, 0/8, 240/4, IPv4-mapped, link-local) or to a
// loopback address is dropped (drop.inner-martian). A tunnel inside a
// tunnel is refused by package decap (drop.inner-tunnel). With -lbs, tunnels from an outer
// source outside -lbs and -peers are dropped before they are decapsulated
// (drop.outer-not-lb), and a second chance is acted upon only from -lbs.
//
// # Counters
//
// SIGUSR1 and exit log one "counters" line: packets in per socket
// (in.gre4, in.gre6, in.4in4, in.6in4, in.4in6, in.6in6, in.gue4, in.gue6), written to the TUN per kind (out.gre,
// out.ipip, out.gue), and dropped per reason (drop.gre-flags, drop.tun-write,
// drop.inner-not-local, drop.inner-martian, drop.outer-not-lb ...; the others are decap.Error's
// names), and the second chance's
// (second_chance.in, .forwarded, .local, .skipped, .not-allowed, .self,
// .lookup-error, .no-sender, .send-error). SIGTERM or SIGINT stops it
// cleanly: the sockets close, the TUN device disappears.
//
// Exit status: 0 after SIGTERM/SIGINT, 1 on a runtime failure (no
// permission, no /dev/net/tun), 2 on a bad flag.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fulcrumlb/fulcrum/decap"
)

const usageHead = `usage: fulcrum-decap [-tun NAME] [-gre] [-ipip] [-gue PORT] [-addr LOCAL]... [-peers PREFIX]... [-lbs PREFIX]... [flags]

Receives Fulcrum's GRE, IPIP and GUE tunnel packets (IPv4 or IPv6 outer),
strips the outer headers and writes the inner packets into the TUN device
NAME, where the kernel's stack answers the clients directly (DSR). Only
inner packets addressed to this host (a VIP on lo) are delivered; tunnels
in tunnels are dropped.

With -lbs, tunnels are accepted only from those outer source addresses
(the LBs) and from -peers (second-chance forwards), and a second chance
is acted upon only from -lbs; others are dropped (drop.outer-not-lb).
Without it, anyone who can reach this host can tunnel to it.

Without -gre, -ipip and -gue every kind is accepted, GUE on port 6080; with
any of them, only the kinds named. The VIP must be a local address (on lo),
and net.ipv4.conf.all.rp_filter 0 or 2. SIGUSR1 logs the counters.

flags:
`

// IFNAMSIZ is Linux's interface name buffer, NUL included.
const ifNameSize = 16

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// errUsage marks a flag error that the flag package has already reported.
var errUsage = errors.New("usage")

// options is the command line, checked.
type options struct {
	tun       string
	kinds     []decap.Kind
	guePort   uint16
	addrs     []netip.Addr   // empty: every local address
	peers     []netip.Prefix // second-chance forwarding allowed to these only (empty: never)
	lbs       []netip.Prefix // tunnels accepted only from these and peers (empty: from anywhere)
	zeroCsum6 bool
	logJSON   bool
}

// addrList is -addr: repeatable, comma-separated allowed.
type addrList []netip.Addr

func (l *addrList) String() string {
	s := make([]string, len(*l))
	for i, a := range *l {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

func (l *addrList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(f))
		if err != nil || a.Zone() != "" {
			return fmt.Errorf("%q is not an IPv4 or IPv6 address", f)
		}
		if a.IsUnspecified() || a.IsMulticast() {
			return fmt.Errorf("%s is not a unicast address", a)
		}
		*l = append(*l, a.Unmap())
	}
	return nil
}

// prefixList is -peers: prefixes or bare addresses (one host),
// repeatable, comma-separated allowed.
type prefixList []netip.Prefix

func (l *prefixList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (l *prefixList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil || a.Zone() != "" {
				return fmt.Errorf("%q is not a prefix or an address", f)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				// Wider than ::ffff:0:0/96: no IPv4 prefix says the
				// same (PrefixFrom would make an invalid prefix that
				// matches nothing, silently).
				return fmt.Errorf("%q: an IPv4-mapped prefix needs at least 96 bits; write the IPv4 prefix", f)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		*l = append(*l, p.Masked())
	}
	return nil
}

// parseFlags reads and checks the command line.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fulcrum-decap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.tun, "tun", "fdecap0", "TUN device to create and write inner packets to")
	gre := fs.Bool("gre", false, "accept GRE (IP protocol 47)")
	ipip := fs.Bool("ipip", false, "accept IPIP (IP protocols 4 and 41)")
	gue := fs.Int("gue", int(decap.DefaultGUEPort), "accept GUE on this UDP port (0: off)")
	var addrs addrList
	fs.Var(&addrs, "addr", "local outer address to receive tunnels on, repeatable (default: every local address)")
	var peers prefixList
	fs.Var(&peers, "peers", "second chance: forward a packet that no local socket owns to the backend its tunnel names only if it is in these prefixes or addresses (not 0.0.0.0/0 or ::/0), repeatable (default: none, never forward; docs/second-chance.md)")
	var lbs prefixList
	fs.Var(&lbs, "lbs", "accept tunnels only from these prefixes or addresses (the LBs' outer source addresses) and from -peers, and act on a second chance only from these, repeatable (default: from any source; docs/second-chance.md)")
	fs.BoolVar(&o.zeroCsum6, "gue-zero-csum6", false, "accept GUE over IPv6 with a zero UDP checksum (RFC 6935), for an LB whose encap.Config.GUEZeroChecksumV6 is set")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	if o.tun == "" || len(o.tun) >= ifNameSize || strings.ContainsAny(o.tun, "/ \t\n:%") || o.tun == "." || o.tun == ".." {
		return o, fmt.Errorf("-tun %q: want an interface name of 1 to %d characters without '/', ':', '%%' or spaces", o.tun, ifNameSize-1)
	}
	if *gue < 0 || *gue > 65535 {
		return o, fmt.Errorf("-gue %d: want a UDP port 1-65535, or 0 for no GUE", *gue)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["gre"] && !set["ipip"] && !set["gue"] {
		o.kinds = []decap.Kind{decap.GRE, decap.IPIP, decap.GUE}
	} else {
		if *gre {
			o.kinds = append(o.kinds, decap.GRE)
		}
		if *ipip {
			o.kinds = append(o.kinds, decap.IPIP)
		}
		if set["gue"] && *gue != 0 {
			o.kinds = append(o.kinds, decap.GUE)
		}
		if len(o.kinds) == 0 {
			return o, errors.New("-gre, -ipip and -gue turn every tunnel kind off: nothing to receive")
		}
	}
	o.guePort = uint16(*gue)
	if o.guePort == 0 {
		o.guePort = decap.DefaultGUEPort // unused: GUE is off
	}
	for _, p := range peers {
		// Every address, or a share of the Internet that no set of
		// backends needs: a second chance, which anyone who can reach
		// the agent may forge (from an -lbs address too, a source is
		// easy to forge), could then send packets anywhere, an open
		// relay. ::/0 split into ::/1 and 8000::/1 is refused so too.
		if p.Bits() == 0 {
			return o, fmt.Errorf("-peers %s is every address: list the other backends' prefixes or addresses", p)
		}
		if minBits := minPeerBits(p); p.Bits() < minBits {
			return o, fmt.Errorf("-peers %s is wider than /%d: list the other backends' prefixes or addresses (a wider one lets a forged second chance send packets far beyond them)", p, minBits)
		}
	}
	o.addrs = addrs
	o.peers = peers
	o.lbs = lbs
	switch *logFormat {
	case "text":
	case "json":
		o.logJSON = true
	default:
		return o, fmt.Errorf("-log-format %q: want text or json", *logFormat)
	}
	return o, nil
}

// run is the whole command, testable: it returns the exit status.
func run(args []string, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "fulcrum-decap: %v\n", err)
		return 2
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if o.logJSON {
		h = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(h)

	d, err := decap.New(decap.Config{Kinds: o.kinds, GUEPort: o.guePort, GUEZeroChecksumV6: o.zeroCsum6})
	if err != nil {
		fmt.Fprintf(stderr, "fulcrum-decap: %v\n", err)
		return 2
	}
	// Signals first: a SIGUSR1 right after "ready" must not kill us.
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	defer signal.Stop(sig)
	a, err := start(o, d, log)
	if err != nil {
		log.Error("start", "err", err)
		return 1
	}
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGUSR1 {
				a.logCounters("counters")
				continue
			}
			log.Info("stopping", "signal", s.String())
			a.stop()
			a.logCounters("counters")
			return 0
		case err := <-a.failed:
			log.Error("receive", "err", err)
			a.stop()
			a.logCounters("counters")
			return 1
		}
	}
}

// minPeerBits is the shortest -peers prefix accepted: /8 for IPv4 (a
// whole 10.0.0.0/8), /16 for IPv6.
func minPeerBits(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 8
	}
	return 16
}
