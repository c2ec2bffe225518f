package packet

import (
	"encoding/binary"

	"github.com/fulcrumlb/fulcrum/header"
)

// ParseFlow decodes the dataplane's common case only: an untagged Ethernet
// frame carrying IPv4 without options or IPv6 without extension headers,
// unfragmented, with a complete TCP or UDP header whose flags Parse accepts.
// For such a frame it sets, exactly as Parse would, Tuple, L3, EtherType,
// L3Off, L4Off, PayloadOff, IPLen, TTL, TOS, Proto, IPv4DF and TCPFlags,
// and returns true. It leaves every other field of p as it was (the fused
// fast path does not pay for zeroing the whole Parsed), so p is a complete
// parse only for a caller that reads just those fields.
//
// It returns false for anything else (frames to a group MAC address, VLAN
// tags, options, fragments, ICMP, malformed headers, impossible TCP
// flags): Parse decides those. It never
// reads past len(frame) and never panics.
func ParseFlow(frame []byte, p *Parsed) bool {
	if len(frame) < header.EthernetMinimumSize || frame[0]&1 != 0 {
		// Too short, or to a broadcast or multicast MAC address, which
		// VIP traffic never is (the dataplane drops it).
		return false
	}
	switch binary.BigEndian.Uint16(frame[header.EthernetTypeOffset:]) {
	case EtherTypeIPv4:
		return parseFlow4(frame, p)
	case EtherTypeIPv6:
		return parseFlow6(frame, p)
	}
	return false
}

func parseFlow4(frame []byte, p *Parsed) bool {
	const l3 = header.EthernetMinimumSize
	b := frame[l3:]
	if len(b) < header.IPv4MinimumSize || b[0] != 0x45 { // version 4, IHL 5: no options
		return false
	}
	total := int(binary.BigEndian.Uint16(b[2:]))
	ff := binary.BigEndian.Uint16(b[6:])
	if total < header.IPv4MinimumSize || total > len(b) || ff&(header.IPv4FlagMF|header.IPv4FragOffsetMask) != 0 {
		return false
	}
	proto := b[9]
	l4 := b[header.IPv4MinimumSize:total]
	flags, ok := flowL4(l4, proto)
	if !ok {
		return false
	}
	t := &p.Tuple
	// The IPv4-mapped form (::ffff:a.b.c.d) written as whole words.
	binary.LittleEndian.PutUint64(t.Src[0:], 0)
	binary.LittleEndian.PutUint64(t.Src[8:], 0xffff<<16|uint64(binary.LittleEndian.Uint32(b[12:]))<<32)
	binary.LittleEndian.PutUint64(t.Dst[0:], 0)
	binary.LittleEndian.PutUint64(t.Dst[8:], 0xffff<<16|uint64(binary.LittleEndian.Uint32(b[16:]))<<32)
	t.SrcPort, t.DstPort = header.Ports(l4)
	t.Proto, t.V6 = proto, false
	p.L3, p.EtherType = L3IPv4, EtherTypeIPv4
	p.L3Off, p.L4Off = l3, l3+header.IPv4MinimumSize
	p.PayloadOff = flowPayloadOff(l4, proto, l3+header.IPv4MinimumSize)
	p.IPLen = uint16(total)
	p.TOS, p.TTL, p.Proto = b[1], b[8], proto
	p.IPv4DF = ff&header.IPv4FlagDF != 0
	p.TCPFlags = flags
	return true
}

func parseFlow6(frame []byte, p *Parsed) bool {
	const l3 = header.EthernetMinimumSize
	b := frame[l3:]
	if len(b) < header.IPv6MinimumSize || b[0]>>4 != header.IPv6Version {
		return false
	}
	total := header.IPv6MinimumSize + int(binary.BigEndian.Uint16(b[4:]))
	if total > len(b) {
		return false
	}
	proto := b[6]
	l4 := b[header.IPv6MinimumSize:total]
	flags, ok := flowL4(l4, proto) // an extension header is neither TCP nor UDP
	if !ok {
		return false
	}
	t := &p.Tuple
	t.Src = [16]byte(b[8:24])
	t.Dst = [16]byte(b[24:40])
	if mapped(&t.Src) || mapped(&t.Dst) {
		return false // Parse drops it (MappedIPv6)
	}
	t.SrcPort, t.DstPort = header.Ports(l4)
	t.Proto, t.V6 = proto, true
	p.L3, p.EtherType = L3IPv6, EtherTypeIPv6
	p.L3Off, p.L4Off = l3, l3+header.IPv6MinimumSize
	p.PayloadOff = flowPayloadOff(l4, proto, l3+header.IPv6MinimumSize)
	p.IPLen = uint16(total)
	p.TOS = uint8(binary.BigEndian.Uint16(b[0:]) >> 4)
	p.TTL, p.Proto = b[7], proto
	p.IPv4DF = false
	p.TCPFlags = flags
	return true
}

// flowL4 checks a TCP or UDP header as parseL4 does and returns the TCP
// flags (0 for UDP).
func flowL4(l4 []byte, proto uint8) (flags uint8, ok bool) {
	switch proto {
	case ProtoTCP:
		if len(l4) < header.TCPMinimumSize {
			return 0, false
		}
		doff := int(l4[12]>>4) * 4
		if doff < header.TCPMinimumSize || doff > len(l4) {
			return 0, false
		}
		flags = l4[13]
		return flags, badTCPFlags>>(flags&0x3f)&1 == 0
	case ProtoUDP:
		if len(l4) < header.UDPMinimumSize {
			return 0, false
		}
		ul := int(binary.BigEndian.Uint16(l4[4:]))
		return 0, ul >= header.UDPMinimumSize && ul <= len(l4)
	}
	return 0, false
}

func flowPayloadOff(l4 []byte, proto uint8, off int) uint16 {
	if proto == ProtoTCP {
		return uint16(off + int(l4[12]>>4)*4)
	}
	return uint16(off + header.UDPMinimumSize)
}
