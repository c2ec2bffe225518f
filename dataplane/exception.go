package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
)

// The exception path's kernel side. These run on the slow path (control
// goroutines), never on an lcore: they exec iproute2 and open sockets.

// ConfigureExceptionIface gives the kernel's end of the tap the LB's
// addresses and MAC and brings it up, so the kernel answers ARP/ND and ping
// for the LB address and carries its TCP sessions (BGP). With netns set, the
// interface is first moved into that (existing) network namespace, as tests
// do to keep the kernel's answers inside a namespace they own.
func ConfigureExceptionIface(cfg *config.Config, mac [6]byte, netns string) error {
	d := &cfg.Dataplane
	ifc := d.ExceptionIf
	if netns != "" {
		if out, err := exec.Command("ip", "link", "set", "dev", ifc, "netns", netns).CombinedOutput(); err != nil {
			return fmt.Errorf("exception interface %s: move to netns %s: %v: %s", ifc, netns, err, out)
		}
	}
	cmds := [][]string{
		{"link", "set", "dev", ifc, "address", net.HardwareAddr(mac[:]).String()},
		{"link", "set", "dev", ifc, "mtu", strconv.Itoa(d.MTU)},
		{"link", "set", "dev", ifc, "up"},
	}
	if d.LBIPv4.IsValid() {
		cmds = append(cmds, []string{"addr", "replace", fmt.Sprintf("%s/%d", d.LBIPv4, d.LBPrefix4), "dev", ifc})
	}
	if d.LBIPv6.IsValid() {
		cmds = append(cmds, []string{"-6", "addr", "replace", fmt.Sprintf("%s/%d", d.LBIPv6, d.LBPrefix6), "dev", ifc, "nodad"})
	}
	for _, a := range cmds {
		if out, err := ipCommand(netns, a...).CombinedOutput(); err != nil {
			return fmt.Errorf("exception interface %s: ip %v: %v: %s", ifc, a, err, out)
		}
	}
	return nil
}

// ipCommand is iproute2's ip with args, in network namespace netns ("": the
// current one).
func ipCommand(netns string, args ...string) *exec.Cmd {
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	return exec.Command("ip", args...)
}

// neighbor is one row of `ip -j neigh`.
type neighbor struct {
	Dst    string   `json:"dst"`
	LLAddr string   `json:"lladdr"`
	State  []string `json:"state"`
}

// LookupNeighbor asks the kernel's neighbour table (of network namespace
// netns, "" for the current one) for ip's MAC on ifc. Entries that are
// FAILED or INCOMPLETE do not count.
func LookupNeighbor(netns, ifc string, ip netip.Addr) ([6]byte, bool) {
	var mac [6]byte
	out, err := ipCommand(netns, "-j", "neigh", "show", "to", ip.String(), "dev", ifc).Output()
	if err != nil {
		return mac, false
	}
	var rows []neighbor
	if json.Unmarshal(out, &rows) != nil {
		return mac, false
	}
	for _, r := range rows {
		bad := len(r.State) == 0
		for _, s := range r.State {
			if s == "FAILED" || s == "INCOMPLETE" {
				bad = true
			}
		}
		hw, err := net.ParseMAC(r.LLAddr)
		if bad || err != nil || len(hw) != 6 {
			continue
		}
		copy(mac[:], hw)
		return mac, true
	}
	return mac, false
}

// poke makes the kernel resolve ip on ifc by sending one UDP datagram to
// its discard port through that interface.
func poke(ifc string, ip netip.Addr) {
	dl := net.Dialer{Timeout: time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptString(int(fd), syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, ifc)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := dl.Dial("udp", netip.AddrPortFrom(ip, 9).String())
	if err != nil {
		return
	}
	_, _ = conn.Write([]byte{0})
	conn.Close()
}

// ResolveNextHops publishes the next hop's MACs to the workers until ctx
// ends: the static next_hop_mac if configured, otherwise the kernel's
// neighbour entries for the gateways, refreshed every interval. While a
// gateway is unresolved, packets toward its family are dropped and counted
// (no-next-hop), never flooded.
func ResolveNextHops(ctx context.Context, cfg *config.Config, shared *Shared, interval time.Duration, log *slog.Logger) {
	d := &cfg.Dataplane
	if PublishStaticNextHop(cfg, shared) {
		return
	}
	cur := &NextHop{}
	shared.NextHop.Store(cur)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		nh := &NextHop{}
		for _, g := range []struct {
			ip  netip.Addr
			mac *[6]byte
			has *bool
		}{{d.GatewayIPv4.Addr, &nh.MAC4, &nh.Has4}, {d.GatewayIPv6.Addr, &nh.MAC6, &nh.Has6}} {
			if !g.ip.IsValid() {
				continue
			}
			if m, ok := LookupNeighbor("", d.ExceptionIf, g.ip); ok {
				*g.mac, *g.has = m, true
			} else {
				poke(d.ExceptionIf, g.ip)
			}
		}
		if *nh != *cur {
			log.Info("next hop changed", "ipv4_gateway", d.GatewayIPv4, "ipv4_mac", macStr(nh.MAC4, nh.Has4),
				"ipv6_gateway", d.GatewayIPv6, "ipv6_mac", macStr(nh.MAC6, nh.Has6))
			shared.NextHop.Store(nh)
			cur = nh
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PublishStaticNextHop publishes the configured next_hop_mac, if any, and
// reports whether there was one.
func PublishStaticNextHop(cfg *config.Config, shared *Shared) bool {
	d := &cfg.Dataplane
	if !d.NextHopMAC.Set {
		return false
	}
	shared.NextHop.Store(&NextHop{MAC4: d.NextHopMAC.HW, MAC6: d.NextHopMAC.HW, Has4: true, Has6: true})
	return true
}

func macStr(m [6]byte, ok bool) string {
	if !ok {
		return "unresolved"
	}
	return net.HardwareAddr(m[:]).String()
}
