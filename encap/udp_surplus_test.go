package encap

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// udpSurplusFrame is an untagged Ethernet frame carrying a UDP datagram
// whose UDP length is shorter than the IP payload: the bytes between the
// UDP length and the IP length are RFC 9868's surplus area (UDP options).
// The UDP checksum, as RFC 768 and RFC 9868 §6 define it, covers the UDP
// length only, with the UDP length in the pseudo-header. The frame is
// written by hand, checksums computed with refSum, independent of the
// package.
func udpSurplusFrame(v6 bool, data, surplus int) []byte {
	udpLen := 8 + data
	payload := make([]byte, udpLen+surplus)
	binary.BigEndian.PutUint16(payload[0:], 40001)
	binary.BigEndian.PutUint16(payload[2:], 53)
	binary.BigEndian.PutUint16(payload[4:], uint16(udpLen))
	for i := 8; i < udpLen; i++ {
		payload[i] = byte(i*7 + 3)
	}
	// The surplus: an EOL-terminated option area (RFC 9868 §11), here
	// NOPs and EOL after an OCS-less area; any bytes do for the test.
	for i := udpLen; i < len(payload); i++ {
		payload[i] = byte(0x51 + i)
	}
	frame := make([]byte, 14)
	copy(frame[0:6], inMAC[:])
	copy(frame[6:12], routerMAC[:])
	var ip []byte
	if v6 {
		binary.BigEndian.PutUint16(frame[12:], 0x86dd)
		ip = make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
		ip[6], ip[7] = 17, 57
		copy(ip[8:24], client6.AsSlice())
		copy(ip[24:40], vip6.AsSlice())
		c := ^refSum(pseudo6(ip[8:24], ip[24:40], udpLen, 17), payload[:udpLen])
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(payload[6:], c)
	} else {
		binary.BigEndian.PutUint16(frame[12:], 0x0800)
		ip = make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(payload)))
		binary.BigEndian.PutUint16(ip[4:], 0x1234)
		ip[6] = 0x40 // DF
		ip[8], ip[9] = 57, 17
		copy(ip[12:16], client4.AsSlice())
		copy(ip[16:20], vip4.AsSlice())
		binary.BigEndian.PutUint16(ip[10:], ^refSum(ip))
		ph := append(append(append([]byte(nil), ip[12:20]...), 0, 17), byte(udpLen>>8), byte(udpLen))
		c := ^refSum(ph, payload[:udpLen])
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(payload[6:], c)
	}
	return append(append(frame, ip...), payload...)
}

// TestGUEv6ChecksumUDPSurplus: a valid UDP datagram with a surplus
// area (UDP length < IP payload length; RFC 9868 UDP options, which
// Linux accepts and trims) is tunnelled with GUE to an IPv6 backend. The
// outer UDP checksum must verify over the outer pseudo-header and the
// whole UDP segment (GUE header and inner packet), or the backend's
// kernel drops the tunnel packet. innerSum assumes the inner UDP
// checksum covers the whole IP payload with the IP payload's length in
// the pseudo-header, which it does not here.
func TestGUEv6ChecksumUDPSurplus(t *testing.T) {
	e := newEnc(t, nil)
	be := mustBackend(t, e, backend6)
	for _, v6 := range []bool{false, true} {
		for _, surplus := range []int{0, 4, 7} {
			name := fmt.Sprintf("inner-v6=%v/surplus=%d", v6, surplus)
			t.Run(name, func(t *testing.T) {
				frame := udpSurplusFrame(v6, 21, surplus)
				buf, off, n, p := load(t, frame, headroom)
				// General path.
				start, length, res := e.Encap(buf, off, n, &p, 0x1234_5678_9abc_def0, GUE, &be, nextHop, portMAC)
				if res != Forward {
					t.Fatalf("Encap = %v", res)
				}
				seg := buf[start+54 : start+length]
				if got := refSum(pseudo6(lbSrc6.AsSlice(), backend6.AsSlice(), len(seg), 17), seg); got != 0xffff {
					t.Errorf("Encap: outer UDP checksum %#04x does not verify (sum %#04x, want 0xffff)", binary.BigEndian.Uint16(seg[6:]), got)
				}
				// Prepared (fused) path.
				buf, off, n, p = load(t, frame, headroom)
				h := e.Prepare(GUE, &be, v6)
				start, length = h.Encap(buf, off, n, &p, GUE, 0x1234_5678_9abc_def0, &nextHop, &portMAC)
				if length == 0 {
					t.Fatal("Header.Encap refused")
				}
				seg = buf[start+54 : start+length]
				if got := refSum(pseudo6(lbSrc6.AsSlice(), backend6.AsSlice(), len(seg), 17), seg); got != 0xffff {
					t.Errorf("Header.Encap: outer UDP checksum %#04x does not verify (sum %#04x, want 0xffff)", binary.BigEndian.Uint16(seg[6:]), got)
				}
			})
		}
	}
}

// TestChanceIPv6AtMinimumMTU: at dataplane.mtu 1332 (the least package
// config accepts for an IPv6 VIP over GUE to an IPv6 backend, and the
// value its error message tells the operator to set), a 1280-byte IPv6
// packet fits the tunnel. With a second chance naming an IPv6 backend
// (20 bytes) it does not, and EncapChance answers with a Packet Too Big
// whose MTU is clamped to 1280: the client is already at 1280 and can
// never send less, so every such packet of the flow is refused for the
// whole second-chance window (a black hole). As for an IPv4 packet
// without DF, no ICMP can make the sender send less: the packet should go
// without the field.
func TestChanceIPv6AtMinimumMTU(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		ch   netip.Addr
	}{
		{GUE, netip.MustParseAddr("2001:db8:b::9")}, // 52 + 20
		{GUE, netip.MustParseAddr("10.0.0.9")},      // 52 + 8
		{GRE, netip.MustParseAddr("10.0.0.9")},      // 44 + 4
	} {
		mtu := 1280 + Overhead(tc.kind, true)
		e := newEnc(t, func(c *Config) { c.MTU = mtu })
		be := mustBackend(t, e, backend6)
		ch := mustBackend(t, e, tc.ch)
		s := spec{name: "v6-tcp", v6: true, l4: "tcp", payload: 1280 - 40 - 20} // 1280 bytes of IPv6
		buf, off, n, p := load(t, build(t, s), headroom)
		if p.IPLen != 1280 {
			t.Fatalf("IPLen %d", p.IPLen)
		}
		start, length, res := e.EncapChance(buf, off, n, &p, 1, tc.kind, &be, &ch, nextHop, portMAC)
		if res != Forward {
			mtuField := -1
			if res == ICMPReply {
				mtuField = int(binary.BigEndian.Uint32(buf[start+14+40+4:]))
			}
			t.Errorf("%v at mtu %d, chance %v: 1280-byte IPv6 packet: %v (PTB MTU %d, length %d), want forward without the field",
				tc.kind, mtu, tc.ch, res, mtuField, length)
		}
	}
}
