package dataplane

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Hostile header chains and layer-2/3 oddities toward the VIPs, run through
// a worker with the fused path and one without: the same verdicts, frames
// and counters, every packet accounted for exactly once, and nothing
// forwarded unless its (final) destination is a VIP.

const (
	hpClient  = "198.51.100.20"
	hpClient6 = "2001:db8:c::20"
	hpVIP6    = "2001:db8:ffff::7"
)

// hpAccounted is every decision the counters record: parse failures,
// dataplane drops, encapsulation results (forwards, too-big replies and
// their drops), punts and echo replies.
func hpAccounted(c *Counters) uint64 {
	n := c.Punted + c.EchoReplies
	for _, x := range c.Parse[1:] {
		n += x
	}
	for _, x := range c.Drops {
		n += x
	}
	for _, x := range c.Encap {
		n += x
	}
	return n
}

// raw4opts is raw4 with IPv4 options (padded by the caller to 4 bytes).
func raw4opts(src, dst string, proto uint8, opts, payload []byte) []byte {
	f := raw4(src, dst, proto, 1, 0x4000, append(append([]byte(nil), opts...), payload...))
	f[14] = 0x45 + byte(len(opts)/4)
	return fixIPv4Checksum(f)
}

// ext6 is an IPv6 extension header (hop-by-hop, routing, destination
// options) of 8*(n+1) bytes with next header nh; b2 and b3 are its third
// and fourth bytes (a routing header's type and segments left).
func ext6(nh uint8, n int, b2, b3 byte) []byte {
	b := make([]byte, 8*(n+1))
	b[0], b[1], b[2], b[3] = nh, byte(n), b2, b3
	if b2 == 0 && b3 == 0 {
		b[2] = 1 // a PadN option over the rest
		b[3] = byte(len(b) - 4)
	}
	return b
}

// hpAny: a case whose verdict is only compared between the paths.
const hpAny Verdict = 255

type hpCase struct {
	name string
	f    []byte
	// want: the verdict both paths must give; for Tx the packet must come
	// out as a tunnel to a backend with the inner destination a VIP.
	want Verdict
	// parse: if non-zero, the parse reason it must be counted under.
	parse packet.Reason
}

func hpCases(t *testing.T) []hpCase {
	syn := tcpSeg(40000, 80, packet.TCPSyn, 0)
	ack := tcpSeg(40000, 80, packet.TCPAck, 4)
	syn6 := tcpSeg(40001, 443, packet.TCPSyn, 0)
	vlan := func(f []byte, tpids ...uint16) []byte {
		o := append([]byte(nil), f[:12]...)
		for i, tp := range tpids {
			o = binary.BigEndian.AppendUint16(o, tp)
			o = binary.BigEndian.AppendUint16(o, uint16(i+1))
		}
		return append(o, f[12:]...)
	}
	mac := func(f []byte, dst []byte) []byte {
		o := append([]byte(nil), f...)
		copy(o[0:6], dst)
		return o
	}
	lsrr := []byte{0x83, 7, 4, 10, 9, 9, 9, 0} // LSRR: one hop left (10.9.9.9), then EOL
	ssrr := []byte{0x89, 7, 4, 10, 9, 9, 9, 0}
	rr := []byte{0x07, 7, 4, 0, 0, 0, 0, 0} // record route
	nop := []byte{1, 1, 1, 0}
	base4 := raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, syn)
	padded := append(append([]byte(nil), base4...), make([]byte, 20)...)
	tunnelIn := raw4(hpClient, "203.0.113.7", 47, 1, 0x4000, cat([]byte{0, 0, 0x08, 0}, raw4(hpClient, "10.200.0.1", packet.ProtoTCP, 1, 0x4000, syn)[14:]))
	ipip := raw4(hpClient, "203.0.113.7", 4, 1, 0x4000, raw4(hpClient, "10.200.0.1", packet.ProtoTCP, 1, 0x4000, syn)[14:])
	ip6ip6 := raw6(hpClient6, hpVIP6, 41, raw6(hpClient6, "2001:db8:9::1", packet.ProtoTCP, syn6)[14:])
	gue := raw4(hpClient, "203.0.113.7", packet.ProtoUDP, 1, 0, udpDgram(40000, 53, 8+4+20+20, 4+20+20))
	gueLB := raw4(hpClient, "192.0.2.10", packet.ProtoUDP, 1, 0, udpDgram(40000, 6080, 8+4+20+20, 4+20+20))
	ipipLB := raw4(hpClient, "192.0.2.10", 4, 1, 0x4000, raw4(hpClient, "10.200.0.1", packet.ProtoTCP, 1, 0x4000, syn)[14:])
	tcpDoff := func(doff byte, flags uint8, data int) []byte {
		b := tcpSeg(40002, 80, flags, data)
		b[12] = doff << 4
		return b
	}
	long := []byte{}
	for range 9 {
		long = append(long, ext6(60, 0, 0, 0)...)
	}
	long[len(long)-8] = packet.ProtoTCP
	chain8 := long[8:]
	eight := raw6(hpClient6, hpVIP6, 60, cat(chain8, syn6))
	eth3 := raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, syn)
	eth3[12], eth3[13] = 0x05, 0xdc // 802.3 length 1500
	runt := base4[:13]
	vlanRunt := vlan(base4, 0x8100)[:17]
	ttl0 := append([]byte(nil), base4...)
	ttl0[22] = 0
	ttl0 = fixIPv4Checksum(ttl0)
	ihl4 := append([]byte(nil), base4...)
	ihl4[14] = 0x44
	totBig := append([]byte(nil), base4...)
	binary.BigEndian.PutUint16(totBig[16:], 200)
	totSmall := append([]byte(nil), base4...)
	binary.BigEndian.PutUint16(totSmall[16:], 19)
	hbhFirstNot := raw6(hpClient6, hpVIP6, 60, cat(ext6(0, 0, 0, 0), ext6(packet.ProtoTCP, 0, 0, 0), syn6))
	jumbo := raw6(hpClient6, hpVIP6, 0, cat([]byte{packet.ProtoTCP, 0, 0xc2, 4, 0, 0, 0, 80}, syn6))
	binary.BigEndian.PutUint16(jumbo[18:], 0)
	jumbo = append(jumbo, make([]byte, 0)...)
	overflowLen := raw6(hpClient6, hpVIP6, 60, cat([]byte{packet.ProtoTCP, 255, 1, 4, 0, 0, 0, 0}, syn6))
	fragLSRR := raw4opts(hpClient, "203.0.113.7", packet.ProtoTCP, lsrr, syn)
	binary.BigEndian.PutUint16(fragLSRR[20:], 0x2000) // MF
	fragLSRR = fixIPv4Checksum(fragLSRR)
	srcOurs := append([]byte(nil), base4...)
	copy(srcOurs[6:12], portMAC[:])
	ah := make([]byte, 16)
	ah[0], ah[1] = packet.ProtoTCP, 2 // (2+2)*4 = 16 bytes
	return []hpCase{
		{"plain-syn", base4, Tx, 0},
		{"eth-padding", padded, Tx, 0},
		{"vlan", vlan(base4, 0x8100), Tx, 0},
		{"qinq-88a8", vlan(base4, 0x88a8, 0x8100), Tx, 0},
		{"qinq-double-8100", vlan(base4, 0x8100, 0x8100), Tx, 0},
		{"three-tags", vlan(base4, 0x88a8, 0x8100, 0x8100), Drop, packet.TooManyVLANs},
		{"vlan-runt", vlanRunt, Drop, packet.TruncatedVLAN},
		{"runt", runt, Drop, packet.TruncatedEthernet},
		{"ethertype-802.3", eth3, Punt, 0},
		{"dst-mac-broadcast", mac(base4, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), Drop, 0}, // vip-link-broadcast
		{"ihl-4", ihl4, Drop, packet.BadIPv4HeaderLen},
		{"total-beyond-frame", totBig, Drop, packet.BadIPv4TotalLen},
		{"total-below-header", totSmall, Drop, packet.BadIPv4TotalLen},
		{"ttl-0", ttl0, Tx, 0},
		{"ipv4-nop-options", raw4opts(hpClient, "203.0.113.7", packet.ProtoTCP, nop, syn), Tx, 0},
		{"ipv4-record-route", raw4opts(hpClient, "203.0.113.7", packet.ProtoTCP, rr, syn), Tx, 0},
		{"ipv4-lsrr", raw4opts(hpClient, "203.0.113.7", packet.ProtoTCP, lsrr, syn), Drop, packet.SourceRouted},
		{"ipv4-ssrr", raw4opts(hpClient, "203.0.113.7", packet.ProtoTCP, ssrr, syn), Drop, packet.SourceRouted},
		{"tcp-doff-4", raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpDoff(4, packet.TCPSyn, 0)), Drop, packet.TruncatedTCP},
		{"tcp-doff-past-end", raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpDoff(15, packet.TCPSyn, 0)), Drop, packet.TruncatedTCP},
		{"tcp-null", raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(1, 80, 0, 0)), Drop, packet.BadTCPFlags},
		{"tcp-syn-fin", raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(1, 80, 3, 0)), Drop, packet.BadTCPFlags},
		{"tcp-dport-0", raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(1, 0, 2, 0)), Drop, 0},
		{"tcp-sport-0", raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, tcpSeg(0, 80, 2, 0)), Tx, 0},
		{"gre-to-vip", tunnelIn, Drop, 0},
		{"ipip-to-vip", ipip, Drop, 0},
		{"ip6ip6-to-vip", ip6ip6, Drop, 0},
		{"gue-to-udp-vip", gue, Tx, 0},
		{"gue-to-lb", gueLB, Punt, 0},
		{"ipip-to-lb", ipipLB, Punt, 0},
		{"ack-data", raw4(hpClient, "203.0.113.7", packet.ProtoTCP, 1, 0x4000, ack), Tx, 0},
		{"v6-plain", raw6(hpClient6, hpVIP6, packet.ProtoTCP, syn6), Tx, 0},
		{"v6-hbh", raw6(hpClient6, hpVIP6, 0, cat(ext6(packet.ProtoTCP, 0, 0, 0), syn6)), Tx, 0},
		{"v6-jumbo-plen0", jumbo, Drop, packet.TruncatedExtHeader},
		{"v6-hbh-not-first", hbhFirstNot, Tx, 0},
		{"v6-dstopts", raw6(hpClient6, hpVIP6, 60, cat(ext6(packet.ProtoTCP, 1, 0, 0), syn6)), Tx, 0},
		{"v6-rh0-segleft0", raw6(hpClient6, hpVIP6, 43, cat(ext6(packet.ProtoTCP, 2, 0, 0)[:0], []byte{packet.ProtoTCP, 2, 0, 0, 0, 0, 0, 0}, make([]byte, 16), syn6)), Tx, 0},
		{"v6-rh0-segleft1", raw6(hpClient6, hpVIP6, 43, cat([]byte{packet.ProtoTCP, 2, 0, 1, 0, 0, 0, 0}, netip.MustParseAddr("2001:db8:9::1").AsSlice(), syn6)), Drop, packet.SourceRouted},
		{"v6-rh2-segleft1", raw6(hpClient6, hpVIP6, 43, cat([]byte{packet.ProtoTCP, 2, 2, 1, 0, 0, 0, 0}, netip.MustParseAddr("2001:db8:9::1").AsSlice(), syn6)), Drop, packet.SourceRouted},
		{"v6-srh-segleft1", raw6(hpClient6, hpVIP6, 43, cat([]byte{packet.ProtoTCP, 2, 4, 1, 0, 0, 0, 0}, netip.MustParseAddr("2001:db8:9::1").AsSlice(), syn6)), Drop, packet.SourceRouted},
		{"v6-eight-ext", eight, Tx, 0},
		{"v6-nine-ext", raw6(hpClient6, hpVIP6, 60, cat(long, syn6)), Drop, packet.TooManyExtHeaders},
		{"v6-ext-past-end", raw6(hpClient6, hpVIP6, 60, []byte{packet.ProtoTCP, 3, 1, 4, 0, 0, 0, 0}), Drop, packet.TruncatedExtHeader},
		{"v6-ext-len-255", overflowLen, Drop, packet.TruncatedExtHeader},
		{"v6-ah", raw6(hpClient6, hpVIP6, 51, cat(ah, syn6)), Tx, 0},
		{"v6-esp", raw6(hpClient6, hpVIP6, 50, make([]byte, 40)), Drop, 0},
		{"v6-no-next", raw6(hpClient6, hpVIP6, 59, nil), Drop, 0},
		{"v6-dstopts-no-next", raw6(hpClient6, hpVIP6, 60, ext6(59, 0, 0, 0)), Drop, 0},
		{"echo-v6-rh-segleft1", raw6(hpClient6, hpVIP6, 43, cat([]byte{58, 2, 0, 1, 0, 0, 0, 0}, netip.MustParseAddr("2001:db8:9::1").AsSlice(), icmpMsg(128, 0, 1, nil))), Drop, packet.SourceRouted},
		{"echo-v4-lsrr", raw4opts(hpClient, "203.0.113.7", packet.ProtoICMP, lsrr, icmpMsg(8, 0, 1, nil)), Drop, packet.SourceRouted},
		{"fragment-lsrr", fragLSRR, Drop, packet.SourceRouted},
		// Not asserted, only compared between the paths: frames to a
		// unicast MAC not ours (the port is promiscuous; README), or
		// from our own MAC.
		{"dst-mac-other", mac(base4, []byte{0x02, 0, 0, 0, 0, 0x77}), hpAny, 0},
		{"dst-mac-multicast", mac(base4, []byte{0x01, 0, 0x5e, 0, 0, 1}), Drop, 0}, // vip-link-broadcast
		{"src-mac-ours", srcOurs, hpAny, 0},
		{"v6-unknown-nh", raw6(hpClient6, hpVIP6, 253, make([]byte, 8)), Drop, 0},
	}
}

// TestHostileHeadersProbe runs every case through both paths. Regression:
// a source-routed packet to a VIP (IPv4 LSRR/SSRR, an IPv6 routing header
// with segments left) was forwarded to a backend although its final
// destination is an address the sender chose, not the VIP; it is dropped
// now, counted as source-routed, on both paths.
func TestHostileHeadersProbe(t *testing.T) {
	tw := newTwin(t, fastTestConfig)
	tw.fast.w.rng, tw.slow.w.rng = sched.NewRand(7), sched.NewRand(7)
	for _, tc := range hpCases(t) {
		before := hpAccounted(&tw.slow.w.c)
		parseBefore := tw.slow.w.c.Parse
		var out []byte
		var verd Verdict
		for k, r := range []*rig{tw.fast, tw.slow} {
			o, v := r.run(tc.f)
			if k == 1 {
				out, verd = o[0], v[0]
			}
		}
		tw.burst(tc.name+" (again)", [][]byte{tc.f})
		tw.same(tc.name)
		if got := hpAccounted(&tw.slow.w.c) - before; got != 2 {
			t.Errorf("%s: %d decisions counted for 2 packets", tc.name, got)
		}
		if tc.want != hpAny && verd != tc.want {
			t.Errorf("%s: verdict %v, want %v", tc.name, verd, tc.want)
		}
		if tc.parse != 0 && tw.slow.w.c.Parse[tc.parse]-parseBefore[tc.parse] != 2 {
			t.Errorf("%s: not counted as %v", tc.name, tc.parse)
		}
		if verd == Tx {
			// A tunnel from our port to the next hop whose payload ends
			// with the client's IP packet, byte for byte (no VLAN tag,
			// no Ethernet padding).
			want := ipPacket(stripTags(tc.f))
			if string(out[0:6]) != string(gwMAC[:]) || string(out[6:12]) != string(portMAC[:]) || !bytes.HasSuffix(out, want) || len(out) < 14+20+len(want) {
				t.Errorf("%s: forwarded\n% x\nwant a tunnel around\n% x", tc.name, out, want)
			}
		}
	}
}

// stripTags is the frame without its VLAN tags.
func stripTags(f []byte) []byte {
	o := append([]byte(nil), f[:12]...)
	off := 12
	for et := binary.BigEndian.Uint16(f[off:]); et == 0x8100 || et == 0x88a8; et = binary.BigEndian.Uint16(f[off:]) {
		off += 4
	}
	return append(o, f[off:]...)
}
