package encap

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TestICMPv4FragNeeded checks the "fragmentation needed" reply field by
// field: addresses swapped, MTU, checksums recomputed independently, quote
// equal to the original packet's prefix.
func TestICMPv4FragNeeded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       spec
		mtu     int
		kind    Kind
		to6     bool
		wantMTU int
	}{
		{"gre-v4", spec{l4: "tcp", payload: 1460, df: true}, 1500, GRE, false, 1476},
		{"gue-v6-vlan", spec{l4: "udp", payload: 1472, df: true, vlans: 2}, 1500, GUE, true, 1448},
		{"ipip-options-padded", spec{l4: "tcp", payload: 1400, df: true, opts: true}, 1400, IPIP, false, 1380},
		{"whole-packet-quoted", spec{l4: "udp", payload: 546 - 28, df: true}, 576, GUE, true, 524},
		{"icmp-echo", spec{l4: "icmp", payload: 2000, df: true}, 1500, GRE, true, 1456},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, q, pkt := tooBigReply(t, tc.s, tc.mtu, tc.kind, tc.to6, false)
			length := len(out)
			ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if ip.IHL != 5 || ip.TOS != 0 || int(ip.Length) != length-14 || ip.TTL != 64 ||
				ip.Protocol != layers.IPProtocolICMPv4 || ip.Flags != layers.IPv4DontFragment {
				t.Errorf("IPv4 %+v", ip)
			}
			equalBytes(t, "ICMP source = VIP", ip.SrcIP.To4(), vip4.AsSlice())
			equalBytes(t, "ICMP destination = client", ip.DstIP.To4(), client4.AsSlice())
			if refSum(out[14:34]) != 0xffff || gopacketIPv4Checksum(t, out[14:34]) != ip.Checksum {
				t.Errorf("IPv4 checksum %#04x wrong", ip.Checksum)
			}
			icmp := pkt.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
			if icmp.TypeCode != layers.CreateICMPv4TypeCode(3, 4) || icmp.Id != 0 || int(icmp.Seq) != tc.wantMTU {
				t.Errorf("ICMP %v unused %#x next-hop MTU %d, want 3/4, 0, %d", icmp.TypeCode, icmp.Id, icmp.Seq, tc.wantMTU)
			}
			if refSum(out[34:]) != 0xffff {
				t.Errorf("ICMP checksum %#04x does not verify", icmp.Checksum)
			}
			// gopacket recomputes it over the same message.
			re := *icmp
			sb := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{ComputeChecksums: true}, &re, gopacket.Payload(q)); err != nil {
				t.Fatal(err)
			}
			if g := binary.BigEndian.Uint16(sb.Bytes()[2:]); g != icmp.Checksum {
				t.Errorf("ICMP checksum %#04x, gopacket computes %#04x", icmp.Checksum, g)
			}
		})
	}
}

// TestICMPv6PacketTooBig checks the ICMPv6 reply: MTU field (clamped to
// 1280), pseudo-header checksum, addresses, quote up to 1280 bytes.
func TestICMPv6PacketTooBig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       spec
		mtu     int
		kind    Kind
		to6     bool
		wantMTU uint32
	}{
		{"ipip-v4", spec{v6: true, l4: "tcp", payload: 1440}, 1500, IPIP, false, 1480},
		{"gre-v6-vlan", spec{v6: true, l4: "udp", payload: 1452, vlans: 1}, 1500, GRE, true, 1456},
		{"clamped-1280", spec{v6: true, l4: "tcp", payload: 1230}, 1300, GUE, true, 1280},
		{"whole-packet-quoted-clamped", spec{v6: true, l4: "udp", payload: 600}, 576, IPIP, false, 1280},
		{"fragment", spec{v6: true, l4: "udp", payload: 1500, frag: true}, 1500, GRE, false, 1476},
		{"jumbo-gue", spec{v6: true, l4: "tcp", payload: 9000, tos: 0xb8}, 9000, GUE, true, 8948},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, q, pkt := tooBigReply(t, tc.s, tc.mtu, tc.kind, tc.to6, true)
			q6 := len(q)
			ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			if ip.TrafficClass != 0 || ip.FlowLabel != 0 || int(ip.Length) != 8+q6 || ip.NextHeader != layers.IPProtocolICMPv6 || ip.HopLimit != 64 {
				t.Errorf("IPv6 TC %#x label %#x len %d nh %v hop %d", ip.TrafficClass, ip.FlowLabel, ip.Length, ip.NextHeader, ip.HopLimit)
			}
			equalBytes(t, "ICMPv6 source = VIP", ip.SrcIP, vip6.AsSlice())
			equalBytes(t, "ICMPv6 destination = client", ip.DstIP, client6.AsSlice())
			icmp := pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
			if icmp.TypeCode != layers.CreateICMPv6TypeCode(2, 0) {
				t.Errorf("ICMPv6 %v, want packet too big", icmp.TypeCode)
			}
			if got := binary.BigEndian.Uint32(out[58:62]); got != tc.wantMTU {
				t.Errorf("MTU field %d, want %d", got, tc.wantMTU)
			}
			if refSum(pseudo6(vip6.AsSlice(), client6.AsSlice(), 8+q6, 58), out[54:]) != 0xffff {
				t.Errorf("ICMPv6 checksum %#04x does not verify", icmp.Checksum)
			}
			re := layers.ICMPv6{TypeCode: icmp.TypeCode}
			re.SetNetworkLayerForChecksum(ip)
			sb := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{ComputeChecksums: true}, &re, gopacket.Payload(out[58:])); err != nil {
				t.Fatal(err)
			}
			if g := binary.BigEndian.Uint16(sb.Bytes()[2:]); g != icmp.Checksum {
				t.Errorf("ICMPv6 checksum %#04x, gopacket computes %#04x", icmp.Checksum, g)
			}
		})
	}
}

// tooBigReply runs Encap on a packet too big for the MTU and checks what
// both ICMP families share: the result, the length (headers plus a quote of
// the packet's first bytes, at most 576 / 1280 bytes in all) and the
// untagged Ethernet header back to the router. It returns the reply, its
// quote and its gopacket decode.
func tooBigReply(t *testing.T, s spec, mtu int, kind Kind, to6, v6 bool) (out, quote []byte, pkt gopacket.Packet) {
	t.Helper()
	e := newEnc(t, func(c *Config) { c.MTU = mtu })
	b := mustBackend(t, e, map[bool]netip.Addr{false: backend4, true: backend6}[to6])
	frame := build(t, s)
	buf, off, n, p := load(t, frame, headroom)
	orig := append([]byte(nil), frame[p.L3Off:int(p.L3Off)+int(p.IPLen)]...)
	start, length, res := e.Encap(buf, off, n, &p, 99, kind, &b, nextHop, portMAC)
	if res != ICMPReply {
		t.Fatalf("Encap = %v, want icmp-reply", res)
	}
	out = buf[start : start+length]
	hl, max, et := 14+20+8, 576, layers.EthernetTypeIPv4
	if v6 {
		hl, max, et = 14+40+8, 1280, layers.EthernetTypeIPv6
	}
	q := min(len(orig)-(hl-14), max-(hl-14)) // the reply never outgrows the request
	if length != hl+q {
		t.Fatalf("length %d, want %d (quote %d)", length, hl+q, q)
	}
	equalBytes(t, "quote", out[hl:], orig[:q])
	pkt = decode(out)
	eth := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	equalBytes(t, "eth dst (back to the router)", eth.DstMAC, routerMAC[:])
	equalBytes(t, "eth src", eth.SrcMAC, portMAC[:])
	if eth.EthernetType != et || pkt.Layer(layers.LayerTypeDot1Q) != nil {
		t.Errorf("ethertype %v (want %v) / VLAN present", eth.EthernetType, et)
	}
	return out, out[hl:], pkt
}

// TestTooBigDrops: the too-big packets that get no ICMP reply, each with
// its own reason, and the buffer left as it was.
func TestTooBigDrops(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    spec
		want Result
	}{
		{"v4-no-df", spec{l4: "tcp", payload: 1480}, DropTooBigNoDF},
		{"v4-no-df-fragment", spec{l4: "udp", payload: 1480, frag: true}, DropTooBigNoDF},
		{"v4-icmp-error", spec{l4: "icmperr", payload: 1480, df: true}, DropTooBigICMPError},
		{"v6-icmp-error", spec{v6: true, l4: "icmperr", payload: 1480}, DropTooBigICMPError},
		{"v6-icmp-fragment", spec{v6: true, l4: "icmp", payload: 1480, frag: true}, DropTooBigICMPError},
		{"v4-non-first-fragment-df", spec{l4: "udp", payload: 1480, df: true, fragOff: 1480}, DropTooBigNoReply},
		{"v4-source-zero", spec{l4: "tcp", payload: 1480, df: true, src: netip.MustParseAddr("0.0.0.0")}, DropTooBigNoReply},
		{"v4-source-multicast", spec{l4: "udp", payload: 1480, df: true, src: netip.MustParseAddr("224.0.0.9")}, DropTooBigNoReply},
		{"v4-source-loopback", spec{l4: "udp", payload: 1480, df: true, src: netip.MustParseAddr("127.0.0.1")}, DropTooBigNoReply},
		{"v6-source-unspecified", spec{v6: true, l4: "tcp", payload: 1480, src: netip.MustParseAddr("::")}, DropTooBigNoReply},
		{"v6-source-multicast", spec{v6: true, l4: "udp", payload: 1480, src: netip.MustParseAddr("ff02::1")}, DropTooBigNoReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnc(t, nil)
			b := mustBackend(t, e, backend4)
			buf, off, n, p := load(t, build(t, tc.s), headroom)
			before := append([]byte(nil), buf...)
			start, length, res := e.Encap(buf, off, n, &p, 1, GRE, &b, nextHop, portMAC)
			if res != tc.want || start != 0 || length != 0 {
				t.Errorf("Encap = %d, %d, %v; want 0, 0, %v", start, length, res, tc.want)
			}
			if !res.Drop() {
				t.Errorf("%v.Drop() = false", res)
			}
			if !bytes.Equal(buf, before) {
				t.Errorf("buffer changed on a drop")
			}
		})
	}
}
