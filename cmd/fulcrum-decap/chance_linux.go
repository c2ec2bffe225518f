package main

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"github.com/fulcrumlb/fulcrum/decap"
	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/packet"
)

// The second chance (docs/second-chance.md). The LB names, in the tunnel
// header of a mid-connection packet it could not place with certainty,
// the backend its previous table chose. If no local socket owns the
// packet's TCP flow, the agent forwards it there, once: re-encapsulated in
// the same kind of tunnel without the field, so the receiving agent
// delivers it locally whatever it finds (a hop limit of one), and never to
// an address outside -peers (so a forged field cannot make the agent an
// open relay) or to itself.

// What happened to packets that named a second chance, in counter order.
const (
	scIn         = iota // packets naming a second chance
	scForwarded         // no local socket: sent to the second-chance backend
	scLocal             // a local socket owns the flow: delivered here
	scSkipped           // not a TCP segment, or a SYN: delivered here, no lookup
	scNotAllowed        // the named backend is not in -peers (or -peers is empty), is a network or broadcast address, or came from outside -lbs: delivered here
	scSelf              // the named backend is this host: delivered here
	scLookupErr         // the socket lookup failed: delivered here
	scNoSender          // no socket of the tunnel kind and family to send from: delivered here
	scSendErr           // sending failed: delivered here
	scNum
)

var scNames = [scNum]string{"in", "forwarded", "local", "skipped", "not-allowed", "self", "lookup-error", "no-sender", "send-error"}

// scState is one receive loop's second-chance machinery: its socket
// lookups and its forwarding buffer (one per loop, never shared).
type scState struct {
	diag *sockDiag
	out  []byte
}

// flowOf reads the TCP flow of the inner IP packet: the client (source)
// and the service (destination) endpoints, and the segment's flags. ok is
// false for anything but an unfragmented TCP segment (after any IPv6
// extension headers, which the LB steps over too).
func flowOf(inner []byte) (client, service netip.AddrPort, flags uint8, ok bool) {
	var tcp []byte
	var src, dst netip.Addr
	switch {
	case len(inner) >= header.IPv4MinimumSize && inner[0]>>4 == 4:
		ip := header.IPv4(inner)
		if ip.Protocol() != header.ProtoTCP || ip.IsFragment() {
			return
		}
		hl := ip.HeaderLength()
		if hl < header.IPv4MinimumSize || len(inner) < hl {
			return
		}
		src, dst = netip.AddrFrom4([4]byte(inner[12:16])), netip.AddrFrom4([4]byte(inner[16:20]))
		tcp = inner[hl:]
	case len(inner) >= header.IPv6MinimumSize && inner[0]>>4 == 6:
		nh, off := inner[6], header.IPv6MinimumSize
		if header.IPv6ExtAll.Has(nh) {
			// The LB walks extension headers to TCP (package packet)
			// and names a second chance for such a segment too.
			w := header.WalkIPv6Ext(inner, off, nh, header.IPv6ExtAll, packet.MaxExtHeaders)
			// An atomic fragment (offset 0, M clear) is the whole
			// segment, as the LB takes it (RFC 6946).
			if w.Status != header.IPv6ExtOK || w.Fragments > 1 || w.Fragment && (w.FragOffset != 0 || w.MoreFragments) {
				return
			}
			nh, off = w.Proto, w.Off
		}
		if nh != header.ProtoTCP {
			return
		}
		src, dst = netip.AddrFrom16([16]byte(inner[8:24])), netip.AddrFrom16([16]byte(inner[24:40]))
		tcp = inner[off:]
	default:
		return
	}
	if len(tcp) < 14 {
		return
	}
	client = netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:]))
	service = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(tcp[2:]))
	return client, service, tcp[13], true
}

// TCP flags (RFC 9293).
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
)

// allowed reports whether the agent may forward to a: one of -peers, and
// not one of its own addresses, nor the network or broadcast address of a
// -peers prefix or of a local subnet (a send there reaches every host of
// the segment).
func (a *agent) allowed(to netip.Addr) (bool, int) {
	local := a.local.Load()
	if local.has(to) {
		return false, scSelf
	}
	if a.peerEdges[to] || local != nil && local.edges[to] {
		return false, scNotAllowed
	}
	for _, p := range a.peers {
		if p.Contains(to) {
			return true, 0
		}
	}
	return false, scNotAllowed
}

// secondChance handles a packet whose tunnel named the backend to: it
// returns true when it forwarded the packet there (the caller then does
// not deliver it), false when the packet is to be delivered here.
func (a *agent) secondChance(st *scState, kind decap.Kind, inner []byte, to netip.Addr) bool {
	a.sc[scIn].Add(1)
	client, service, flags, ok := flowOf(inner)
	if !ok || flags&tcpSYN != 0 {
		a.sc[scSkipped].Add(1)
		return false
	}
	if ok, why := a.allowed(to); !ok {
		a.sc[why].Add(1)
		return false
	}
	if st.diag == nil {
		d, err := openSockDiag()
		if err != nil {
			a.sc[scLookupErr].Add(1)
			a.warnOnce(&a.diagWarned, "sock_diag (logged once, counted as second_chance.lookup-error)", err)
			return false
		}
		st.diag = d
	}
	owned, err := st.diag.owned(service, client, flags&(tcpFIN|tcpRST) != 0, a.diagIf.Load())
	if err != nil {
		a.sc[scLookupErr].Add(1)
		a.warnOnce(&a.diagWarned, "sock_diag (logged once, counted as second_chance.lookup-error)", err)
		return false
	}
	if owned {
		a.sc[scLocal].Add(1)
		return false
	}
	if err := a.forward(st, kind, inner, to); err != nil {
		if errors.Is(err, errNoSender) {
			a.sc[scNoSender].Add(1)
		} else {
			a.sc[scSendErr].Add(1)
			a.warnOnce(&a.sendWarned, "second-chance send (logged once, counted as second_chance.send-error)", err)
		}
		return false
	}
	a.sc[scForwarded].Add(1)
	return true
}

var errNoSender = errors.New("no socket to send from")

// forward sends inner to the backend to in a tunnel of kind with no
// second chance: GRE (RFC 2784, no key) from the raw GRE socket, GUE
// (variant 0, no private data) from the GUE socket to the GUE port. The
// kernel writes the outer IP header, from this host's address.
func (a *agent) forward(st *scState, kind decap.Kind, inner []byte, to netip.Addr) error {
	v6 := inner[0]>>4 == 6
	if cap(st.out) < 4+len(inner) {
		st.out = make([]byte, 0, maxPacket+4)
	}
	out := st.out[:4+len(inner)]
	copy(out[4:], inner)
	fam := "4"
	if to.Is6() {
		fam = "6"
	}
	switch kind {
	case decap.GRE:
		et := uint16(header.EtherTypeIPv4)
		if v6 {
			et = header.EtherTypeIPv6
		}
		header.GRE(out).SetFlags(0)
		header.GRE(out).SetProtocolType(et)
		c, ok := a.senders["gre"+fam].(*net.IPConn)
		if !ok {
			return errNoSender
		}
		_, err := c.WriteToIP(out, &net.IPAddr{IP: to.AsSlice()})
		return err
	case decap.GUE:
		proto := uint8(header.ProtoIPIP)
		if v6 {
			proto = header.ProtoIPv6
		}
		header.GUE(out).Encode(proto)
		c, ok := a.senders["gue"+fam].(*net.UDPConn)
		if !ok {
			return errNoSender
		}
		_, err := c.WriteToUDPAddrPort(out, netip.AddrPortFrom(to, a.guePort))
		return err
	}
	return errNoSender
}
