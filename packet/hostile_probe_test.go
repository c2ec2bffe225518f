package packet

import (
	"encoding/binary"
	"testing"
)

// hpFrame4 is an Ethernet frame with an IPv4 header carrying opts and a
// TCP SYN to port 80.
func hpFrame4(opts []byte) []byte {
	ihl := 20 + len(opts)
	f := make([]byte, 14+ihl+20)
	f[12], f[13] = 0x08, 0x00
	f[14] = 0x40 | byte(ihl/4)
	binary.BigEndian.PutUint16(f[16:], uint16(ihl+20))
	f[22], f[23] = 64, ProtoTCP
	copy(f[26:30], []byte{198, 51, 100, 1})
	copy(f[30:34], []byte{203, 0, 113, 7})
	copy(f[34:], opts)
	tcp := f[14+ihl:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	tcp[12], tcp[13] = 0x50, TCPSyn
	return f
}

// hpFrame6 is an Ethernet frame with an IPv6 header whose next header is
// nh and whose payload is rest.
func hpFrame6(nh uint8, rest ...[]byte) []byte {
	f := make([]byte, 54)
	f[12], f[13] = 0x86, 0xdd
	f[14] = 0x60
	f[20], f[21] = nh, 64
	f[22], f[53] = 0x20, 7
	for _, r := range rest {
		f = append(f, r...)
	}
	binary.BigEndian.PutUint16(f[18:], uint16(len(f)-54))
	return f
}

func hpTCP() []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b[0:], 40000)
	binary.BigEndian.PutUint16(b[2:], 443)
	b[12], b[13] = 0x50, TCPSyn
	return b
}

// hpRH is a routing header of type typ with one address and segments left.
func hpRH(nh, typ, left uint8) []byte {
	b := make([]byte, 24)
	b[0], b[1], b[2], b[3] = nh, 2, typ, left
	b[8] = 0x20
	return b
}

// TestSourceRouted: a packet whose destination address is only a hop of
// a route its sender chose (IPv4 LSRR or SSRR, an IPv6 routing header with
// segments left, of any type and wherever it sits in the chain) is
// refused as SourceRouted; other options, and routing headers with no
// segment left (processed as if absent, RFC 8200 §4.4) or inside a
// non-first fragment's payload, are not. Before the check, all of them
// parsed OK and a VIP's backend was sent the relay.
func TestSourceRouted(t *testing.T) {
	frag := func(nh uint8, off uint16) []byte {
		b := make([]byte, 8)
		b[0] = nh
		binary.BigEndian.PutUint16(b[2:], off)
		return b
	}
	dst := func(nh uint8) []byte { return []byte{nh, 0, 1, 4, 0, 0, 0, 0} }
	for _, tc := range []struct {
		name  string
		frame []byte
		want  Reason
	}{
		{"v4-nop-eol", hpFrame4([]byte{1, 1, 1, 0}), OK},
		{"v4-record-route", hpFrame4([]byte{7, 7, 4, 0, 0, 0, 0, 0}), OK},
		{"v4-lsrr", hpFrame4([]byte{0x83, 7, 4, 10, 9, 9, 9, 0}), SourceRouted},
		{"v4-ssrr", hpFrame4([]byte{0x89, 7, 4, 10, 9, 9, 9, 0}), SourceRouted},
		{"v4-lsrr-after-nops", hpFrame4([]byte{1, 1, 1, 0x83, 7, 4, 10, 9, 9, 9, 0, 0}), SourceRouted},
		{"v4-lsrr-after-timestamp", hpFrame4([]byte{0x44, 4, 5, 0, 0x83, 7, 4, 10, 9, 9, 9, 0}), SourceRouted},
		{"v4-lsrr-after-eol", hpFrame4([]byte{0, 0x83, 7, 4, 10, 9, 9, 9}), OK},
		{"v4-bad-length", hpFrame4([]byte{0x44, 1, 0x83, 0}), OK},
		{"v4-length-past-end", hpFrame4([]byte{0x44, 200, 0, 0}), OK},
		{"v6-rh0-left0", hpFrame6(43, hpRH(ProtoTCP, 0, 0), hpTCP()), OK},
		{"v6-srh-left0", hpFrame6(43, hpRH(ProtoTCP, 4, 0), hpTCP()), OK},
		{"v6-rh0-left1", hpFrame6(43, hpRH(ProtoTCP, 0, 1), hpTCP()), SourceRouted},
		{"v6-rh2-left1", hpFrame6(43, hpRH(ProtoTCP, 2, 1), hpTCP()), SourceRouted},
		{"v6-srh-left1", hpFrame6(43, hpRH(ProtoTCP, 4, 1), hpTCP()), SourceRouted},
		{"v6-dstopts-srh-left1", hpFrame6(60, dst(43), hpRH(ProtoTCP, 4, 1), hpTCP()), SourceRouted},
		{"v6-second-rh-left1", hpFrame6(43, hpRH(43, 4, 0), hpRH(ProtoTCP, 4, 1), hpTCP()), SourceRouted},
		{"v6-first-fragment-rh-left1", hpFrame6(44, frag(43, 0|1), hpRH(ProtoTCP, 4, 1), hpTCP()), SourceRouted},
		{"v6-rh-in-later-fragment", hpFrame6(44, frag(43, 64), hpRH(ProtoTCP, 4, 1)), OK},
		{"v6-rh-truncated", hpFrame6(43, hpRH(ProtoTCP, 4, 1)[:16]), TruncatedExtHeader},
	} {
		var p Parsed
		if got := Parse(tc.frame, &p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if SourceRouted.String() != "source-routed" {
		t.Errorf("name %q", SourceRouted.String())
	}
}
