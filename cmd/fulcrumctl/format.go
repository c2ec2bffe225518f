package main

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// columns writes aligned columns, as HAProxy's "show stat" reads in a
// terminal: one header line, one line per row, no trailing blanks.
type columns struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func table(w io.Writer, header ...string) *columns {
	c := &columns{w: w}
	c.tw = tabwriter.NewWriter(&c.buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(c.tw, strings.Join(header, "\t"))
	return c
}

func (c *columns) Write(p []byte) (int, error) { return c.tw.Write(p) }

// Flush writes the aligned lines out.
func (c *columns) Flush() {
	c.tw.Flush()
	for _, l := range strings.SplitAfter(c.buf.String(), "\n") {
		if l != "" {
			io.WriteString(c.w, strings.TrimRight(l, " \n")+"\n")
		}
	}
}

func row(tw io.Writer, cols ...any) {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = printable(fmt.Sprint(c))
	}
	fmt.Fprintln(tw, strings.Join(s, "\t"))
}

// printable escapes the control characters of text the daemon passes on
// from elsewhere (a health check's reason holds what a backend answered,
// a BGP error what a peer sent): an escape sequence must not reach the
// operator's terminal, a tab, newline or line separator must not break
// a table, and a bidi override or another invisible format character
// must not show the operator a line other than the one printed.
func printable(s string) string {
	if !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unprintable(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// unprintable: a control or format character, or a line or paragraph
// separator.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

func weight(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// endpoint is a VIP's address:port/protocol; port 0 serves every port.
func endpoint(addr string, port uint16, proto string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	if port == 0 {
		if a.Is6() {
			return "[" + addr + "]:*/" + proto
		}
		return addr + ":*/" + proto
	}
	return netip.AddrPortFrom(a, port).String() + "/" + proto
}

func printStatus(w io.Writer, s *api.Status) {
	fmt.Fprintf(w, "generation %d  rebuilds %d  last rebuild %.3f ms  vips %d  health checks %d", s.Generation, s.Rebuilds, s.LastRebuildMs, s.VIPs, s.HealthProbes)
	if s.ConfigFile != "" {
		fmt.Fprintf(w, "  config %s", printable(s.ConfigFile))
	}
	fmt.Fprintln(w)
	if s.Converging {
		fmt.Fprintf(w, "CONVERGING: health checks have not all given a first verdict; nothing announced; %d new flows forwarded meanwhile\n", s.ConvergingNewFlows)
	}
	if len(s.PanicVIPs) > 0 {
		fmt.Fprintf(w, "PANIC MODE (fail open): %s\n", printable(strings.Join(s.PanicVIPs, ", ")))
	}
	if s.LastError != "" {
		fmt.Fprintf(w, "last rebuild failed: %s\n", printable(s.LastError))
	}
	fmt.Fprintln(w)
	tw := table(w, "WORKER", "RX", "TX", "FORWARDED", "ICMP-REPLIES", "PUNTED", "DROPPED", "TX-FULL", "FLOWS", "CT-HITS", "CT-MISSES", "EVICTED", "INSERT-FAILED")
	for _, wk := range append(s.Workers, s.Total) {
		name := strconv.Itoa(wk.Worker)
		if wk.Worker < 0 {
			name = "total"
		}
		var evicted uint64
		for _, n := range wk.Conntrack.Evictions {
			evicted += n
		}
		// ICMP-REPLIES is every reply the LB sent itself, too-big and
		// echo, as fulcrum_worker_icmp_replies_total summed over its
		// types: RX = FORWARDED + ICMP-REPLIES + PUNTED + DROPPED.
		row(tw, name, wk.RxPackets, wk.TxPackets, wk.Forwarded, wk.ICMPReplies+wk.EchoReplies, wk.Punted, wk.Dropped, wk.TxFull,
			wk.Conntrack.Flows, wk.Conntrack.Hits, wk.Conntrack.Misses, evicted, wk.Conntrack.InsertFailed)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "drops: %s\n", printable(dropList(s.Total.Drops)))
	if len(s.FlowsMissingWorkers) > 0 {
		fmt.Fprintf(w, "workers whose flows are not counted (flow counts too low): %v\n", s.FlowsMissingWorkers)
	}
	if len(s.StaleWorkers) > 0 {
		fmt.Fprintf(w, "workers not answering (counters read 0): %v\n", s.StaleWorkers)
	}
	if len(s.StalledWorkers) > 0 {
		what := "VIPs still announced: control.stall_timeout = 0"
		if s.StallWithdrawn {
			what = "every VIP withdrawn until they answer"
		}
		fmt.Fprintf(w, "workers stalled (stuck for control.stall_timeout; %s): %v\n", what, s.StalledWorkers)
	}
	if len(s.BGPPeers) > 0 {
		fmt.Fprintln(w)
		tw := table(w, "BGP PEER", "ASN", "STATE", "UPTIME", "PREFIXES-SENT", "RECEIVED", "LAST-ERROR")
		for _, p := range s.BGPPeers {
			row(tw, p.Address, p.ASN, p.State, (time.Duration(p.UptimeSec) * time.Second).String(), p.PrefixesSent, p.PrefixesReceived, p.LastError)
		}
		tw.Flush()
		fmt.Fprintf(w, "announced: %s\n", printable(strings.Join(s.Announced, " ")))
	}
}

// dropList is "reason=n ..." sorted by reason, or "none".
func dropList(drops map[string]uint64) string {
	var names []string
	for r, n := range drops {
		if n > 0 {
			names = append(names, r)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	for i, r := range names {
		names[i] = r + "=" + strconv.FormatUint(drops[r], 10)
	}
	return strings.Join(names, " ")
}

func printVIPs(w io.Writer, vips *[]api.VIP) {
	tw := table(w, "VIP", "ADDRESS", "ENCAP", "BACKENDS", "HEALTHY", "USABLE", "PANIC", "TABLE", "FLOWS", "NEW-FLOWS", "PACKETS", "BYTES")
	for _, v := range *vips {
		row(tw, v.Name, endpoint(v.Address, v.Port, v.Protocol), v.Encap, v.BackendCount, v.Healthy, v.Usable,
			yesNo(v.Panic), v.TableSize, v.ActiveFlows, v.NewFlows, v.Packets, v.Bytes)
	}
	tw.Flush()
	if len(*vips) > 0 {
		flowsMissing(w, (*vips)[0].FlowsMissingWorkers)
	}
}

// state is a backend's one-word state, after HAProxy's (UP, DRAIN, DOWN).
// It says why a backend takes new flows or not; Down (whether its tracked
// flows move) is the VIP's on_down and is not part of it: with "keep" a
// failing backend has weight 0 but is still "down" or "ejected".
func state(b *api.Backend) string {
	failing := b.Outlier || b.Health == "down"
	switch {
	case b.Drained:
		return "drain"
	case failing && b.EffectiveWeight > 0:
		return "panic" // failing its checks, used anyway: the VIP fails open
	case b.Outlier:
		return "ejected" // by the passive checks
	case failing, b.Down:
		return "down"
	case b.EffectiveWeight == 0:
		return "weight-0"
	case b.Health == "unknown":
		return "checking" // no verdict yet: routed like up
	case b.SlowStart:
		return "slowstart"
	}
	return "ready"
}

func printBackends(w io.Writer, v *api.VIP) {
	fmt.Fprintf(w, "vip %s  %s  encap %s  table %d slots  flows %d  packets %d", printable(v.Name), printable(endpoint(v.Address, v.Port, v.Protocol)), printable(v.Encap), v.TableSize, v.ActiveFlows, v.Packets)
	if v.HashFields != "" && v.HashFields != "5-tuple" {
		fmt.Fprintf(w, "  hash %s", printable(v.HashFields))
	}
	if v.Panic {
		fmt.Fprint(w, "  PANIC MODE (fail open)")
	}
	if !v.Serving {
		fmt.Fprint(w, "  NOT SERVING (no backend takes new flows)")
	}
	fmt.Fprintln(w)
	tw := table(w, "BACKEND", "ADDRESS", "STATE", "HEALTH", "WEIGHT", "EFFECTIVE", "SLOTS", "SHARE", "FLOWS", "NEW-FLOWS", "PACKETS", "BYTES", "REASON")
	for i := range v.Backends {
		b := &v.Backends[i]
		row(tw, b.Name, b.Address, state(b), b.Health, b.Weight, weight(b.EffectiveWeight), b.TableSlots, percent(b.TableShare),
			b.ActiveFlows, b.NewFlows, b.Packets, b.Bytes, b.Reason)
	}
	tw.Flush()
	flowsMissing(w, v.FlowsMissingWorkers)
}

// flowsMissing says that flow counts lack some workers' flows: a drain
// is not over when they read 0.
func flowsMissing(w io.Writer, workers []int) {
	if len(workers) > 0 {
		fmt.Fprintf(w, "FLOWS INCOMPLETE: workers %v did not finish counting their flows in time (flow counts too low; a drain is not over at 0)\n", workers)
	}
}

func printAction(w io.Writer, action string, b *api.Backend) {
	fmt.Fprintf(w, "%s/%s: ", printable(b.VIP), printable(b.Name))
	switch action {
	case api.ActionDrain:
		fmt.Fprintf(w, "drained; %d active flows stay on it until they end\n", b.ActiveFlows)
		flowsMissing(w, b.FlowsMissingWorkers)
	case api.ActionUndrain:
		fmt.Fprintf(w, "undrained; effective weight %s, %s of the table\n", weight(b.EffectiveWeight), percent(b.TableShare))
	default:
		fmt.Fprintf(w, "weight %d; effective weight %s, %s of the table", b.Weight, weight(b.EffectiveWeight), percent(b.TableShare))
		if b.Drained { // why the effective weight is 0
			fmt.Fprint(w, "; still drained: it takes no new flows until undrained")
		}
		fmt.Fprintln(w)
	}
}

func printLookup(w io.Writer, l *api.Lookup) {
	src, dst := l.Src+":"+strconv.Itoa(int(l.Sport)), l.Dst+":"+strconv.Itoa(int(l.Dport))
	if s, err := netip.ParseAddr(l.Src); err == nil {
		src = netip.AddrPortFrom(s, l.Sport).String()
	}
	if d, err := netip.ParseAddr(l.Dst); err == nil {
		dst = netip.AddrPortFrom(d, l.Dport).String()
	}
	fmt.Fprintf(w, "%s -> %s %s: ", printable(src), printable(dst), printable(l.Proto))
	switch l.Reason {
	case "not-a-vip":
		fmt.Fprintln(w, "not a VIP (no VIP serves this address, port and protocol)")
		return
	case "no-backend":
		fmt.Fprintf(w, "vip %s takes no new flows (no usable backend)\n", printable(l.VIP))
		return
	}
	// A scheduler other than Maglev picks at the SYN, by the loads of that
	// moment: the daemon names no backend, only the candidates.
	if l.Reason == "scheduler" || (l.Reason == "conntrack-stale" && l.Backend == "") {
		fmt.Fprintf(w, "vip %s (scheduler %s)\n", printable(l.VIP), printable(l.Scheduler))
		if l.Reason == "conntrack-stale" {
			fmt.Fprintf(w, "  pinned on worker %d to a backend that is gone: the next packet, SYN or not, is placed again by the scheduler\n", l.Worker)
		}
		fmt.Fprintf(w, "  new flow: chosen by %s among: %s\n", printable(l.Scheduler), printable(candidateList(l.Candidates)))
		if u := l.Untracked; u != nil {
			fmt.Fprintf(w, "  a segment no worker tracks (not a SYN): table slot %d -> backend %s (%s)\n", u.Slot, printable(u.Backend), printable(u.Address))
		}
		fmt.Fprintf(w, "  flow hash %s%s\n", printable(l.Hash), printable(hashOf(l.HashFields)))
		return
	}
	fmt.Fprintf(w, "vip %s -> backend %s (%s)\n", printable(l.VIP), printable(l.Backend), printable(l.Address))
	switch l.Reason {
	case "conntrack":
		fmt.Fprintf(w, "  pinned in conntrack on worker %d: state %s, idle %d ms\n", l.Worker, printable(l.State), l.IdleMs)
	case "conntrack-stale":
		fmt.Fprintf(w, "  pinned on worker %d to a backend that is gone: the next packet takes table slot %d\n", l.Worker, l.Slot)
	default:
		fmt.Fprintf(w, "  new flow: Maglev table slot %d\n", l.Slot)
	}
	fmt.Fprintf(w, "  flow hash %s%s\n", printable(l.Hash), printable(hashOf(l.HashFields)))
}

// hashOf is " (of the 3-tuple)" and the like for a VIP whose slot is not
// hashed from the 5-tuple, the default (nothing then).
func hashOf(fields string) string {
	if fields == "" || fields == "5-tuple" {
		return ""
	}
	return " (of the " + fields + ")"
}

// candidateList is "be1 (w 1, 3 flows, 1.2 ms), ...": what a load-aware
// scheduler compares. The latency is left out without samples; weight 0
// (down, drained, ejected) is not eligible.
func candidateList(cs []api.Candidate) string {
	if len(cs) == 0 {
		return "none"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		p := fmt.Sprintf("%s (w %s, %d flows", c.Backend, weight(c.Weight), c.Active)
		if c.LatencyUs > 0 {
			p += ", " + strconv.FormatFloat(float64(c.LatencyUs)/1000, 'f', 1, 64) + " ms"
		}
		if c.Weight == 0 {
			p += ", not eligible"
		}
		parts[i] = p + ")"
	}
	return strings.Join(parts, ", ")
}

func printTable(w io.Writer, t *api.Table) {
	if t.Size == 0 {
		fmt.Fprintf(w, "# vip %s has no table: no backend takes new flows\n", printable(t.VIP))
		return
	}
	fmt.Fprintf(w, "# vip %s: %d slots, sha256 %s, hash key id %s, hash %s\n", printable(t.VIP), t.Size, printable(t.Digest), printable(t.HashKeyID), printable(t.HashFields))
	for i, name := range t.Slots {
		fmt.Fprintf(w, "%d\t%s\n", i, printable(name))
	}
}
