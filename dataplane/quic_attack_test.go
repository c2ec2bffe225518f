package dataplane

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Attacks on QUIC connection-ID routing (docs/quic.md). A short header
// naming a backend's server id is routed without conntrack, so every
// check that conntrack's miss path makes on a new flow must hold for it
// too.

// quicAttackConfig is quicTestConfig with an IPv6 QUIC VIP.
var quicAttackConfig = quicTestConfig + `
[[vip]]
name = "quic6"
address = "2001:db8:ffff::11"
port = 443
protocol = "udp"
quic = true
  [[vip.backend]]
  name = "q6a"
  address = "2001:db8:4::1"
  quic_id = 1
  [[vip.backend]]
  name = "q6b"
  address = "2001:db8:4::2"
  quic_id = 2
`

const quicVIP6 = "2001:db8:ffff::11"

// udpFrameAny is udpFrame for either family.
func udpFrameAny(t *testing.T, src, dst string, sport uint16, payload []byte) []byte {
	t.Helper()
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	if s.Is4() {
		return udpFrame(t, src, dst, sport, payload)
	}
	ip := &layers.IPv6{Version: 6, HopLimit: 60, NextHeader: layers.IPProtocolUDP, SrcIP: s.AsSlice(), DstIP: d.AsSlice()}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: 443}
	_ = u.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv6}, ip, u, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// A short header whose source is a VIP address or the LB's own address is
// spoofed (or a loop): routed, the backend would answer the VIP or the LB,
// a reflection through the LB (TestMartianSourcesDropped is the same for
// conntrack's new flows). It is dropped as martian-source, takes no
// conntrack slot and is not counted as routed, whatever backend its
// connection ID names; a backend may still be a client of the VIP.
func TestQUICShortHeaderFromSelfDropped(t *testing.T) {
	r := newRig(t, quicAttackConfig)
	for _, c := range []struct {
		vip  string
		srcs []string
	}{
		{quicVIP, []string{quicVIP, plainVIP, "203.0.113.7", lb4}},
		{quicVIP6, []string{quicVIP6, "2001:db8:ffff::7", "2001:db8:100::10"}},
	} {
		for _, src := range c.srcs {
			for _, id := range []uint16{1, 2, 9} { // owned, owned, nobody's
				before := r.w.c
				entries := r.w.ct.Len()
				_, v := r.run(udpFrameAny(t, src, c.vip, 4433, quicShort(0, id, 20)))
				now := &r.w.c
				if v[0] != Drop || now.Drops[DropMartianSource] != before.Drops[DropMartianSource]+1 ||
					now.QUIC[QUICRouted] != before.QUIC[QUICRouted] || r.w.ct.Len() != entries {
					t.Errorf("short header from %s to %s naming id %d: verdict %v, martian-source +%d, routed +%d, entries %d -> %d; want Drop, +1, +0, no new entry",
						src, c.vip, id, v[0], now.Drops[DropMartianSource]-before.Drops[DropMartianSource],
						now.QUIC[QUICRouted]-before.QUIC[QUICRouted], entries, r.w.ct.Len())
				}
			}
		}
	}
	if dst := r.sendTo(udpFrame(t, "10.0.4.1", quicVIP, 4433, quicShort(0, 2, 20))); dst != backendAddr(r, "quic", "qb") {
		t.Errorf("short header from a backend: to %v, want qb", dst)
	}
	if r.w.c.QUIC[QUICRouted] != 1 {
		t.Errorf("routed %d, want 1 (the backend's)", r.w.c.QUIC[QUICRouted])
	}
	wantBalance(t, r)
}
