//go:build linux

package main

import (
	"encoding/binary"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/decap"
)

// TestAllowedEdges: the second chance never forwards to the network or
// broadcast address of a -peers prefix or of a local subnet (a send there
// reaches every host of the segment), nor to a local address; the other
// addresses of -peers are allowed.
func TestAllowedEdges(t *testing.T) {
	peers := []netip.Prefix{netip.MustParsePrefix("10.0.2.0/24"), netip.MustParsePrefix("10.8.0.0/8"),
		netip.MustParsePrefix("10.77.0.4/31"), netip.MustParsePrefix("2001:db8:1::/64")}
	a := &agent{peers: peers, peerEdges: edgeSet(peers)}
	a.local.Store(&localSet{
		addrs:    map[netip.Addr]bool{netip.MustParseAddr("10.0.2.1"): true},
		prefixes: []netip.Prefix{netip.MustParsePrefix("10.9.9.0/24")},
		edges:    map[netip.Addr]bool{netip.MustParseAddr("10.5.0.0"): true, netip.MustParseAddr("10.5.255.255"): true},
	})
	for _, c := range []struct {
		to  string
		ok  bool
		why int
	}{
		{"10.0.2.7", true, 0},
		{"10.0.2.255", false, scNotAllowed}, // the -peers prefix's broadcast
		{"10.0.2.0", false, scNotAllowed},   // and its network address
		{"10.255.255.255", false, scNotAllowed},
		{"10.0.0.0", false, scNotAllowed},
		{"10.5.255.255", false, scNotAllowed}, // a local subnet's, inside a wider -peers prefix
		{"10.5.0.0", false, scNotAllowed},
		{"10.5.0.9", true, 0},
		{"10.77.0.4", true, 0}, // a /31 has no broadcast (RFC 3021)
		{"10.77.0.5", true, 0},
		{"2001:db8:1::", false, scNotAllowed}, // the subnet-router anycast address
		{"2001:db8:1::9", true, 0},
		{"10.0.2.1", false, scSelf},
		{"10.9.9.3", false, scSelf}, // a local route (AnyIP)
		{"192.0.2.1", false, scNotAllowed},
	} {
		ok, why := a.allowed(netip.MustParseAddr(c.to))
		if ok != c.ok || why != c.why {
			t.Errorf("allowed(%s) = %v %s, want %v %s", c.to, ok, scNames[why], c.ok, scNames[c.why])
		}
	}
}

// fakeConn hands receive a list of packets, each with its outer source,
// then net.ErrClosed.
type fakeConn struct {
	pkts [][]byte
	srcs []netip.Addr
	i    int
}

func (c *fakeConn) Read(b []byte) (int, error) {
	n, _, err := c.from(b)
	return n, err
}

func (c *fakeConn) from(b []byte) (int, netip.Addr, error) {
	if c.i == len(c.pkts) {
		return 0, netip.Addr{}, net.ErrClosed
	}
	c.i++
	return copy(b, c.pkts[c.i-1]), c.srcs[c.i-1], nil
}

// greTo is inner in GRE over IPv4 toward beAddr4, with a second chance
// named if chance is valid.
func greTo(t *testing.T, chance netip.Addr, inner []byte) []byte {
	g := &layers.GRE{Protocol: layers.EthernetTypeIPv4}
	if chance.IsValid() {
		g.KeyPresent, g.Key = true, binary.BigEndian.Uint32(chance.AsSlice())
	}
	return serialize(t, outer(false, layers.IPProtocolGRE), g, gopacket.Payload(inner))
}

// TestReceiveRefusals: what the receive loop delivers to the TUN (here a
// pipe) and what it drops: an inner packet to an address that is not this
// host's (drop.inner-not-local), a tunnel in a tunnel (drop.inner-tunnel),
// with -lbs a tunnel from another source than the LBs and the peers
// (drop.outer-not-lb), and a second chance named by a peer (not acted
// upon, delivered).
func TestReceiveRefusals(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	peers := []netip.Prefix{netip.MustParsePrefix("10.96.3.0/24")}
	a := &agent{failed: make(chan error, 1), tun: &tunDevice{File: w, name: "pipe"},
		lbs: []netip.Prefix{netip.PrefixFrom(lbAddr4, 32)}, peers: peers, peerEdges: edgeSet(peers)}
	a.local.Store(&localSet{addrs: map[netip.Addr]bool{vipAddr4: true, beAddr4: true}})
	a.lastReread.Store(math.MaxInt64) // a miss never rereads this host's addresses
	toVIP := tcpPacket(t, false, 40001, &layers.TCP{Seq: 1, Ack: 1, ACK: true}, []byte("x"))
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{198, 51, 100, 99}, DstIP: []byte{10, 96, 3, 2}}
	udp := &layers.UDP{SrcPort: 1234, DstPort: 53}
	udp.SetNetworkLayerForChecksum(ip)
	toElsewhere := serialize(t, ip, udp, gopacket.Payload("relayed"))
	peer, stranger := netip.MustParseAddr("10.96.3.2"), netip.MustParseAddr("192.0.2.66")
	c := &fakeConn{}
	add := func(src netip.Addr, pkt []byte) {
		c.pkts, c.srcs = append(c.pkts, pkt), append(c.srcs, src)
	}
	add(lbAddr4, greTo(t, netip.Addr{}, toVIP))                                     // delivered
	add(lbAddr4, greTo(t, netip.Addr{}, toElsewhere))                               // inner-not-local
	add(lbAddr4, greTo(t, netip.Addr{}, greTo(t, netip.Addr{}, toVIP)))             // inner-tunnel
	add(stranger, greTo(t, netip.Addr{}, toVIP))                                    // outer-not-lb
	add(stranger, greTo(t, netip.MustParseAddr("10.96.3.5"), toVIP))                // outer-not-lb
	add(peer, greTo(t, netip.Addr{}, toVIP))                                        // delivered (a forward)
	add(peer, greTo(t, netip.MustParseAddr("10.96.3.5"), toVIP))                    // delivered, the chance ignored
	add(lbAddr4, greTo(t, netip.MustParseAddr("10.96.3.255"), toVIP))               // delivered: a broadcast chance
	add(lbAddr4, greTo(t, netip.MustParseAddr("10.96.3.5"), greTo(t, peer, toVIP))) // inner-tunnel
	s := &source{name: "gre4", conn: c, from: c.from, strip: decap.StripChance}
	a.rx.Add(1)
	a.receive(s)
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 * len(toVIP); len(out) != want {
		t.Errorf("%d bytes written to the TUN, want 4 packets to the VIP (%d bytes)", len(out), want)
	}
	for name, c := range map[string]struct{ got, want uint64 }{
		"in":                        {s.in.Load(), 9},
		"out.gre":                   {a.out[decap.GRE].Load(), 4},
		"drop.inner-not-local":      {a.notLocal.Load(), 1},
		"drop.inner-tunnel":         {a.drop[decap.ErrInnerTunnel].Load(), 2},
		"drop.outer-not-lb":         {a.notLB.Load(), 2},
		"second_chance.in":          {a.sc[scIn].Load(), 2},
		"second_chance.not-allowed": {a.sc[scNotAllowed].Load(), 2},
		"second_chance.forwarded":   {a.sc[scForwarded].Load(), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", name, c.got, c.want)
		}
	}
}

// garbageConn returns left packets of garbage (a bad IP version) from an
// LB's address, then net.ErrClosed.
type garbageConn struct{ left int }

func (c *garbageConn) Read(b []byte) (int, error) {
	n, _, err := c.from(b)
	return n, err
}

func (c *garbageConn) from(b []byte) (int, netip.Addr, error) {
	if c.left == 0 {
		return 0, netip.Addr{}, net.ErrClosed
	}
	c.left--
	b[0] = 0x55
	return 20, lbAddr4, nil
}

// TestReceiveDropAllocs: a flood of packets that package decap refuses
// costs the receive loop no allocation per packet, with and without -lbs:
// the drop path is the one an attacker controls completely.
func TestReceiveDropAllocs(t *testing.T) {
	const n = 1000
	for _, lbs := range [][]netip.Prefix{nil, {netip.PrefixFrom(lbAddr4, 32)}} {
		run := func(packets int) float64 {
			return testing.AllocsPerRun(5, func() {
				c := &garbageConn{left: packets}
				a := &agent{failed: make(chan error, 1), lbs: lbs}
				s := &source{name: "gre4", conn: c, from: c.from, strip: decap.StripChance}
				a.rx.Add(1)
				a.receive(s)
				if a.drop[decap.ErrIPVersion].Load() != uint64(packets) {
					t.Fatalf("drop.ip-version = %d, want %d", a.drop[decap.ErrIPVersion].Load(), packets)
				}
			})
		}
		base, flood := run(0), run(n)
		if per := (flood - base) / n; per > 0.01 {
			t.Errorf("-lbs %v: receive allocates %.2f times per refused packet (%v allocs for %d packets, %v for none)", lbs, per, flood, n, base)
		}
	}
}
