// Command fulcrum-gen writes pcap files of Ethernet frames toward Fulcrum's
// VIPs, for the benchmarks of issue 6: DPDK's net_pcap replays them
// (rx_pcap=FILE,infinite_rx=1) into testpmd and into Fulcrum alike. The same
// flags always write the same file. See package gen for what the frames are.
//
//	fulcrum-gen -o syn64.pcap -n 1000000 -flows 1000000 -vips 203.0.113.7:80 -mode syn -size 64
//
// Exit status: 0 on success, 2 on a usage error or bad flag value (the
// message on stderr names the flag), 1 if the file cannot be written.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/fulcrumlb/fulcrum/gen"
)

const usageHead = `usage: fulcrum-gen -o FILE [flags]

Writes a pcap file (Ethernet, snaplen 65535) of frames toward the VIPs: TCP
SYNs, established TCP (ACK, PSH with payload), a mix of both, or UDP; IPv4,
IPv6 or both; from -flows distinct client flows; with malformed, non-VIP and
ARP frames at the given rates. Deterministic: the same flags write the same
bytes. Replay it with DPDK: --vdev net_pcap0,rx_pcap=FILE,infinite_rx=1.

-size counts the frame as packet generators do, FCS included: -size 64 is a
60-byte frame in the file; -size 1518 carries a 1500-byte IP packet. IPv6+TCP
frames are never shorter than their headers (78 with FCS); ARP frames are 64.

Prints one line on success: frames written per kind (valid-v4, valid-v6,
malformed, non-vip, arp), valid frames per transport, malformed per defect.

flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks a flag error that flag has already reported with the
// usage text.
var errUsage = errors.New("usage")

// outputError is a failure to write the file (exit status 1), as opposed to
// bad input (2).
type outputError struct{ err error }

func (e outputError) Error() string { return e.err.Error() }
func (e outputError) Unwrap() error { return e.err }

// run is the whole command, testable: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	err := generate(args, stdout, stderr)
	var out outputError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, &out):
		fmt.Fprintf(stderr, "fulcrum-gen: %v\n", err)
		return 1
	default:
		fmt.Fprintf(stderr, "fulcrum-gen: %s\n", strings.TrimPrefix(err.Error(), "gen: "))
		return 2
	}
}

// shareFlag is -ipv6: a share 0..1, or "auto" (unset) for the share of IPv6
// VIPs in -vips.
type shareFlag struct {
	v   float64
	set bool
}

func (s *shareFlag) String() string {
	if s == nil || !s.set {
		return "auto"
	}
	return strconv.FormatFloat(s.v, 'g', -1, 64)
}

func (s *shareFlag) Set(v string) error {
	if v == "auto" {
		*s = shareFlag{}
		return nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return fmt.Errorf("want a share between 0 and 1 or auto")
	}
	*s = shareFlag{v: f, set: true}
	return nil
}

// macFlag is a 6-byte MAC address flag.
type macFlag struct{ mac net.HardwareAddr }

func (m *macFlag) String() string {
	if m == nil {
		return ""
	}
	return m.mac.String()
}

func (m *macFlag) Set(v string) error {
	mac, err := net.ParseMAC(v)
	if err != nil || len(mac) != 6 {
		return fmt.Errorf("want a 6-byte MAC address like 02:00:00:00:00:01")
	}
	m.mac = mac
	return nil
}

// prefixFlag is a source prefix flag of one family.
type prefixFlag struct {
	p  netip.Prefix
	v6 bool
}

func (p *prefixFlag) String() string {
	if p == nil {
		return ""
	}
	return p.p.String()
}

func (p *prefixFlag) Set(v string) error {
	fam, example := "IPv4", gen.DefaultSrcV4
	if p.v6 {
		fam, example = "IPv6", gen.DefaultSrcV6
	}
	q, err := netip.ParsePrefix(v)
	if err != nil || q.Addr().Is6() != p.v6 {
		return fmt.Errorf("want an %s prefix like %v", fam, example)
	}
	p.p = q
	return nil
}

func generate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fulcrum-gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	out := fs.String("o", "", "output pcap `FILE` (required; - for stdout)")
	n := fs.Int("n", 1_000_000, "number of `frames` to write")
	flows := fs.Int("flows", 100_000, "number of distinct client flows (source address and port)")
	vips := fs.String("vips", "203.0.113.7:80", "destination VIPs, `ADDR:PORT,[IPV6]:PORT,...`; flows go round-robin over their family's VIPs")
	mode := fs.String("mode", "syn", "traffic: `syn`, established, mix or udp")
	synShare := fs.Float64("syn-share", gen.DefaultSYNShare, "with -mode mix, the probability that a TCP frame is a SYN")
	size := fs.Int("size", gen.DefaultSize, fmt.Sprintf("frame size in `bytes` with FCS, %d..%d", gen.MinSize, gen.MaxSize))
	var ipv6 shareFlag
	fs.Var(&ipv6, "ipv6", "`share` of flows that are IPv6, 0..1 (default auto: the share of IPv6 VIPs in -vips)")
	malformed := fs.Float64("malformed", 0, "`rate` of malformed frames (truncated or bad IP header, bad lengths, truncated TCP/UDP)")
	nonVIP := fs.Float64("nonvip", 0, "`rate` of valid TCP/UDP frames to an address that is not a VIP")
	arp := fs.Float64("arp", 0, "`rate` of ARP requests (for an IPv4 VIP)")
	seed := fs.Uint64("seed", 1, "random `seed`: the same seed and flags write the same file")
	sequential := fs.Bool("sequential", false, "sequential sources (address first, then port) instead of a seeded random permutation")
	inOrder := fs.Bool("inorder", false, "send flows in order 0..N-1, repeating, instead of drawing each frame's flow at random")
	src4 := prefixFlag{p: gen.DefaultSrcV4}
	fs.Var(&src4, "src", "IPv4 client source `prefix`")
	src6 := prefixFlag{p: gen.DefaultSrcV6, v6: true}
	fs.Var(&src6, "src6", "IPv6 client source `prefix`")
	clientMAC := macFlag{gen.DefaultClientMAC}
	fs.Var(&clientMAC, "client-mac", "source `MAC` of the frames (the router in front of the LB)")
	lbMAC := macFlag{gen.DefaultLBMAC}
	fs.Var(&lbMAC, "lb-mac", "destination `MAC` of the frames (the LB's port)")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: fulcrum-gen takes only flags (see -h)", fs.Arg(0))
	}
	if *out == "" {
		return errors.New("-o FILE is required (see -h)")
	}
	if *n < 1 {
		return fmt.Errorf("-n %d: must be at least 1", *n)
	}
	if *size < gen.MinSize || *size > gen.MaxSize {
		// gen.Config reads 0 as its default: on the command line it is
		// a value outside the range the help states.
		return fmt.Errorf("-size %d: must be %d..%d (Ethernet frame with FCS)", *size, gen.MinSize, gen.MaxSize)
	}
	m, err := gen.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("-mode: %w", err)
	}
	if !(*synShare > 0 && *synShare <= 1) {
		return fmt.Errorf("-syn-share %v: must be above 0 and at most 1", *synShare)
	}
	vs, err := gen.ParseVIPs(*vips)
	if err != nil {
		return fmt.Errorf("-vips: %w", err)
	}
	share := ipv6.v
	if !ipv6.set {
		var n6 int
		for _, v := range vs {
			if v.Addr().Unmap().Is6() {
				n6++
			}
		}
		share = float64(n6) / float64(len(vs))
	}
	c := gen.Config{
		VIPs: vs, Mode: m, SYNShare: *synShare, Size: *size, IPv6: share, Flows: *flows,
		Sequential: *sequential, InOrder: *inOrder,
		Malformed: *malformed, NonVIP: *nonVIP, ARP: *arp, Seed: *seed,
		SrcV4: src4.p, SrcV6: src6.p, ClientMAC: clientMAC.mac, LBMAC: lbMAC.mac,
	}
	g, err := gen.New(c)
	if err != nil {
		return err
	}

	summary := stdout
	if *out == "-" {
		summary = stderr
		if err := g.WritePcap(stdout, *n); err != nil {
			return outputError{fmt.Errorf("stdout: %w", err)}
		}
	} else if err := writeFile(*out, g, *n); err != nil {
		return outputError{err}
	}
	cnt := g.Counts()
	fmt.Fprintf(summary, "fulcrum-gen: wrote %d frames (%d bytes without FCS) to %s: mode %s, size %d, ipv6 %g, %d flows, seed %d: %v\n",
		cnt.Frames, cnt.Bytes, *out, m, *size, share, *flows, *seed, cnt)
	return nil
}

// writeFile writes the pcap file, removing it again if it is incomplete
// and fulcrum-gen made it. Opened write-only: read-write (os.Create), a
// FIFO has this process as a reader too and never reports that its
// reader left. A path that existed (/dev/stdout, a FIFO, a device) is
// never removed.
func writeFile(name string, g *gen.Generator, n int) error {
	_, statErr := os.Lstat(name)
	made := os.IsNotExist(statErr)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	err = g.WritePcap(f, n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if made {
			os.Remove(name)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
