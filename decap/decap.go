package decap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/internal/inetsum"
)

// Kind is a tunnel encapsulation, the same values package encap writes.
type Kind = encap.Kind

// The tunnel kinds (see encap.Kind).
const (
	GRE  = encap.GRE
	IPIP = encap.IPIP
	GUE  = encap.GUE

	// numKinds sizes the accept table from encap's registry, so a kind
	// encap gains is known here (and refused until Strip handles it).
	numKinds = int(encap.NumKinds)
)

// Limits and defaults.
const (
	// DefaultGUEPort is the GUE destination port when Config.GUEPort is 0:
	// the encapsulator's own default (IANA's 6080), so the two ends agree
	// out of the box.
	DefaultGUEPort = encap.DefaultGUEPort

	// MaxExtHeaders bounds the outer IPv6 extension headers skipped before
	// the tunnel header. Fulcrum writes none; RFC 8200 §4.1 lists at most
	// one of each kind (two destination options) before the upper layer.
	MaxExtHeaders = 4

	// MaxInnerExtHeaders bounds the inner IPv6 extension headers stepped
	// over to find the inner protocol (ErrInnerTunnel): an inner packet
	// with a longer chain is refused, since what it carries is not known.
	MaxInnerExtHeaders = 8
)

// Header sizes and numbers this package reads.
const (
	ipv4Len = header.IPv4MinimumSize
	ipv6Len = header.IPv6MinimumSize
	greLen  = header.GREMinimumSize  // RFC 2784 base header
	greCLen = header.GREChecksumSize // with the checksum and Reserved1 words
	udpLen  = header.UDPMinimumSize
	gueLen  = header.GUEMinimumSize // variant 0 base header

	protoIPIP = header.ProtoIPIP
	protoUDP  = header.ProtoUDP
	protoIPv6 = header.ProtoIPv6
	protoGRE  = header.ProtoGRE

	etherTypeIPv4 = header.EtherTypeIPv4
	etherTypeIPv6 = header.EtherTypeIPv6
)

// ErrConfig is wrapped by every error New returns.
var ErrConfig = errors.New("invalid decap config")

// Config says which tunnels a Decapsulator accepts. The zero value accepts
// every kind, with GUE on DefaultGUEPort.
type Config struct {
	// Kinds lists the kinds to accept; empty means all of encap.Kinds. A
	// well-formed tunnel of another kind is refused with ErrKindDisabled.
	Kinds []Kind

	// GUEPort is the UDP destination port of GUE (0: DefaultGUEPort).
	GUEPort uint16

	// GUEZeroChecksumV6 accepts GUE over IPv6 with a zero UDP checksum
	// (RFC 6935), to pair with encap.Config.GUEZeroChecksumV6.
	GUEZeroChecksumV6 bool
}

// Decapsulator strips tunnel headers. It is immutable after New, so
// goroutines share one without locks.
type Decapsulator struct {
	accept    [numKinds]bool
	guePort   uint16
	zeroCsum6 bool
}

// New checks cfg and returns its Decapsulator.
func New(cfg Config) (*Decapsulator, error) {
	d := &Decapsulator{guePort: cfg.GUEPort, zeroCsum6: cfg.GUEZeroChecksumV6}
	if d.guePort == 0 {
		d.guePort = DefaultGUEPort
	}
	if len(cfg.Kinds) == 0 {
		for k := range d.accept {
			d.accept[k] = true
		}
	}
	for _, k := range cfg.Kinds {
		if int(k) >= numKinds {
			return nil, fmt.Errorf("decap: %v is not one of %v: %w", k, encap.Kinds(), ErrConfig)
		}
		d.accept[k] = true
	}
	return d, nil
}

// Accepts reports whether d accepts tunnels of kind k.
func (d *Decapsulator) Accepts(k Kind) bool { return int(k) < numKinds && d.accept[k] }

// GUEPort is the UDP port d takes for GUE.
func (d *Decapsulator) GUEPort() uint16 { return d.guePort }

// std is the zero Config's Decapsulator, behind the package-level functions.
var std, _ = New(Config{})

// Strip is Decapsulator.Strip with the zero Config: every kind, GUE on
// port 6080, no zero UDP checksum over IPv6.
func Strip(pkt []byte) (inner []byte, kind Kind, err error) { return std.Strip(pkt) }

// StripChance is Decapsulator.StripChance with the zero Config.
func StripChance(pkt []byte) (inner []byte, kind Kind, chance netip.Addr, err error) {
	return std.StripChance(pkt)
}

// StripPayload is Decapsulator.StripPayload with the zero Config.
func StripPayload(proto uint8, b []byte) (inner []byte, kind Kind, err error) {
	return std.StripPayload(proto, b)
}

// StripGUE is Decapsulator.StripGUE with the zero Config.
func StripGUE(b []byte) (inner []byte, kind Kind, err error) { return std.StripGUE(b) }

// Strip checks the tunnel packet pkt, which starts at its outer IPv4 or
// IPv6 header, and returns the inner IP packet as a sub-slice of pkt,
// trimmed to its stated length. On error inner is nil, err is an Error,
// and kind is meaningful only if the tunnel header was reached (a GRE*,
// GUE*, UDP*, Inner* or kind-disabled error).
func (d *Decapsulator) Strip(pkt []byte) (inner []byte, kind Kind, err error) {
	return d.strip(pkt, nil)
}

// StripChance is Strip that also returns the second chance the tunnel
// header names (docs/second-chance.md): the backend the LB's previous
// table chose for the flow, or the zero Addr when the header names none.
func (d *Decapsulator) StripChance(pkt []byte) (inner []byte, kind Kind, chance netip.Addr, err error) {
	inner, kind, err = d.strip(pkt, &chance)
	if err != nil {
		chance = netip.Addr{}
	}
	return inner, kind, chance, err
}

// strip is Strip; a second chance in the header is stored in *ch unless
// ch is nil (it is checked either way).
func (d *Decapsulator) strip(pkt []byte, ch *netip.Addr) (inner []byte, kind Kind, err error) {
	if len(pkt) == 0 {
		return nil, 0, ErrTruncated
	}
	switch pkt[0] >> 4 {
	case 4:
		return d.strip4(pkt, ch)
	case 6:
		return d.strip6(pkt, ch)
	}
	return nil, 0, ErrIPVersion
}

func (d *Decapsulator) strip4(pkt []byte, ch *netip.Addr) ([]byte, Kind, error) {
	ip := header.IPv4(pkt)
	if len(ip) < ipv4Len {
		return nil, 0, ErrTruncated
	}
	ihl := ip.HeaderLength()
	total := int(ip.TotalLength())
	if ihl < ipv4Len || total < ihl {
		return nil, 0, ErrIPHeader
	}
	if total > len(pkt) {
		return nil, 0, ErrTruncated
	}
	if !ip.IsChecksumValid() {
		return nil, 0, ErrIPChecksum
	}
	if ip.IsFragment() {
		return nil, 0, ErrFragment
	}
	proto, payload := ip.Protocol(), pkt[ihl:total]
	if proto == protoUDP {
		// RFC 768 pseudo-header: source, destination, protocol, length.
		inner, kind, err := d.udp(payload, ip.AddressSum(), false, ch)
		return withECN(ip.TOS(), inner, kind, err)
	}
	inner, kind, err := d.stripPayload(proto, payload, ch)
	return withECN(ip.TOS(), inner, kind, err)
}

// withECN applies RFC 6040 §4.2 to a stripped inner packet, as Linux's
// tunnels do (INET_ECN_decapsulate): the outer header's ECN field, which
// routers between LB and backend may have marked, is moved to the inner
// header; an outer CE over a Not-ECT inner packet is dropped.
func withECN(outerTOS uint8, inner []byte, kind Kind, err error) ([]byte, Kind, error) {
	if err == nil && !ecnDecap(outerTOS, inner) {
		return nil, kind, ErrECN
	}
	return inner, kind, err
}

// ECN is what Strip does with the outer header's ECN field, for a caller
// of StripPayload or StripGUE, which see no outer header: the caller got
// outerTOS (the outer IPv4 TOS or IPv6 traffic class) from the socket
// (IP_RECVTOS, IPV6_RECVTCLASS). It rewrites inner, an inner packet they
// returned, as RFC 6040 §4.2 says, or returns ErrECN: an outer CE over a
// Not-ECT inner packet, which must be dropped.
func ECN(outerTOS uint8, inner []byte) error {
	if !ecnDecap(outerTOS, inner) {
		return ErrECN
	}
	return nil
}

// ecnDecap rewrites the ECN field of inner (an IP packet innerIP checked)
// from the outer header's TOS / traffic class, and reports false when
// the packet must be dropped.
func ecnDecap(outerTOS uint8, inner []byte) bool {
	o := outerTOS & 3
	if o == 0 {
		return true
	}
	v6 := inner[0]>>4 == 6
	in := inner[1] & 3
	if v6 {
		in = inner[1] >> 4 & 3
	}
	var set uint8
	switch {
	case in == 0:
		return o != 3 // ECT outside, Not-ECT inside: left alone
	case o == 3 && in != 3:
		set = 3
	case o == 1 && in == 2:
		set = 1
	default:
		return true
	}
	if v6 {
		inner[1] = inner[1]&^0x30 | set<<4
		return true
	}
	// RFC 1624 incremental update of the header checksum.
	old := binary.BigEndian.Uint16(inner[0:2])
	inner[1] = inner[1]&^3 | set
	s := uint64(^binary.BigEndian.Uint16(inner[10:12])) + uint64(^old) + uint64(binary.BigEndian.Uint16(inner[0:2]))
	binary.BigEndian.PutUint16(inner[10:12], ^inetsum.Fold(s))
	return true
}

func (d *Decapsulator) strip6(pkt []byte, ch *netip.Addr) ([]byte, Kind, error) {
	ip := header.IPv6(pkt)
	if len(ip) < ipv6Len {
		return nil, 0, ErrTruncated
	}
	end := ipv6Len + int(ip.PayloadLength())
	if end > len(pkt) {
		return nil, 0, ErrTruncated
	}
	// Only the option headers are skipped: a fragment is refused, and AH
	// is not stepped over, since nothing here would check it.
	nh, off := ip.NextHeader(), ipv6Len
	if header.IPv6ExtOptions.Has(nh) { // Fulcrum's own tunnels have none: no call
		w := header.WalkIPv6Ext(pkt[:end], off, nh, header.IPv6ExtOptions, MaxExtHeaders)
		switch w.Status {
		case header.IPv6ExtTooMany:
			return nil, 0, ErrIPHeader
		case header.IPv6ExtTruncated:
			return nil, 0, ErrTruncated
		}
		nh, off = w.Proto, w.Off
	}
	if nh == header.ProtoFragment {
		return nil, 0, ErrFragment
	}
	payload := pkt[off:end]
	if nh == protoUDP {
		// RFC 8200 §8.1 pseudo-header: source, destination, length,
		// next header.
		inner, kind, err := d.udp(payload, ip.AddressSum(), true, ch)
		return withECN(ip.TrafficClass(), inner, kind, err)
	}
	inner, kind, err := d.stripPayload(nh, payload, ch)
	return withECN(ip.TrafficClass(), inner, kind, err)
}

// StripPayload is Strip for a caller that has consumed the outer IP header
// itself: b starts at the tunnel header of an outer packet whose protocol
// (IPv4) or final next header (IPv6) is proto: GRE (47), or the inner
// packet itself for IPIP (4 or 41). This is what a raw IPv6 socket reads.
// UDP is refused with ErrProtocol: its checksum needs the outer addresses,
// so GUE goes through Strip or, from a UDP socket, StripGUE.
func (d *Decapsulator) StripPayload(proto uint8, b []byte) (inner []byte, kind Kind, err error) {
	return d.stripPayload(proto, b, nil)
}

// StripPayloadChance is StripPayload that also returns the second chance
// (see StripChance).
func (d *Decapsulator) StripPayloadChance(proto uint8, b []byte) (inner []byte, kind Kind, chance netip.Addr, err error) {
	inner, kind, err = d.stripPayload(proto, b, &chance)
	if err != nil {
		chance = netip.Addr{}
	}
	return inner, kind, chance, err
}

func (d *Decapsulator) stripPayload(proto uint8, b []byte, ch *netip.Addr) (inner []byte, kind Kind, err error) {
	switch proto {
	case protoGRE:
		return d.gre(b, ch)
	case protoIPIP, protoIPv6:
		if !d.accept[IPIP] {
			return nil, IPIP, ErrKindDisabled
		}
		inner, err = d.innerIP(b, proto == protoIPv6)
		return inner, IPIP, err
	}
	return nil, 0, ErrProtocol
}

func (d *Decapsulator) gre(b []byte, ch *netip.Addr) ([]byte, Kind, error) {
	if !d.accept[GRE] {
		return nil, GRE, ErrKindDisabled
	}
	g := header.GRE(b)
	if len(g) < greLen {
		return nil, GRE, ErrTruncated
	}
	flags := g.Flags()
	if flags&header.GREVersionMask != 0 {
		return nil, GRE, ErrGREVersion
	}
	if flags&header.GREFlagsMustBeZero&^encap.GREFlagKey != 0 {
		return nil, GRE, ErrGREFlags
	}
	var v6 bool
	switch g.ProtocolType() {
	case etherTypeIPv4:
	case etherTypeIPv6:
		v6 = true
	default:
		return nil, GRE, ErrGREProtocol
	}
	hl := greLen
	if flags&header.GREFlagChecksum != 0 {
		// RFC 2784 §2.5: the ones' complement checksum of the GRE header
		// and payload, so the whole sums to all ones.
		hl = greCLen
		if len(b) < hl {
			return nil, GRE, ErrTruncated
		}
		if inetsum.Fold(inetsum.Add(0, b)) != 0xffff {
			return nil, GRE, ErrGREChecksum
		}
	}
	if flags&encap.GREFlagKey != 0 {
		// RFC 2890: the key follows the checksum words, if any. Fulcrum's
		// key is a second chance: an IPv4 unicast address.
		if len(b) < hl+4 {
			return nil, GRE, ErrTruncated
		}
		a := netip.AddrFrom4([4]byte(b[hl : hl+4]))
		if !chanceAddr(a) {
			return nil, GRE, ErrSecondChance
		}
		if ch != nil {
			*ch = a
		}
		hl += 4
	}
	inner, err := d.innerIP(b[hl:], v6)
	return inner, GRE, err
}

// udp checks a UDP datagram b (from its header) whose pseudo-header
// addresses sum to addrSum, and strips GUE from it.
func (d *Decapsulator) udp(b []byte, addrSum uint64, v6 bool, ch *netip.Addr) ([]byte, Kind, error) {
	u := header.UDP(b)
	if len(u) < udpLen {
		return nil, 0, ErrTruncated
	}
	if u.DestinationPort() != d.guePort {
		return nil, 0, ErrUDPPort
	}
	if !d.accept[GUE] {
		return nil, GUE, ErrKindDisabled
	}
	ulen := int(u.Length())
	if ulen < udpLen || ulen > len(b) {
		return nil, GUE, ErrUDPLength
	}
	b = b[:ulen]
	if u.Checksum() == 0 {
		if v6 && !d.zeroCsum6 {
			return nil, GUE, ErrUDPZeroChecksum
		}
	} else if inetsum.Fold(inetsum.Add(header.PseudoHeaderSum(addrSum, protoUDP, ulen), b)) != 0xffff {
		return nil, GUE, ErrUDPChecksum
	}
	return d.stripGUE(b[udpLen:], ch)
}

// StripGUE is Strip for the payload of a UDP datagram to the GUE port, as
// a UDP socket reads it (the kernel has checked the UDP header and
// checksum): b starts at the GUE header.
func (d *Decapsulator) StripGUE(b []byte) (inner []byte, kind Kind, err error) {
	return d.stripGUE(b, nil)
}

// StripGUEChance is StripGUE that also returns the second chance (see
// StripChance).
func (d *Decapsulator) StripGUEChance(b []byte) (inner []byte, kind Kind, chance netip.Addr, err error) {
	inner, kind, err = d.stripGUE(b, &chance)
	if err != nil {
		chance = netip.Addr{}
	}
	return inner, kind, chance, err
}

func (d *Decapsulator) stripGUE(b []byte, ch *netip.Addr) (inner []byte, kind Kind, err error) {
	if !d.accept[GUE] {
		return nil, GUE, ErrKindDisabled
	}
	if len(b) == 0 {
		return nil, GUE, ErrTruncated
	}
	g := header.GUE(b)
	var v6 bool
	switch g.Variant() {
	case 0:
	case 1:
		// Variant 1: no GUE header, the IPv4 (0100) or IPv6 (0110)
		// header starts right here.
		switch header.IPv4(b).Version() {
		case header.IPv4Version:
		case header.IPv6Version:
			v6 = true
		default:
			return nil, GUE, ErrGUEProtocol
		}
		inner, err = d.innerIP(b, v6)
		return inner, GUE, err
	default:
		return nil, GUE, ErrGUEVersion
	}
	if len(g) < gueLen {
		return nil, GUE, ErrTruncated
	}
	if g.Control() {
		return nil, GUE, ErrGUEControl
	}
	if g.Flags() != 0 {
		return nil, GUE, ErrGUEFlags
	}
	switch g.Protocol() {
	case protoIPIP:
	case protoIPv6:
		v6 = true
	default:
		return nil, GUE, ErrGUEProtocol
	}
	hl := g.HeaderLength()
	if len(b) < hl {
		return nil, GUE, ErrTruncated
	}
	if hl >= gueLen+4 && binary.BigEndian.Uint16(b[gueLen:]) == encap.GUEChanceType {
		// Fulcrum's private data block (no flags, so it starts right
		// after the base header): type, family, reserved, address.
		var a netip.Addr
		blk := b[gueLen:hl]
		switch {
		case blk[2] == 4 && len(blk) >= 8:
			a = netip.AddrFrom4([4]byte(blk[4:8]))
		case blk[2] == 6 && len(blk) >= 20:
			a = netip.AddrFrom16([16]byte(blk[4:20]))
		}
		if !chanceAddr(a) {
			return nil, GUE, ErrSecondChance
		}
		if ch != nil {
			*ch = a
		}
	}
	inner, err = d.innerIP(b[hl:], v6)
	return inner, GUE, err
}

// innerIP is the package's innerIP, then refuses an inner packet that is itself a
// tunnel (ErrInnerTunnel): protocol 4, 41 or 47, or UDP to d's GUE port.
func (d *Decapsulator) innerIP(b []byte, v6 bool) ([]byte, error) {
	inner, err := innerIP(b, v6)
	if err != nil {
		return nil, err
	}
	if d.nested(inner) {
		return nil, ErrInnerTunnel
	}
	return inner, nil
}

// nested reports whether the inner packet ip (checked by innerIP) is a
// tunnel. A UDP fragment other than the first carries no port: its first
// fragment is refused, so the kernel never reassembles it.
func (d *Decapsulator) nested(ip []byte) bool {
	var proto uint8
	var l4 []byte // the transport header, if this is a first fragment or no fragment
	if ip[0]>>4 == 6 {
		proto = ip[6]
		off := ipv6Len
		if header.IPv6ExtAll.Has(proto) {
			w := header.WalkIPv6Ext(ip, off, proto, header.IPv6ExtAll, MaxInnerExtHeaders)
			switch {
			case w.Status == header.IPv6ExtTooMany:
				return true
			case w.Status != header.IPv6ExtOK:
				return false // cut short: the kernel drops it
			}
			proto, off = w.Proto, w.Off
			if w.Fragment && w.FragOffset != 0 {
				off = len(ip)
			}
		}
		l4 = ip[off:]
	} else {
		h := header.IPv4(ip)
		proto = h.Protocol()
		if h.FragmentOffset() == 0 {
			l4 = ip[h.HeaderLength():]
		}
	}
	switch proto {
	case protoIPIP, protoIPv6, protoGRE:
		return true
	case protoUDP:
		// Only a decapsulator that takes GUE has a socket on the port
		// that the kernel would hand the datagram back to.
		return d.accept[GUE] && len(l4) >= 4 && binary.BigEndian.Uint16(l4[2:]) == d.guePort
	}
	return false
}

// innerIP checks that b starts with an IP header of the announced version
// whose stated length fits in b, and returns that packet.
func innerIP(b []byte, v6 bool) ([]byte, error) {
	if len(b) == 0 {
		return nil, ErrInnerTruncated
	}
	if v6 {
		ip := header.IPv6(b)
		if ip.Version() != header.IPv6Version {
			return nil, ErrInnerVersion
		}
		if len(ip) < ipv6Len {
			return nil, ErrInnerTruncated
		}
		// A jumbogram (payload length 0, RFC 2675) cannot come through a
		// 1500-byte tunnel; it would be cut to its 40-byte header.
		n := ipv6Len + int(ip.PayloadLength())
		if n > len(b) {
			return nil, ErrInnerTruncated
		}
		return b[:n:n], nil
	}
	ip := header.IPv4(b)
	if ip.Version() != header.IPv4Version {
		return nil, ErrInnerVersion
	}
	if len(ip) < ipv4Len {
		return nil, ErrInnerTruncated
	}
	ihl := ip.HeaderLength()
	n := int(ip.TotalLength())
	if ihl < ipv4Len || n < ihl {
		return nil, ErrInnerHeader
	}
	if n > len(b) {
		return nil, ErrInnerTruncated
	}
	return b[:n:n], nil
}

// chanceAddr reports whether a can be a second-chance backend: a unicast
// address that is not the host's own loopback (a forged field naming
// 127.0.0.1 or 0.0.0.0 is refused here; the agent checks its allow-list).
func chanceAddr(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() &&
		!a.Is4In6() && !(a.Is4() && (a.As4()[0] >= 240 || a.As4()[0] == 0))
}
