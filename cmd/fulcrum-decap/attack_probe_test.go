//go:build linux

package main

import (
	"bytes"
	"io"
	"math"
	"net/netip"
	"os"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/decap"
)

// TestProbeMappedPrefixFlags: an IPv4-mapped prefix shorter than /96
// (::ffff:10.0.0.0/8) has no IPv4 equivalent; it must be refused with a
// clear error, not kept as an invalid prefix that matches nothing.
func TestProbeMappedPrefixFlags(t *testing.T) {
	for _, flag := range []string{"-peers", "-lbs"} {
		for _, v := range []string{"::ffff:10.0.0.0/8", "::ffff:0.0.0.0/95"} {
			o, err := parseFlags([]string{flag, v}, &bytes.Buffer{})
			if err == nil {
				t.Errorf("%s %s accepted: peers %v lbs %v", flag, v, o.peers, o.lbs)
			}
		}
		o, err := parseFlags([]string{flag, "::ffff:10.0.0.0/104"}, &bytes.Buffer{})
		if err != nil {
			t.Errorf("%s ::ffff:10.0.0.0/104: %v", flag, err)
			continue
		}
		got := append(o.peers, o.lbs...)
		if want := netip.MustParsePrefix("10.0.0.0/8"); len(got) != 1 || got[0] != want {
			t.Errorf("%s ::ffff:10.0.0.0/104 = %v, want [%v]", flag, got, want)
		}
	}
}

// udpTo is a UDP datagram of one octet from src to dst, of either family.
func udpTo(t *testing.T, src, dst string) []byte {
	t.Helper()
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	udp := &layers.UDP{SrcPort: 1234, DstPort: 53}
	if s.Is6() {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: s.AsSlice(), DstIP: d.AsSlice()}
		udp.SetNetworkLayerForChecksum(ip)
		return serialize(t, ip, udp, gopacket.Payload("x"))
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: s.AsSlice(), DstIP: d.AsSlice()}
	udp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ip, udp, gopacket.Payload("x"))
}

// throughAgent has an agent whose host addresses are local receive each
// inner packet in GRE over IPv4 from lbAddr4, and returns the agent and
// what it wrote to its TUN (a pipe).
func throughAgent(t *testing.T, local *localSet, inners ...[]byte) (*agent, []byte) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := &agent{failed: make(chan error, 1), tun: &tunDevice{File: w, name: "pipe"}}
	a.local.Store(local)
	a.lastReread.Store(math.MaxInt64)
	c := &fakeConn{}
	for _, p := range inners {
		g := &layers.GRE{Protocol: layers.EthernetTypeIPv4}
		if p[0]>>4 == 6 {
			g.Protocol = layers.EthernetTypeIPv6
		}
		c.pkts, c.srcs = append(c.pkts, serialize(t, outer(false, layers.IPProtocolGRE), g, gopacket.Payload(p))), append(c.srcs, lbAddr4)
	}
	s := &source{name: "gre4", conn: c, from: c.from, strip: decap.StripChance}
	a.rx.Add(1)
	a.receive(s)
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return a, out
}

// TestProbeInnerMartians: an inner packet whose destination is a loopback
// address (local by the kernel's local table: 127.0.0.0/8) or whose source
// is loopback, unspecified, multicast or limited broadcast is never
// written to the TUN: it cannot come from a client, and it is counted.
func TestProbeInnerMartians(t *testing.T) {
	// What readLocal finds on any host: 127.0.0.0/8 and ::1 are local.
	local := &localSet{addrs: map[netip.Addr]bool{vipAddr4: true, beAddr4: true, netip.MustParseAddr("::1"): true},
		prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	good := udpTo(t, "198.51.100.9", vipAddr4.String())
	a, out := throughAgent(t, local,
		good,
		udpTo(t, "198.51.100.9", "127.0.0.1"),
		udpTo(t, "198.51.100.9", "127.1.2.3"),
		udpTo(t, "127.0.0.1", vipAddr4.String()),
		udpTo(t, "0.0.0.0", vipAddr4.String()),
		udpTo(t, "224.0.0.1", vipAddr4.String()),
		udpTo(t, "255.255.255.255", vipAddr4.String()),
		udpTo(t, "169.254.169.254", vipAddr4.String()), // link-local: the backend's reply would stay on its link
	)
	if !bytes.Equal(out, good) {
		t.Errorf("TUN got %d bytes, want only the one good packet (%d bytes)", len(out), len(good))
	}
	if got := a.out[decap.GRE].Load(); got != 1 {
		t.Errorf("out.gre = %d, want 1", got)
	}
	if got := a.notLocal.Load() + a.martian.Load(); got != 7 {
		t.Errorf("inner-not-local + inner-martian = %d, want 7", got)
	}
}

// An inner packet whose source is one of this host's own addresses (the
// backend's, a VIP, one within a local prefix) is forged: delivered, the
// service answers itself. IPv6's kernel delivers such a packet (IPv4's
// drops it unless accept_local is set), so the agent drops both.
func TestInnerSourceOfThisHostDropped(t *testing.T) {
	vip6, be6 := netip.MustParseAddr("2001:db8::80"), netip.MustParseAddr("2001:db8::10")
	local := &localSet{addrs: map[netip.Addr]bool{vipAddr4: true, beAddr4: true, vip6: true, be6: true},
		prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("203.0.113.0/24")}}
	good4, good6 := udpTo(t, "198.51.100.9", vipAddr4.String()), udpTo(t, "2001:db8:1::9", vip6.String())
	a, out := throughAgent(t, local,
		good4,
		udpTo(t, beAddr4.String(), vipAddr4.String()),
		udpTo(t, vipAddr4.String(), vipAddr4.String()),
		udpTo(t, "203.0.113.7", vipAddr4.String()),
		good6,
		udpTo(t, be6.String(), vip6.String()),
		udpTo(t, vip6.String(), vip6.String()),
	)
	if want := append(append([]byte{}, good4...), good6...); !bytes.Equal(out, want) {
		t.Errorf("TUN got %d bytes, want only the two good packets (%d bytes)", len(out), len(want))
	}
	if got := a.martian.Load(); got != 5 {
		t.Errorf("inner-martian = %d, want 5", got)
	}
}
