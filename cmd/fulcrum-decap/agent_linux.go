package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fulcrumlb/fulcrum/decap"
	"github.com/fulcrumlb/fulcrum/encap"
)

// Sizes of the receive path.
const (
	// maxPacket is a read buffer: the largest IP packet (RFC 791, RFC 8200
	// without jumbograms), so no datagram is ever cut.
	maxPacket = 65535

	// socketRcvBuf is each socket's receive buffer: 4 MiB holds a few
	// thousand full-size packets, so a burst from the LBs waits in the
	// kernel while the reader is descheduled instead of being dropped.
	// The kernel caps it at net.core.rmem_max.
	socketRcvBuf = 4 << 20
)

// source is one socket that tunnel packets arrive on.
type source struct {
	name  string // counter name: gre4, gre6, 4in4, 6in4, 4in6, 6in6, gue4, gue6
	conn  interface{ Read([]byte) (int, error) }
	from  func([]byte) (int, netip.Addr, error) // Read that also returns the outer source (for -lbs)
	close func() error
	strip func([]byte) ([]byte, decap.Kind, netip.Addr, error) // the inner packet and the second chance named
	// tos is the last datagram's outer TOS or traffic class, which from
	// reads from the socket's control data where strip cannot see the
	// outer header (raw IPv6 and UDP sockets); nil where it can (raw
	// IPv4: decap.Strip applies the outer ECN field itself).
	tos *uint8
	in  atomic.Uint64
}

// agent is the running decapsulator: its sockets, its TUN device and its
// counters.
type agent struct {
	log     *slog.Logger
	tun     *tunDevice
	sources []*source
	failed  chan error     // a reader's fatal error
	rx      sync.WaitGroup // the socket readers
	drain   sync.WaitGroup // the TUN reader
	stopped atomic.Bool

	out      [3]atomic.Uint64 // written to the TUN, by decap.Kind
	drop     [decap.NumErrors]atomic.Uint64
	tunWrite atomic.Uint64 // writes the TUN device refused
	tunRx    atomic.Uint64 // packets the kernel routed into the TUN device, discarded
	warned   atomic.Bool   // the first TUN write error was logged

	// This host's addresses (local_linux.go): only packets to them are
	// delivered, and the second chance never forwards to them.
	local        atomic.Pointer[localSet]
	extra        []netip.Addr  // -addr: local too
	lastReread   atomic.Int64  // when a miss last reread them (monoNow)
	quit         chan struct{} // closed by stop: the refresher ends
	refresher    sync.WaitGroup
	localWarned  atomic.Bool
	diagIf       atomic.Uint32 // the socket lookups' interface (diagif_linux.go), reread with the addresses
	diagWarnedIf atomic.Bool   // reading it failed (logged once; the previous index stays)
	notLocal     atomic.Uint64 // inner packets to an address not of this host, dropped
	martian      atomic.Uint64 // inner packets from or to an address no client has (martian), dropped

	// -lbs: the only outer sources tunnels are accepted from (with
	// -peers); empty: any.
	lbs   []netip.Prefix
	notLB atomic.Uint64 // tunnels from another source, dropped

	// The second chance (chance_linux.go).
	peers      []netip.Prefix      // -peers: the only addresses it forwards to
	peerEdges  map[netip.Addr]bool // the network and broadcast addresses of -peers: never forwarded to
	senders    map[string]any      // the first socket of each name (gre4, gue6 ...), to forward from
	guePort    uint16
	sc         [scNum]atomic.Uint64
	diagWarned atomic.Bool
	sendWarned atomic.Bool
}

// warnOnce logs msg with err the first time flag is set.
func (a *agent) warnOnce(flag *atomic.Bool, msg string, err error) {
	if !flag.Swap(true) {
		a.log.Warn(msg, "err", err)
	}
}

// start creates the TUN device and the sockets and starts a reader per
// socket.
func start(o options, d *decap.Decapsulator, log *slog.Logger) (*agent, error) {
	tun, err := openTUN(o.tun)
	if err != nil {
		return nil, err
	}
	a := &agent{log: log, tun: tun, failed: make(chan error, 1), peers: o.peers, lbs: o.lbs, guePort: d.GUEPort(),
		peerEdges: edgeSet(o.peers), senders: map[string]any{},
		extra: o.addrs, quit: make(chan struct{})}
	local, err := readLocal(o.addrs)
	if err != nil {
		tun.Close()
		return nil, fmt.Errorf("reading the local addresses: %w", err)
	}
	a.local.Store(local)
	a.refreshDiagIf()
	if err := a.openSources(o, d); err != nil {
		a.closeAll()
		return nil, err
	}
	for _, s := range a.sources {
		if _, ok := a.senders[s.name]; !ok {
			a.senders[s.name] = s.conn
		}
	}
	if err := tun.up(); err != nil {
		a.closeAll()
		return nil, err
	}
	if err := tun.looseRPFilter(); err != nil {
		log.Warn("rp_filter", "dev", tun.name, "err", err)
	}
	if v, err := os.ReadFile("/proc/sys/net/ipv4/conf/all/rp_filter"); err == nil && strings.TrimSpace(string(v)) == "1" {
		log.Warn("net.ipv4.conf.all.rp_filter is 1 (strict): the kernel will drop decapsulated IPv4 packets; set it to 0 or 2")
	}

	names := make([]string, len(a.sources))
	for i, s := range a.sources {
		names[i] = s.name
		a.rx.Add(1)
		go a.receive(s)
	}
	a.drain.Add(1)
	go a.drainTUN()
	a.refresher.Add(1)
	go a.refreshLocal()
	kinds := make([]string, len(o.kinds))
	for i, k := range o.kinds {
		kinds[i] = k.String()
	}
	peers := make([]string, len(o.peers))
	for i, p := range o.peers {
		peers[i] = p.String()
	}
	lbs := make([]string, len(o.lbs))
	for i, p := range o.lbs {
		lbs[i] = p.String()
	}
	if len(lbs) == 0 {
		// Open to anyone who can reach this host: forged tunnels deliver
		// forged inner packets, and with -peers make it send second
		// chances (README, "The second chance").
		log.Warn("tunnels accepted from any source: pass -lbs with the LBs' addresses")
	}
	log.Info("ready", "tun", tun.name, "kinds", strings.Join(kinds, ","), "gue_port", d.GUEPort(), "sockets", strings.Join(names, ","), "peers", strings.Join(peers, ","), "lbs", strings.Join(lbs, ","))
	return a, nil
}

// openSources opens a socket per accepted kind, outer family and local
// address. With no -addr, a failure to open an IPv6 socket (IPv6 disabled)
// is logged and skipped; any other failure is fatal.
func (a *agent) openSources(o options, d *decap.Decapsulator) error {
	type bind struct {
		fam  string // "4" or "6"
		addr netip.Addr
	}
	var binds []bind
	if len(o.addrs) == 0 {
		binds = []bind{{"4", netip.IPv4Unspecified()}, {"6", netip.IPv6Unspecified()}}
	}
	for _, ad := range o.addrs {
		fam := "4"
		if ad.Is6() {
			fam = "6"
		}
		binds = append(binds, bind{fam, ad})
	}
	for _, b := range binds {
		optional := len(o.addrs) == 0 && b.fam == "6"
		n := len(a.sources)
		err := a.openFamily(b.fam, b.addr, o, d)
		if err != nil && optional {
			a.log.Warn("no IPv6 tunnel sockets", "err", err)
			for _, s := range a.sources[n:] {
				s.close()
			}
			a.sources = a.sources[:n]
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// openFamily opens the sockets of one outer family on one local address.
func (a *agent) openFamily(fam string, addr netip.Addr, o options, d *decap.Decapsulator) error {
	var ipAddr *net.IPAddr
	if !addr.IsUnspecified() {
		ipAddr = &net.IPAddr{IP: addr.AsSlice()}
	}
	raw := func(name string, proto uint8) error {
		// Go's IPConn.Read returns the datagram as the kernel delivers it
		// (ReadFrom would cut an IPv4 header off): from the IPv4 header
		// on a raw IPv4 socket, from the payload on a raw IPv6 socket.
		c, err := net.ListenIP(fmt.Sprintf("ip%s:%d", fam, proto), ipAddr)
		if err != nil {
			return fmt.Errorf("raw socket ip%s protocol %d on %s: %w", fam, proto, addr, err)
		}
		_ = c.SetReadBuffer(socketRcvBuf)
		if err := noBroadcast(c); err != nil {
			c.Close()
			return err
		}
		strip := d.StripChance
		// The outer source: in the IPv4 header a raw IPv4 socket
		// delivers; from recvfrom's address on a raw IPv6 socket.
		from := func(b []byte) (int, netip.Addr, error) {
			n, err := c.Read(b)
			if err != nil || n < 20 {
				return n, netip.Addr{}, err
			}
			return n, netip.AddrFrom4([4]byte(b[12:16])), nil
		}
		var tos *uint8
		if fam == "6" {
			strip = func(b []byte) ([]byte, decap.Kind, netip.Addr, error) { return d.StripPayloadChance(proto, b) }
			r, err := newRecvFrom6(c)
			if err != nil {
				c.Close()
				return err
			}
			from, tos = r.read, &r.tos
		}
		a.sources = append(a.sources, &source{name: name, conn: c, from: from, close: c.Close, strip: strip, tos: tos})
		return nil
	}
	for _, k := range o.kinds {
		var err error
		switch k {
		case decap.GRE:
			err = raw("gre"+fam, 47)
		case decap.IPIP:
			if err = raw("4in"+fam, 4); err == nil {
				err = raw("6in"+fam, 41)
			}
		case decap.GUE:
			c, lerr := net.ListenUDP("udp"+fam, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, d.GUEPort())))
			if lerr != nil {
				err = fmt.Errorf("udp socket on %s port %d: %w", addr, d.GUEPort(), lerr)
				break
			}
			_ = c.SetReadBuffer(socketRcvBuf)
			if err = noBroadcast(c); err != nil {
				c.Close()
				break
			}
			if fam == "6" && o.zeroCsum6 {
				if err = allowZeroChecksum6(c); err != nil {
					c.Close()
					break
				}
			}
			if err = recvTOS(c, fam == "6"); err != nil {
				c.Close()
				break
			}
			tos := new(uint8)
			oob := make([]byte, 64)
			from := func(b []byte) (int, netip.Addr, error) {
				n, oobn, _, ap, err := c.ReadMsgUDPAddrPort(b, oob)
				*tos = tosFrom(oob[:oobn])
				return n, ap.Addr().Unmap(), err
			}
			a.sources = append(a.sources, &source{name: "gue" + fam, conn: c, from: from, close: c.Close, strip: d.StripGUEChance, tos: tos})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// receive is one socket's loop: read a tunnel packet, strip it, write the
// inner packet to the TUN device. Each loop owns its buffer, so the inner
// slice (which points into it) is written before the next read.
func (a *agent) receive(s *source) {
	defer a.rx.Done()
	buf := make([]byte, maxPacket)
	var st scState
	defer func() {
		if st.diag != nil {
			st.diag.close()
		}
	}()
	for {
		var n int
		var src netip.Addr
		var err error
		if len(a.lbs) != 0 || s.tos != nil {
			n, src, err = s.from(buf)
		} else {
			n, err = s.conn.Read(buf)
		}
		if err != nil {
			if a.stopped.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case a.failed <- fmt.Errorf("%s: %w", s.name, err):
			default:
			}
			return
		}
		s.in.Add(1)
		if len(a.lbs) != 0 && !a.fromLB(src) && !a.fromPeer(src) {
			a.notLB.Add(1)
			continue
		}
		inner, kind, chance, err := s.strip(buf[:n])
		if err == nil && s.tos != nil {
			err = decap.ECN(*s.tos, inner) // RFC 6040 §4.2, as decap.Strip does where it sees the outer header
		}
		if err != nil {
			// A type assertion, not errors.As: that would move e to the
			// heap, an allocation per refused packet.
			if e, ok := err.(decap.Error); ok && e < decap.NumErrors {
				a.drop[e].Add(1)
			}
			continue
		}
		if martianInner(inner) || a.local.Load().has(innerSrc(inner)) {
			// A source of this host's own is forged: the service would
			// answer itself (IPv4's kernel drops such a packet as a
			// martian unless accept_local is set; IPv6's delivers it).
			a.martian.Add(1)
			continue
		}
		if !a.isLocal(innerDst(inner)) {
			a.notLocal.Add(1)
			continue
		}
		if chance.IsValid() && len(a.lbs) != 0 && !a.fromLB(src) {
			// A forward from a peer names no second chance: one that
			// does is not acted upon (a peer's address may be forged).
			a.sc[scIn].Add(1)
			a.sc[scNotAllowed].Add(1)
			chance = netip.Addr{}
		}
		if chance.IsValid() && a.secondChance(&st, kind, inner, chance) {
			continue // forwarded to the second-chance backend
		}
		if _, err := a.tun.Write(inner); err != nil {
			a.tunWrite.Add(1)
			if !a.warned.Swap(true) {
				a.log.Warn("tun write (logged once, counted as drop.tun-write)", "dev", a.tun.name, "err", err)
			}
			continue
		}
		a.out[kind].Add(1)
	}
}

// innerDst is the destination of the inner packet (checked by package
// decap: a whole IPv4 or IPv6 header).
func innerDst(inner []byte) netip.Addr {
	if inner[0]>>4 == 6 {
		return netip.AddrFrom16([16]byte(inner[24:40]))
	}
	return netip.AddrFrom4([4]byte(inner[16:20]))
}

// innerSrc is the source of the inner packet (checked by package decap).
func innerSrc(inner []byte) netip.Addr {
	if inner[0]>>4 == 6 {
		return netip.AddrFrom16([16]byte(inner[8:24]))
	}
	return netip.AddrFrom4([4]byte(inner[12:16]))
}

// martianInner reports whether the inner packet (checked by package
// decap) has a source no client can have (loopback, unspecified,
// multicast, IPv4's 0/8, 240/4 and limited broadcast: not
// encap.IsUnicast; an IPv4-mapped IPv6 address; link-local, which no
// router forwards, and to which this host's reply would go on its own
// link) or a loopback destination. The local table holds 127.0.0.0/8,
// so isLocal would take 127.0.0.1 as this host's: only a forged packet
// names it, and the TUN is no loopback device.
func martianInner(inner []byte) bool {
	src, dst := innerSrc(inner), innerDst(inner)
	return !encap.IsUnicast(src) || src.Is4In6() || src.IsLinkLocalUnicast() || dst.IsLoopback()
}

// fromLB reports whether src is within -lbs.
func (a *agent) fromLB(src netip.Addr) bool {
	for _, p := range a.lbs {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// fromPeer reports whether src is within -peers: another backend's agent
// forwarding a second chance.
func (a *agent) fromPeer(src netip.Addr) bool {
	for _, p := range a.peers {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// drainTUN reads what the kernel routes into the TUN device (nothing should
// be routed there; a stray route or IPv6 autoconfiguration may), so it
// never queues up, and counts it.
func (a *agent) drainTUN() {
	defer a.drain.Done()
	buf := make([]byte, maxPacket)
	for {
		if _, err := a.tun.Read(buf); err != nil {
			return
		}
		a.tunRx.Add(1)
	}
}

// stop closes every socket, lets the readers finish the packet in hand,
// then closes the TUN device (which removes it).
func (a *agent) stop() {
	a.stopped.Store(true)
	for _, s := range a.sources {
		s.close()
	}
	a.rx.Wait()
	a.tun.Close()
	a.drain.Wait()
	close(a.quit)
	a.refresher.Wait()
}

// closeAll releases what start opened before it failed.
func (a *agent) closeAll() {
	for _, s := range a.sources {
		s.close()
	}
	a.tun.Close()
}

// logCounters logs every counter as one line (drop reasons only when not
// zero).
func (a *agent) logCounters(msg string) {
	// Sockets of one name (several -addr of a family) add up.
	var names []string
	in := map[string]uint64{}
	for _, s := range a.sources {
		if _, ok := in[s.name]; !ok {
			names = append(names, s.name)
		}
		in[s.name] += s.in.Load()
	}
	var attrs []any
	for _, n := range names {
		attrs = append(attrs, "in."+n, in[n])
	}
	for k := range a.out {
		attrs = append(attrs, "out."+decap.Kind(k).String(), a.out[k].Load())
	}
	var dropped uint64
	for e := decap.Error(1); e < decap.NumErrors; e++ {
		if v := a.drop[e].Load(); v != 0 {
			attrs = append(attrs, "drop."+e.String(), v)
			dropped += v
		}
	}
	for _, c := range []struct {
		name string
		v    *atomic.Uint64
	}{{"drop.tun-write", &a.tunWrite}, {"drop.inner-not-local", &a.notLocal}, {"drop.inner-martian", &a.martian}, {"drop.outer-not-lb", &a.notLB}} {
		if v := c.v.Load(); v != 0 {
			attrs = append(attrs, c.name, v)
			dropped += v
		}
	}
	attrs = append(attrs, "dropped", dropped, "tun.rx", a.tunRx.Load())
	for i := range a.sc {
		attrs = append(attrs, "second_chance."+scNames[i], a.sc[i].Load())
	}
	a.log.Info(msg, attrs...)
}
