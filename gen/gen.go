package gen

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"

	"github.com/fulcrumlb/fulcrum/header"
)

var be = binary.BigEndian

// Header constants of generated frames: what a Linux client sends.
const (
	ttl        = 64
	synWindow  = 64240 // Linux's initial window for a 1460-byte MSS
	estWindow  = 502   // a scaled window of an established connection
	tcpFlagSyn = header.TCPFlagSyn
	tcpFlagPsh = header.TCPFlagPsh
	tcpFlagAck = header.TCPFlagAck
	protoTCP   = header.ProtoTCP
	protoUDP   = header.ProtoUDP
	etherIPv4  = header.EtherTypeIPv4
	etherARP   = header.EtherTypeARP
	etherIPv6  = header.EtherTypeIPv6

	// pcgStream is the PCG's second seed word, fixed so that Config.Seed
	// alone names a run.
	pcgStream = 0x66756c6372756d21 // "fulcrum!"
)

// payloadText fills payloads, so a reader of a capture sees whose bytes
// these are.
const payloadText = "fulcrum-gen "

// l4Kind indexes the templates by transport header.
type l4Kind uint8

const (
	l4SYN l4Kind = iota
	l4Est
	l4UDP
	numL4
)

// template is the fixed part of one kind of frame, built once: Ethernet
// header, IP and transport headers with every constant field set, payload.
// Next copies it and writes the per-frame fields.
type template struct {
	b      []byte
	l4     int    // offset of the transport header
	paySum uint64 // unfolded checksum sum of the payload
}

// vip is a VIP in the raw form frames need.
type vip struct {
	addr [16]byte // IPv4 in the first 4 bytes
	port uint16
}

// Info describes the frame Next returned last.
type Info struct {
	Kind Kind
	// Flow is the index of the client flow the frame belongs to (valid,
	// non-VIP and malformed frames), -1 for ARP.
	Flow int
	// SYN is true for a TCP SYN (and for a malformed or non-VIP frame built
	// from one), false for established TCP, UDP and ARP.
	SYN    bool
	Defect Defect // DefectNone unless Kind is KindMalformed
}

// Counts tallies the frames a generator produced.
type Counts struct {
	Frames uint64
	Bytes  uint64 // sum of frame lengths, without FCS
	Kinds  [NumKinds]uint64
	// SYN, Established and UDP split the valid frames by transport.
	SYN, Established, UDP uint64
	Defects               [NumDefects]uint64
}

// String is the one-line summary: counts per kind, then the valid frames by
// transport and the malformed ones by defect.
func (c Counts) String() string {
	var b strings.Builder
	for k := range NumKinds {
		if k > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, c.Kinds[k])
	}
	fmt.Fprintf(&b, " (syn=%d established=%d udp=%d", c.SYN, c.Established, c.UDP)
	for d := DefectNone + 1; d < NumDefects; d++ {
		fmt.Fprintf(&b, " %s=%d", d, c.Defects[d])
	}
	b.WriteByte(')')
	return b.String()
}

// Generator produces frames one at a time. It is not safe for concurrent
// use; run one per goroutine, with different seeds.
type Generator struct {
	c    *resolved
	rng  *rand.Rand
	perm [2]permutation
	vips [2][]vip
	non  [2]vip // non-VIP destinations (port unused)
	tmpl [2][numL4]template
	arp  [minFrame]byte
	base [2][2]uint64 // source prefix as two big-endian halves, skip added

	// thresholds on one uniform draw: below malformed, malformed; below
	// nonVIP, non-VIP; below arp, ARP; else valid.
	tMalformed, tNonVIP, tARP float64
	flowKey                   uint64 // keys IPv6 flow labels

	nextFlow uint64
	arps     uint64
	last     Info
	counts   Counts
}

// New checks c and builds a generator for it. Errors wrap ErrConfig.
func New(c Config) (*Generator, error) {
	r, err := resolve(c)
	if err != nil {
		return nil, err
	}
	g := &Generator{
		c:          r,
		rng:        rand.New(rand.NewPCG(r.Seed, pcgStream)),
		tMalformed: r.Malformed,
		tNonVIP:    r.Malformed + r.NonVIP,
		tARP:       r.Malformed + r.NonVIP + r.ARP,
		flowKey:    mix64(r.Seed ^ 0x666c6f776c61626c),
	}
	const ports = MaxSrcPort - MinSrcPort + 1
	for f := range 2 {
		// Each family has its own key so that adding IPv6 flows does
		// not reshuffle the IPv4 sources.
		g.perm[f] = newPermutation(r.hosts[f]*ports, mix64(r.Seed+uint64(f)+1))
		for _, v := range r.vips[f] {
			var x vip
			copy(x.addr[:], v.Addr().AsSlice())
			x.port = v.Port()
			g.vips[f] = append(g.vips[f], x)
		}
		if r.nonVIP[f].IsValid() {
			copy(g.non[f].addr[:], r.nonVIP[f].AsSlice())
		}
		a := r.src[f].Addr().AsSlice()
		var w [16]byte
		copy(w[16-len(a):], a)
		hi, lo := be.Uint64(w[:8]), be.Uint64(w[8:])
		lo, carry := bits.Add64(lo, r.skip[f], 0)
		g.base[f] = [2]uint64{hi + carry, lo}
		for l := range numL4 {
			g.tmpl[f][l] = g.buildTemplate(f == 1, l)
		}
	}
	g.buildARP()
	return g, nil
}

// MaxFrameLen is the longest frame Next returns for this generator; a
// buffer of this capacity is never reallocated.
func (g *Generator) MaxFrameLen() int {
	n := minFrame
	for f := range 2 {
		for l := range numL4 {
			n = max(n, len(g.tmpl[f][l].b))
		}
	}
	return n
}

// Last describes the frame Next returned last.
func (g *Generator) Last() Info { return g.last }

// Counts is the tally of every frame generated so far.
func (g *Generator) Counts() Counts { return g.counts }

func (g *Generator) buildTemplate(v6 bool, l l4Kind) template {
	c := g.c
	ipLen, etype := ipv4Len, uint16(etherIPv4)
	if v6 {
		ipLen, etype = ipv6Len, etherIPv6
	}
	l4Len, proto := tcpLen, uint8(protoTCP)
	if l == l4UDP {
		l4Len, proto = udpLen, protoUDP
	}
	l4 := ethLen + ipLen
	n := max(c.Size-FCSLen, l4+l4Len)
	b := make([]byte, n)
	header.Ethernet(b).Encode([6]byte(c.LBMAC), [6]byte(c.ClientMAC), etype)
	if v6 {
		ip := header.IPv6(b[ethLen:])
		ip.SetVersionTrafficClassFlowLabel(0, 0)
		ip.SetPayloadLength(uint16(n - l4))
		ip.SetNextHeader(proto)
		ip.SetHopLimit(ttl)
	} else {
		ip := header.IPv4(b[ethLen:])
		ip.SetHeaderLength(ipv4Len)
		ip.SetTotalLength(uint16(n - ethLen))
		ip.SetFlagsFragmentOffset(header.IPv4FlagDF) // as a TCP stack doing PMTU discovery sends
		ip.SetTTL(ttl)
		ip.SetProtocol(proto)
	}
	seg := b[l4:]
	pay := seg[l4Len:]
	switch l {
	case l4SYN:
		tcp := header.TCP(seg)
		tcp.SetDataOffset(tcpLen)
		tcp.SetFlags(tcpFlagSyn)
		tcp.SetWindowSize(synWindow)
	case l4Est:
		tcp := header.TCP(seg)
		tcp.SetDataOffset(tcpLen)
		flags := uint8(tcpFlagAck)
		if len(pay) > 0 {
			flags |= tcpFlagPsh
		}
		tcp.SetFlags(flags)
		tcp.SetWindowSize(estWindow)
	case l4UDP:
		header.UDP(seg).SetLength(uint16(len(seg)))
	}
	for i := range pay {
		pay[i] = payloadText[i%len(payloadText)]
	}
	return template{b: b, l4: l4, paySum: sum(0, pay)}
}

// buildARP is the ARP request (RFC 826) a router sends to resolve an
// address: broadcast, from the client-side MAC, zero-padded to 60 bytes.
// Only the target address changes per frame.
func (g *Generator) buildARP() {
	b := g.arp[:]
	for i := range 6 {
		b[i] = 0xff
	}
	eth := header.Ethernet(b)
	eth.SetSource([6]byte(g.c.ClientMAC))
	eth.SetType(etherARP)
	a := b[ethLen:]
	be.PutUint16(a[0:], 1) // Ethernet
	be.PutUint16(a[2:], etherIPv4)
	a[4], a[5] = 6, 4
	be.PutUint16(a[6:], 1) // request
	copy(a[8:14], g.c.ClientMAC)
	be.PutUint32(a[14:], uint32(g.base[0][1]))
}

// client is one client flow, resolved from its index.
type client struct {
	v6    bool
	src   [16]byte // IPv4 in the first 4 bytes
	sport uint16
	vip   *vip
}

// v6Before is the number of IPv6 flows among flows 0..i-1 for a share given
// as a 32-bit fixed-point fraction: floor(i*share). Integer arithmetic keeps
// it exact and monotone, so flow i is IPv6 exactly when v6Before(i+1) >
// v6Before(i).
func v6Before(i, share uint64) uint64 {
	hi, lo := bits.Mul64(i, share)
	return hi<<32 | lo>>32
}

func (g *Generator) flowAt(i uint64) client {
	a, b := v6Before(i, g.c.v6Share), v6Before(i+1, g.c.v6Share)
	f, j := 0, i-a // j: index of the flow within its family
	if b > a {
		f, j = 1, a
	}
	x := j
	if !g.c.Sequential {
		x = g.perm[f].at(j)
	}
	h := g.c.hosts[f]
	fl := client{v6: f == 1, sport: uint16(MinSrcPort + x/h), vip: &g.vips[f][j%uint64(len(g.vips[f]))]}
	lo, carry := bits.Add64(g.base[f][1], x%h, 0)
	if f == 0 {
		be.PutUint32(fl.src[:4], uint32(lo))
	} else {
		be.PutUint64(fl.src[:8], g.base[f][0]+carry)
		be.PutUint64(fl.src[8:], lo)
	}
	return fl
}

// Next writes the next frame into buf's storage (growing it only if its
// capacity is below MaxFrameLen) and returns the frame and its kind. The
// frame is valid until the next call with the same buffer.
func (g *Generator) Next(buf []byte) ([]byte, Kind) {
	u := g.rng.Float64()
	kind := KindIPv4
	switch {
	case u < g.tMalformed:
		kind = KindMalformed
	case u < g.tNonVIP:
		kind = KindNonVIP
	case u < g.tARP:
		kind = KindARP
	}
	g.counts.Frames++
	if kind == KindARP {
		frame := append(buf[:0], g.arp[:]...)
		v := &g.vips[0][g.arps%uint64(len(g.vips[0]))]
		copy(frame[ethLen+24:ethLen+28], v.addr[:4])
		g.arps++
		g.last = Info{Kind: KindARP, Flow: -1}
		g.counts.Kinds[KindARP]++
		g.counts.Bytes += uint64(len(frame))
		return frame, KindARP
	}

	var idx uint64
	if g.c.InOrder {
		idx = g.nextFlow
		if g.nextFlow++; g.nextFlow == uint64(g.c.Flows) {
			g.nextFlow = 0
		}
	} else {
		idx = g.rng.Uint64N(uint64(g.c.Flows))
	}
	fl := g.flowAt(idx)
	var l l4Kind
	switch g.c.Mode {
	case ModeSYN:
		l = l4SYN
	case ModeEstablished:
		l = l4Est
	case ModeMix:
		l = l4Est
		if g.rng.Float64() < g.c.synShare {
			l = l4SYN
		}
	case ModeUDP:
		l = l4UDP
	}
	f := family(fl.v6)
	dst := fl.vip
	if kind == KindNonVIP {
		dst = &g.non[f]
	}
	t := &g.tmpl[f][l]
	frame := append(buf[:0], t.b...)
	g.fill(frame, t, &fl, dst.addr[:], fl.vip.port, l)

	g.last = Info{Kind: kind, Flow: int(idx), SYN: l == l4SYN}
	switch kind {
	case KindMalformed:
		d := Defect(1 + g.rng.IntN(int(NumDefects)-1))
		frame = g.breakFrame(frame, fl.v6, t.l4, l == l4UDP, d)
		g.last.Defect = d
		g.counts.Defects[d]++
	case KindIPv4:
		if fl.v6 {
			kind = KindIPv6
			g.last.Kind = kind
		}
		switch l {
		case l4SYN:
			g.counts.SYN++
		case l4Est:
			g.counts.Established++
		default:
			g.counts.UDP++
		}
	}
	g.counts.Kinds[kind]++
	g.counts.Bytes += uint64(len(frame))
	return frame, kind
}

// fill writes the per-frame fields of a copy of template t: addresses,
// ports, sequence numbers, identifiers and checksums.
func (g *Generator) fill(b []byte, t *template, fl *client, dst []byte, dport uint16, l l4Kind) {
	seg := b[t.l4:]
	var s uint64 // pseudo-header sum (RFC 9293 3.1, RFC 768, RFC 8200 8.1)
	if fl.v6 {
		ip := header.IPv6(b[ethLen:t.l4])
		// A per-flow label, as Linux sets it (RFC 6437), so that ECMP
		// hashing on the 3-tuple spreads flows too.
		lbl := uint32(mix64(uint64(be.Uint32(fl.src[12:]))<<16^uint64(fl.sport)^g.flowKey)) & 0xfffff
		ip.SetVersionTrafficClassFlowLabel(0, lbl)
		copy(ip.SourceSlice(), fl.src[:])
		copy(ip.DestinationSlice(), dst)
		s = header.PseudoHeaderSum(ip.AddressSum(), ip.NextHeader(), len(seg))
	} else {
		ip := header.IPv4(b[ethLen:t.l4])
		ip.SetID(uint16(g.counts.Frames))
		ip.SetSourceAddress([4]byte(fl.src[:4]))
		ip.SetDestinationAddress([4]byte(dst))
		ip.UpdateChecksum()
		s = header.PseudoHeaderSum(ip.AddressSum(), ip.Protocol(), len(seg))
	}
	// TCP and UDP ports sit alike.
	tcp, udp := header.TCP(seg), header.UDP(seg)
	tcp.SetSourcePort(fl.sport)
	tcp.SetDestinationPort(dport)
	hl := udpLen
	if l != l4UDP {
		hl = tcpLen
		x := g.rng.Uint64()
		tcp.SetSequenceNumber(uint32(x))
		if l == l4Est {
			tcp.SetAckNumber(uint32(x >> 32))
		}
		tcp.SetChecksum(0)
	} else {
		udp.SetChecksum(0)
	}
	cs := ^fold(sum(s, seg[:hl]) + t.paySum)
	if l == l4UDP {
		if cs == 0 {
			cs = 0xffff // RFC 768: 0 means "no checksum"
		}
		udp.SetChecksum(cs)
	} else {
		tcp.SetChecksum(cs)
	}
}

// breakFrame applies defect d to a valid frame whose transport header is at
// l4 and returns the (possibly shorter) frame. The IPv4 header checksum is
// kept correct so that the defect is the only thing wrong.
func (g *Generator) breakFrame(b []byte, v6 bool, l4 int, udp bool, d Defect) []byte {
	ip := b[ethLen:]
	ipLen, l4Len := ipv4Len, tcpLen
	if v6 {
		ipLen = ipv6Len
	}
	if udp {
		l4Len = udpLen
	}
	switch d {
	case DefectTruncatedIP:
		return b[:ethLen+g.rng.IntN(ipLen)]
	case DefectBadIPHeader:
		if v6 {
			ver := byte(g.rng.IntN(15))
			if ver >= 6 {
				ver++
			}
			ip[0] = ver<<4 | ip[0]&0x0f // the version nibble
		} else {
			header.IPv4(ip).SetHeaderLength(4 * g.rng.IntN(5)) // IHL below 5
		}
	case DefectBadIPLength:
		over := len(ip) + 1 + g.rng.IntN(64)
		if v6 {
			header.IPv6(ip).SetPayloadLength(uint16(over - ipv6Len))
		} else if g.rng.IntN(2) == 0 {
			header.IPv4(ip).SetTotalLength(uint16(over))
		} else {
			header.IPv4(ip).SetTotalLength(uint16(g.rng.IntN(ipv4Len))) // below the header
		}
	case DefectTruncatedL4:
		k := g.rng.IntN(l4Len)
		if v6 {
			header.IPv6(ip).SetPayloadLength(uint16(k))
		} else {
			header.IPv4(ip).SetTotalLength(uint16(ipLen + k))
		}
		b = padFrame(b[:l4+k])
	case DefectBadL4Length:
		seg := b[l4:]
		if !udp {
			header.TCP(seg).SetDataOffset(4 * g.rng.IntN(5)) // below 20
		} else if g.rng.IntN(2) == 0 {
			header.UDP(seg).SetLength(uint16(g.rng.IntN(udpLen)))
		} else {
			header.UDP(seg).SetLength(uint16(len(seg) + 1 + g.rng.IntN(64)))
		}
	}
	if !v6 {
		// Over the first 20 bytes even when the defect is an IHL below 5.
		header.IPv4(ip).UpdateChecksum()
	}
	return b
}

// padFrame zero-pads a short frame to Ethernet's 60-byte minimum, as a NIC
// does on transmit. b's capacity must be at least 60.
func padFrame(b []byte) []byte {
	if n := len(b); n < minFrame {
		b = b[:minFrame]
		clear(b[n:])
	}
	return b
}
