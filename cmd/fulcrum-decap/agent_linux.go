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
	close func() error
	strip func([]byte) ([]byte, decap.Kind, netip.Addr, error) // the inner packet and the second chance named
	in    atomic.Uint64
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

	// The second chance (chance_linux.go).
	peers      []netip.Prefix      // -peers: the only addresses it forwards to
	self       map[netip.Addr]bool // this host's addresses: never forwarded to
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
	a := &agent{log: log, tun: tun, failed: make(chan error, 1), peers: o.peers, guePort: d.GUEPort(),
		self: map[netip.Addr]bool{}, senders: map[string]any{}}
	if err := a.openSources(o, d); err != nil {
		a.closeAll()
		return nil, err
	}
	for _, s := range a.sources {
		if _, ok := a.senders[s.name]; !ok {
			a.senders[s.name] = s.conn
		}
	}
	for _, ad := range o.addrs {
		a.self[ad] = true
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range addrs {
			if p, err := netip.ParsePrefix(ia.String()); err == nil {
				a.self[p.Addr().Unmap()] = true
			}
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
	kinds := make([]string, len(o.kinds))
	for i, k := range o.kinds {
		kinds[i] = k.String()
	}
	peers := make([]string, len(o.peers))
	for i, p := range o.peers {
		peers[i] = p.String()
	}
	log.Info("ready", "tun", tun.name, "kinds", strings.Join(kinds, ","), "gue_port", d.GUEPort(), "sockets", strings.Join(names, ","), "peers", strings.Join(peers, ","))
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
		strip := d.StripChance
		if fam == "6" {
			strip = func(b []byte) ([]byte, decap.Kind, netip.Addr, error) { return d.StripPayloadChance(proto, b) }
		}
		a.sources = append(a.sources, &source{name: name, conn: c, close: c.Close, strip: strip})
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
			if fam == "6" && o.zeroCsum6 {
				if err = allowZeroChecksum6(c); err != nil {
					c.Close()
					break
				}
			}
			a.sources = append(a.sources, &source{name: "gue" + fam, conn: c, close: c.Close, strip: d.StripGUEChance})
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
		n, err := s.conn.Read(buf)
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
		inner, kind, chance, err := s.strip(buf[:n])
		if err != nil {
			var e decap.Error
			if errors.As(err, &e) && e < decap.NumErrors {
				a.drop[e].Add(1)
			}
			continue
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
	if v := a.tunWrite.Load(); v != 0 {
		attrs = append(attrs, "drop.tun-write", v)
		dropped += v
	}
	attrs = append(attrs, "dropped", dropped, "tun.rx", a.tunRx.Load())
	for i := range a.sc {
		attrs = append(attrs, "second_chance."+scNames[i], a.sc[i].Load())
	}
	a.log.Info(msg, attrs...)
}
