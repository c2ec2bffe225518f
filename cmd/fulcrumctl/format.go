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
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(tw, strings.Join(s, "\t"))
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
	fmt.Fprintf(w, "generation %d  rebuilds %d  last rebuild %.3f ms  vips %d", s.Generation, s.Rebuilds, s.LastRebuildMs, s.VIPs)
	if s.ConfigFile != "" {
		fmt.Fprintf(w, "  config %s", s.ConfigFile)
	}
	fmt.Fprintln(w)
	if len(s.PanicVIPs) > 0 {
		fmt.Fprintf(w, "PANIC MODE (fail open): %s\n", strings.Join(s.PanicVIPs, ", "))
	}
	if s.LastError != "" {
		fmt.Fprintf(w, "last rebuild failed: %s\n", s.LastError)
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
		row(tw, name, wk.RxPackets, wk.TxPackets, wk.Forwarded, wk.ICMPReplies, wk.Punted, wk.Dropped, wk.TxFull,
			wk.Conntrack.Flows, wk.Conntrack.Hits, wk.Conntrack.Misses, evicted, wk.Conntrack.InsertFailed)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "drops: %s\n", dropList(s.Total.Drops))
	if len(s.StaleWorkers) > 0 {
		fmt.Fprintf(w, "workers not answering (counters read 0): %v\n", s.StaleWorkers)
	}
	if len(s.BGPPeers) > 0 {
		fmt.Fprintln(w)
		tw := table(w, "BGP PEER", "ASN", "STATE", "UPTIME", "PREFIXES-SENT", "LAST-ERROR")
		for _, p := range s.BGPPeers {
			row(tw, p.Address, p.ASN, p.State, (time.Duration(p.UptimeSec) * time.Second).String(), p.PrefixesSent, p.LastError)
		}
		tw.Flush()
		fmt.Fprintf(w, "announced: %s\n", strings.Join(s.Announced, " "))
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
}

// state is a backend's one-word state, after HAProxy's (UP, DRAIN, DOWN).
func state(b *api.Backend) string {
	switch {
	case b.Drained:
		return "drain"
	case b.Outlier && b.Down:
		return "ejected" // by the passive checks
	case b.Down:
		return "down"
	case b.EffectiveWeight == 0:
		return "weight-0"
	case b.Health == "down":
		return "panic" // failing its checks, used anyway: the VIP fails open
	case b.SlowStart:
		return "slowstart"
	}
	return "ready"
}

func printBackends(w io.Writer, v *api.VIP) {
	fmt.Fprintf(w, "vip %s  %s  encap %s  table %d slots  flows %d  packets %d", v.Name, endpoint(v.Address, v.Port, v.Protocol), v.Encap, v.TableSize, v.ActiveFlows, v.Packets)
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
}

func printAction(w io.Writer, action string, b *api.Backend) {
	fmt.Fprintf(w, "%s/%s: ", b.VIP, b.Name)
	switch action {
	case api.ActionDrain:
		fmt.Fprintf(w, "drained; %d active flows stay on it until they end\n", b.ActiveFlows)
	case api.ActionUndrain:
		fmt.Fprintf(w, "undrained; effective weight %s, %s of the table\n", weight(b.EffectiveWeight), percent(b.TableShare))
	default:
		fmt.Fprintf(w, "weight %d; effective weight %s, %s of the table\n", b.Weight, weight(b.EffectiveWeight), percent(b.TableShare))
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
	fmt.Fprintf(w, "%s -> %s %s: ", src, dst, l.Proto)
	switch l.Reason {
	case "not-a-vip":
		fmt.Fprintln(w, "not a VIP (no VIP serves this address, port and protocol)")
		return
	case "no-backend":
		fmt.Fprintf(w, "vip %s takes no new flows (no usable backend)\n", l.VIP)
		return
	}
	fmt.Fprintf(w, "vip %s -> backend %s (%s)\n", l.VIP, l.Backend, l.Address)
	switch l.Reason {
	case "conntrack":
		fmt.Fprintf(w, "  pinned in conntrack on worker %d: state %s, idle %d ms\n", l.Worker, l.State, l.IdleMs)
	case "conntrack-stale":
		fmt.Fprintf(w, "  pinned on worker %d to a backend that is gone: the next packet takes table slot %d\n", l.Worker, l.Slot)
	default:
		fmt.Fprintf(w, "  new flow: Maglev table slot %d\n", l.Slot)
	}
	fmt.Fprintf(w, "  flow hash %s\n", l.Hash)
}

func printTable(w io.Writer, t *api.Table) {
	if t.Size == 0 {
		fmt.Fprintf(w, "# vip %s has no table: no backend takes new flows\n", t.VIP)
		return
	}
	fmt.Fprintf(w, "# vip %s: %d slots, sha256 %s\n", t.VIP, t.Size, t.Digest)
	for i, name := range t.Slots {
		fmt.Fprintf(w, "%d\t%s\n", i, name)
	}
}
