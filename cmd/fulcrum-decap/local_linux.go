package main

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// This host's addresses. An inner packet is delivered only if its
// destination is one of them (a VIP on lo, an address of a NIC, a local
// route): anything else would be routed on by the kernel (with
// ip_forward=1) with the sender's forged source, an open relay. The
// second chance never forwards to one of them, nor to the network or
// broadcast address of a local subnet.
//
// The set is read from the kernel at start, then again every
// localRefresh, and at once (at most once per localKickGap) when an inner
// packet names an address that is not in it, so a VIP added after the
// agent started is delivered from its first packet.
const (
	localRefresh = 2 * time.Second
	localKickGap = time.Second
)

// localSet is a snapshot of this host's addresses; it is never modified
// once published.
type localSet struct {
	addrs    map[netip.Addr]bool // host addresses: interface addresses, -addr, host routes of table local
	prefixes []netip.Prefix      // the local routes wider than a host (127.0.0.0/8, AnyIP: ip route add local P dev lo)
	edges    map[netip.Addr]bool // the network and broadcast addresses of the local IPv4 subnets, and the kernel's broadcast routes
}

// has reports whether a is one of this host's addresses.
func (l *localSet) has(a netip.Addr) bool {
	if l == nil {
		return false
	}
	if l.addrs[a] {
		return true
	}
	for _, p := range l.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// edgesOf returns the network and broadcast addresses of the IPv4 prefix p
// (none for /31 and /32, RFC 3021), or its subnet-router anycast address
// (RFC 4291 §2.6.1) for an IPv6 prefix shorter than /127.
func edgesOf(p netip.Prefix) []netip.Addr {
	p = p.Masked()
	a := p.Addr()
	switch {
	case a.Is4() && p.Bits() <= 30:
		b := a.As4()
		host := uint32(1)<<(32-p.Bits()) - 1
		v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
		return []netip.Addr{a, netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})}
	case a.Is6() && p.Bits() <= 126:
		return []netip.Addr{a}
	}
	return nil
}

// edgeSet is the network and broadcast addresses of the prefixes ps.
func edgeSet(ps []netip.Prefix) map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, p := range ps {
		for _, e := range edgesOf(p) {
			m[e] = true
		}
	}
	return m
}

// readLocal reads this host's addresses: the interface addresses, extra
// (-addr), and the routes of type local and broadcast of the kernel's
// local table.
func readLocal(extra []netip.Addr) (*localSet, error) {
	l := &localSet{addrs: map[netip.Addr]bool{}, edges: map[netip.Addr]bool{}}
	for _, a := range extra {
		l.addrs[a] = true
	}
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, ia := range ifas {
		p, err := netip.ParsePrefix(ia.String())
		if err != nil {
			continue
		}
		a := p.Addr().Unmap()
		if a.Is4() {
			p = netip.PrefixFrom(a, min(p.Bits(), 32))
		}
		l.addrs[a] = true
		if a.Is4() {
			for _, e := range edgesOf(p) {
				l.edges[e] = true
			}
		}
	}
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, syscall.AF_UNSPEC)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, err
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
			continue
		}
		// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
		// scope, type, flags.
		fam, bits, table, typ := m.Data[0], int(m.Data[1]), int(m.Data[4]), m.Data[7]
		if typ != syscall.RTN_LOCAL && typ != syscall.RTN_BROADCAST {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			continue
		}
		var dst netip.Addr
		for _, at := range attrs {
			switch at.Attr.Type {
			case syscall.RTA_TABLE:
				if len(at.Value) >= 4 {
					table = int(binary.NativeEndian.Uint32(at.Value))
				}
			case syscall.RTA_DST:
				if fam == syscall.AF_INET && len(at.Value) == 4 || fam == syscall.AF_INET6 && len(at.Value) == 16 {
					dst, _ = netip.AddrFromSlice(at.Value)
				}
			}
		}
		// Only the local table: a route of type local in another table
		// (a TPROXY setup's "local 0.0.0.0/0 ... table 100") says nothing
		// about what is this host's.
		if table != syscall.RT_TABLE_LOCAL || !dst.IsValid() || bits > dst.BitLen() {
			continue
		}
		switch {
		case typ == syscall.RTN_BROADCAST:
			l.edges[dst] = true
		case bits == dst.BitLen():
			l.addrs[dst] = true
		default:
			l.prefixes = append(l.prefixes, netip.PrefixFrom(dst, bits).Masked())
		}
	}
	return l, nil
}

// monoStart and monoNow measure the gap between rereads on the monotonic
// clock: on the wall clock, a step back (NTP, date, a restored VM) made
// every miss look less than localKickGap after the last reread until the
// clock caught up, and a VIP added meanwhile lost its first packets until
// the periodic refresh. monoNow starts at localKickGap, so the first miss
// rereads.
var monoStart = time.Now()

func monoNow() int64 { return int64(time.Since(monoStart)) + int64(localKickGap) }

// isLocal reports whether addr is one of this host's addresses. On a miss
// it rereads them at once, unless a miss did so less than localKickGap ago
// (a flood of packets to foreign addresses costs one reread a second), so
// the first packet to a VIP added a moment ago is delivered.
func (a *agent) isLocal(addr netip.Addr) bool {
	if a.local.Load().has(addr) {
		return true
	}
	now := monoNow()
	last := a.lastReread.Load()
	if now-last < int64(localKickGap) || !a.lastReread.CompareAndSwap(last, now) {
		return false
	}
	l, err := readLocal(a.extra)
	if err != nil {
		a.warnOnce(&a.localWarned, "reading the local addresses (logged once; the previous set stays)", err)
		return false
	}
	a.local.Store(l)
	return l.has(addr)
}

// refreshLocal rereads the addresses every localRefresh until quit is
// closed. A failed read keeps the previous set (logged once).
func (a *agent) refreshLocal() {
	defer a.refresher.Done()
	tick := time.NewTicker(localRefresh)
	defer tick.Stop()
	for {
		select {
		case <-a.quit:
			return
		case <-tick.C:
		}
		a.refreshDiagIf()
		l, err := readLocal(a.extra)
		if err != nil {
			a.warnOnce(&a.localWarned, "reading the local addresses (logged once; the previous set stays)", err)
			continue
		}
		a.local.Store(l)
	}
}

// refreshDiagIf rereads the socket lookups' interface (diagIf): the TUN
// may be put into a VRF after the agent started. A failed read keeps the
// previous index (logged once).
func (a *agent) refreshDiagIf() {
	i, err := diagIf(a.tun.name)
	if err != nil {
		a.warnOnce(&a.diagWarnedIf, "reading the TUN device's index and VRF (logged once; socket lookups keep the previous one)", err)
		return
	}
	a.diagIf.Store(i)
}
