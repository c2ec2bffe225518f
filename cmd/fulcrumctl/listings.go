package main

// show, conns and flush: the one-table view of every VIP (ipvsadm -Ln
// density), the connection listing and the flush of a backend's
// connections.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// defaultConnsLimit is how many connections conns prints unless --limit
// says otherwise: a busy LB tracks millions.
const defaultConnsLimit = 100

// maxConnsPage is the entries asked for per request (the server's
// control.MaxConnsPage bound is 10000).
const maxConnsPage = 1000

// rateWait is how long show waits for a second look when the daemon had
// no earlier one to measure rates from (its window is at least a second).
const rateWait = 1100 * time.Millisecond

func vipsWithBackends() string { return api.VIPsPath + "?backends=true" }

func cmdShow(ctx context.Context, c *client, out *output, _ []string) error {
	raw, err := c.do(ctx, "GET", vipsWithBackends(), nil)
	if err != nil {
		return err
	}
	var vips []api.VIP
	if err := decodeAnswer(raw, &vips); err != nil {
		return err
	}
	for _, v := range vips {
		if v.RateSeconds == 0 {
			// No earlier look to measure rates from: look again.
			select {
			case <-ctx.Done():
				return c.timeoutError()
			case <-time.After(rateWait):
			}
			if raw, err = c.do(ctx, "GET", vipsWithBackends(), nil); err != nil {
				return err
			}
			break
		}
	}
	return show(out, raw, printShow)
}

// printShow is every VIP, then its backends indented under it.
func printShow(w io.Writer, vips *[]api.VIP) {
	tw := table(w, "VIP/BACKEND", "ADDRESS", "STATE", "WEIGHT", "EFFECTIVE", "FLOWS", "NEW-FLOWS", "PKT/S", "BYTE/S", "PACKETS", "BYTES", "CHECK")
	for _, v := range *vips {
		st := "serving"
		switch {
		case v.Panic:
			st = "PANIC"
		case !v.Serving:
			st = "no-backend"
		}
		row(tw, v.Name, endpoint(v.Address, v.Port, v.Protocol), st, "", "", v.ActiveFlows, v.NewFlows,
			rate(v.PacketRate), rate(v.ByteRate), v.Packets, v.Bytes, fmt.Sprintf("%d/%d healthy", v.Healthy, v.BackendCount))
		for i := range v.Backends {
			b := &v.Backends[i]
			s := state(b)
			if b.SlowStart && b.RampPercent > 0 {
				s += "(" + strconv.FormatFloat(b.RampPercent, 'f', 0, 64) + "%)"
			}
			check := b.CheckResult
			if check == "" {
				check = "-"
			} else if b.CheckLatencyMs > 0 {
				check += " " + strconv.FormatFloat(b.CheckLatencyMs, 'f', 2, 64) + "ms"
			}
			row(tw, "  -> "+b.Name, b.Address, s, b.Weight, weight(b.EffectiveWeight), b.ActiveFlows, b.NewFlows,
				rate(b.PacketRate), rate(b.ByteRate), b.Packets, b.Bytes, strings.ReplaceAll(check, "\t", " "))
		}
	}
	tw.Flush()
	if len(*vips) > 0 {
		flowsMissing(w, (*vips)[0].FlowsMissingWorkers)
	}
}

func rate(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }

// resolveSelection fills in the VIP of a --backend given alone, when one
// VIP has a backend of that name or address.
func resolveSelection(ctx context.Context, c *client, sel *selection) error {
	if sel.backend == "" || sel.vip != "" {
		return nil
	}
	raw, err := c.do(ctx, "GET", vipsWithBackends(), nil)
	if err != nil {
		return err
	}
	var vips []api.VIP
	if err := decodeAnswer(raw, &vips); err != nil {
		return err
	}
	// An address in any spelling ("2001:DB8::11", "::ffff:10.0.1.1"), as
	// the daemon parses it.
	want, err := netip.ParseAddr(sel.backend)
	isAddr := err == nil
	want = want.WithZone("").Unmap()
	var match []string
	for _, v := range vips {
		for _, b := range v.Backends {
			a, err := netip.ParseAddr(b.Address)
			if b.Name == sel.backend || b.Address == sel.backend || isAddr && err == nil && a.Unmap() == want {
				match = append(match, v.Name)
				break
			}
		}
	}
	switch len(match) {
	case 0:
		return fmt.Errorf("backend %q: no VIP has it", sel.backend)
	case 1:
		sel.vip = match[0]
		return nil
	}
	return usagef("backend %q: %d VIPs have it (%s): add --vip", sel.backend, len(match), strings.Join(match, ", "))
}

func cmdConns(ctx context.Context, c *client, out *output, _ []string) error {
	sel := out.sel
	if sel.limit < 1 {
		return usagef("--limit %d: must be at least 1", sel.limit)
	}
	if err := resolveSelection(ctx, c, &sel); err != nil {
		return err
	}
	all := api.Conns{Conns: []api.Conn{}} // [] in --json when none, as the API says it
	cursor := ""
	seen := map[string]bool{}
	// page fetches up to n entries from cursor.
	page := func(n int) (api.Conns, error) {
		var pg api.Conns
		raw, err := c.do(ctx, "GET", api.ConnsQuery(sel.vip, sel.backend, n, cursor), nil)
		if err != nil {
			return pg, err
		}
		if err := decodeAnswer(raw, &pg); err != nil {
			return pg, err
		}
		// A cursor that comes back does not advance: the listing would
		// never end.
		if pg.Next != "" && (seen[pg.Next] || pg.Next == cursor) {
			return pg, fmt.Errorf("the daemon gave cursor %q again: the listing does not advance; stopped", printable(pg.Next))
		}
		seen[cursor] = true
		return pg, nil
	}
	lastFrom := "0.0" // where the last page began (a cursor of the start)
	for len(all.Conns) < sel.limit {
		if cursor != "" {
			lastFrom = cursor
		}
		pg, err := page(min(maxConnsPage, max(sel.limit-len(all.Conns), 8)))
		if err != nil {
			return err
		}
		all.Conns = append(all.Conns, pg.Conns...)
		all.Next = pg.Next
		if pg.Next == "" {
			break
		}
		cursor = pg.Next
	}
	// A cursor says only that tables are left to read, not that they hold
	// a connection: with exactly --limit listed, look on until one shows
	// (Next stays before it) or the listing ends (no Next).
	for len(all.Conns) == sel.limit && all.Next != "" {
		pg, err := page(8)
		if err != nil {
			return err
		}
		if len(pg.Conns) > 0 {
			break
		}
		all.Next = pg.Next
		cursor = pg.Next
	}
	more := all.Next != "" || len(all.Conns) > sel.limit
	if len(all.Conns) > sel.limit {
		all.Conns = all.Conns[:sel.limit]
		// The last page is cut: its next would skip what was cut, so
		// the listing goes on where that page began.
		all.Next = lastFrom
	}
	if out.json {
		b, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			return err
		}
		_, err = out.w.Write(append(b, '\n'))
		return err
	}
	tw := table(out.w, "CLIENT", "VIP", "PROTO", "BACKEND", "STATE", "IDLE", "WORKER")
	for _, cn := range all.Conns {
		be := cn.Backend + " " + cn.BackendAddress
		if cn.Stale {
			be += " (stale)"
		}
		if cn.SecondChance != "" {
			be += " (second chance " + cn.SecondChance + ")"
		}
		idle := (time.Duration(cn.IdleMs) * time.Millisecond).String()
		row(tw, cn.Client, cn.VIP+" "+cn.VIPAddress, cn.Proto, be, cn.State, idle, cn.Worker)
	}
	tw.Flush()
	if more {
		fmt.Fprintf(out.w, "(first %d shown; --limit N for more)\n", len(all.Conns))
	}
	return nil
}

func cmdFlush(ctx context.Context, c *client, out *output, _ []string) error {
	sel := out.sel
	if sel.backend == "" {
		return usagef("--backend: missing (the backend whose connections to flush)")
	}
	if err := checkName("--backend", sel.backend); err != nil {
		return err
	}
	if sel.vip != "" {
		if err := checkName("--vip", sel.vip); err != nil {
			return err
		}
	}
	if err := resolveSelection(ctx, c, &sel); err != nil {
		return err
	}
	raw, err := c.do(ctx, "POST", api.ActionPath(sel.vip, sel.backend, api.ActionFlush), nil)
	if err != nil {
		return err
	}
	return show(out, raw, func(w io.Writer, f *api.Flush) {
		fmt.Fprintf(w, "%s/%s: %d connections flushed; their next packets are placed by the table again (counted as moved)\n",
			printable(f.VIP), printable(f.Backend), f.Flushed)
	})
}
