package main

// show, conns and flush: the one-table view of every VIP (ipvsadm -Ln
// density), the connection listing and the flush of a backend's
// connections.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	if err := json.Unmarshal(raw, &vips); err != nil {
		return fmt.Errorf("the daemon's answer is not what this fulcrumctl expects: %v", err)
	}
	for _, v := range vips {
		if v.RateSeconds == 0 {
			// No earlier look to measure rates from: look again.
			select {
			case <-ctx.Done():
				return ctx.Err()
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
	if err := json.Unmarshal(raw, &vips); err != nil {
		return fmt.Errorf("the daemon's answer is not what this fulcrumctl expects: %v", err)
	}
	var match []string
	for _, v := range vips {
		for _, b := range v.Backends {
			if b.Name == sel.backend || b.Address == sel.backend {
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
	var all api.Conns
	cursor := ""
	seen := map[string]bool{}
	for len(all.Conns) < sel.limit {
		var page api.Conns
		raw, err := c.do(ctx, "GET", api.ConnsQuery(sel.vip, sel.backend, min(maxConnsPage, max(sel.limit-len(all.Conns), 8)), cursor), nil)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return fmt.Errorf("the daemon's answer is not what this fulcrumctl expects: %v", err)
		}
		all.Conns = append(all.Conns, page.Conns...)
		all.Next = page.Next
		if page.Next == "" {
			break
		}
		// A cursor that comes back does not advance: the listing would
		// never end.
		if seen[page.Next] || page.Next == cursor {
			return fmt.Errorf("the daemon gave cursor %q again: the listing does not advance; stopped", printable(page.Next))
		}
		seen[cursor] = true
		cursor = page.Next
	}
	more := all.Next != "" || len(all.Conns) > sel.limit
	if len(all.Conns) > sel.limit {
		all.Conns = all.Conns[:sel.limit]
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
