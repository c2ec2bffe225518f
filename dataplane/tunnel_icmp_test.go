package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/punt"
)

// ICMP errors about the LB's own tunnel packets: a router between the LB
// and a backend whose link is smaller than dataplane.mtu drops a full-size
// outer packet with DF (df = "set", or "inherit" with a client that does
// path MTU discovery, which every TCP stack does) and sends "fragmentation
// needed" / "packet too big" to the outer source, lb_ipv4 / lb_ipv6,
// quoting the outer header, the tunnel header and the client's packet.
//
// IPVS, whose too-big answer encap cites, relays such an error to the
// client with the tunnel's overhead taken off (ip_vs_in_icmp, "Special
// case for errors for IPIP/UDP/GRE tunnel packets"); GLB documents that
// it needs jumbo frames inside the datacenter instead. Fulcrum's dataplane
// hands the error to the kernel as any packet for the LB's address (punt
// class "other", or "bgp" when the router is the BGP neighbour), which
// has no tunnel or socket for it and discards it: the client never learns
// the smaller MTU, every full-size packet of every flow through that
// router is lost, and no counter, log or metric says so.
//
// The test asks for either answer: relayed to the client (an ICMP error
// from the VIP, MTU less the tunnel's overhead), or at least counted
// under a drop reason of its own that names the tunnel.
func TestTunnelICMPAboutOuterPacket(t *testing.T) {
	cases := []struct {
		name     string
		client   string
		vip      string
		port     uint16
		router   string
		pathMTU  uint32
		overhead int
	}{
		{"gre-over-ipv4", "198.51.100.20", "203.0.113.7", 80, "198.18.0.1", 1400, 24},
		{"ipip-over-ipv6", "2001:db8:c::20", "2001:db8:ffff::7", 443, "2001:db8:99::1", 1400, 40},
	}
	bothPaths(t, testConfig, func(t *testing.T, r *rig) {
		for _, tc := range cases {
			// A full-size segment with DF: it fits dataplane.mtu (1500)
			// after encapsulation, and goes out with DF (IPv6 outer: no
			// router fragments it).
			var sport uint16
			var out [][]byte
			var v []Verdict
			for sport = 30000; ; sport++ {
				ipHdr := 20
				if netip.MustParseAddr(tc.vip).Is6() {
					ipHdr = 40
				}
				big := frame(t, tc.client, tc.vip, sport, tc.port, layers.IPProtocolTCP, "A", 1500-tc.overhead-ipHdr-20, true)
				out, v = r.run(big)
				if v[0] != Tx {
					t.Fatalf("%s: client packet verdict %v", tc.name, v[0])
				}
				// IPv6 VIP: pick a flow on an IPv6 backend (outer IPv6).
				if netip.MustParseAddr(tc.vip).Is4() || out[0][12] == 0x86 {
					break
				}
			}
			outer := out[0][14:]
			if len(outer) != 1500 {
				t.Fatalf("%s: outer packet %d bytes, want 1500", tc.name, len(outer))
			}
			if outer[0]>>4 == 4 && outer[6]&0x40 == 0 {
				t.Fatalf("%s: outer IPv4 without DF", tc.name)
			}
			var icmpErr []byte
			if outer[0]>>4 == 4 {
				// As a router quotes (RFC 1812 4.3.2.3): up to 576 bytes in all.
				icmpErr = raw4(tc.router, lb4, 1, 77, 0, icmpMsg(3, 4, tc.pathMTU, outer[:576-28]))
			} else {
				icmpErr = raw6(tc.router, rpLB6, 58, icmpMsg(2, 0, tc.pathMTU, outer[:1280-48]))
			}
			punted0, other0, drops0 := r.w.c.Punted, r.w.c.PuntLimited[punt.Other], r.w.c.Drops
			r.now += 1000
			out, v = r.run(icmpErr)
			switch v[0] {
			case Tx:
				// Relayed: an ICMP error to the client, from the VIP.
				if dst := ipDst4or6(out[0]); dst.String() != tc.client {
					t.Errorf("%s: relayed to %v, want the client %s", tc.name, dst, tc.client)
				}
			case Drop:
				named := false
				for i := range r.w.c.Drops {
					if r.w.c.Drops[i] > drops0[i] && strings.Contains(DropReason(i).String(), "tunnel") {
						named = true
					}
				}
				if !named {
					t.Errorf("%s: the router's error about a tunnel packet was dropped under no tunnel reason (drops %v)", tc.name, r.w.c.Drops)
				}
			default:
				t.Errorf("%s: a router's %s about the LB's own tunnel packet to a backend (path MTU %d < mtu 1500) was handed to the kernel "+
					"(verdict %v, punted +%d, other-class limited +%d), which has no tunnel for it: the client is never told, full-size packets are "+
					"black-holed, and nothing counts it", tc.name, map[bool]string{true: "frag-needed", false: "packet-too-big"}[outer[0]>>4 == 4],
					tc.pathMTU, v[0], r.w.c.Punted-punted0, r.w.c.PuntLimited[punt.Other]-other0)
			}
		}
	})
}

// ipDst4or6 is the IP destination of an untagged Ethernet frame.
func ipDst4or6(f []byte) netip.Addr {
	switch binary.BigEndian.Uint16(f[12:14]) {
	case 0x0800:
		return netip.AddrFrom4([4]byte(f[30:34]))
	case 0x86dd:
		return netip.AddrFrom16([16]byte(f[38:54]))
	}
	return netip.Addr{}
}

// TestTunnelCheckReplyICMPReachesCheckedBackend: a check through the
// tunnel is answered by the backend directly (DSR), from the VIP to
// lb_ipv4 and the check's source port, which names the backend. A router
// on the way back that cannot forward the answer (an HTTPS check's
// certificate flight in full-size segments, over a link smaller than the
// backend's MTU) sends "fragmentation needed" to the answer's source, the
// VIP, which the routers deliver to the LB. The error concerns the
// checked backend's connection only: it must reach that backend, or its
// TCP never learns the path MTU, the check's answer never arrives, and a
// healthy backend is marked down. The dataplane treats it as a client's
// error: by the VIP's Maglev table when the check port is the VIP's port
// (another backend for most of them), dropped as no-service otherwise.
func TestTunnelCheckReplyICMPReachesCheckedBackend(t *testing.T) {
	const n = 6
	for _, checkPort := range []uint16{80, 8080} {
		b := configtest.New().
			Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
			Web(n).
			Sub("[vip.health]", `kind = "http"`, fmt.Sprintf("port = %d", checkPort), `through = "tunnel"`)
		bothPaths(t, b.String(), func(t *testing.T, r *rig) {
			wrong := 0
			for i := 1; i <= n; i++ {
				name := fmt.Sprintf("be%d", i)
				p := r.healthPort("web", name)
				// The backend's answer: a full-size segment of the check's
				// connection, VIP:checkPort -> lb_ipv4:p, with DF.
				answer := frame(t, configtest.Web, lb4, checkPort, p, layers.IPProtocolTCP, "A", 1460, true)
				icmpErr := raw4("198.18.0.1", configtest.Web, 1, 9, 0, icmpMsg(3, 4, 1400, ipPacket(answer)[:548]))
				r.now += 1000
				out, v := r.run(icmpErr)
				want := backendAddr(r, "web", name)
				got := tunnelDst(t, out[0], v[0])
				if got != want {
					wrong++
					t.Errorf("check port %d: frag-needed about %s's check answer (to %s:%d): verdict %v, tunnelled to %v, want %v (drops %v)",
						checkPort, name, lb4, p, v[0], got, want, r.w.c.Drops)
				}
			}
			if wrong > 0 {
				t.Logf("check port %d: %d of %d backends never hear about their check's path MTU", checkPort, wrong, n)
			}
		})
	}
}
