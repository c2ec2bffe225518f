package bgp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// An IPv6 session on [::1]: IPv6 VIPs go out in MP_REACH_NLRI (AFI 2,
// SAFI 1) with the session's own address as the next hop (next-hop self),
// IPv4 VIPs over the same session with next_hop_v4; withdrawals arrive.
func TestV6OnlyProbeIPv6SessionNextHop(t *testing.T) {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	r := &fakeRouter{l: l, comms: map[string]int{}}
	t.Cleanup(func() {
		l.Close()
		r.mu.Lock()
		if r.conn != nil {
			r.conn.Close()
		}
		r.mu.Unlock()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	s, err := New(Config{
		ASN: 65100, RouterID: "192.0.2.10", NextHopV4: "192.0.2.10",
		Neighbors: []Neighbor{{Address: "::1", PeerASN: 65001, Port: port, ConnectRetry: time.Second}},
	}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitLoopbackEstablished(t, s)
	v6, v4 := netip.MustParsePrefix("2001:db8:ffff::7/128"), netip.MustParsePrefix("203.0.113.7/32")
	for _, p := range []netip.Prefix{v6, v4} {
		if err := s.Announce(p, VIPAttrs{}); err != nil {
			t.Fatal(err)
		}
	}
	type seen struct {
		nh   string
		afi  uint16
		safi uint8
	}
	look := func() (map[string]seen, map[string]bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		got, gone := map[string]seen{}, map[string]bool{}
		for _, u := range r.updates {
			var nh4 string
			for _, a := range u.PathAttributes {
				if a, ok := a.(*gbgp.PathAttributeNextHop); ok {
					nh4 = a.Value.String()
				}
			}
			for _, n := range u.NLRI {
				got[n.NLRI.String()] = seen{nh4, 1, 1}
				delete(gone, n.NLRI.String())
			}
			for _, w := range u.WithdrawnRoutes {
				gone[w.NLRI.String()] = true
			}
			for _, a := range u.PathAttributes {
				switch a := a.(type) {
				case *gbgp.PathAttributeMpReachNLRI:
					for _, n := range a.Value {
						got[n.NLRI.String()] = seen{a.Nexthop.String(), a.AFI, a.SAFI}
						delete(gone, n.NLRI.String())
					}
				case *gbgp.PathAttributeMpUnreachNLRI:
					for _, n := range a.Value {
						gone[n.NLRI.String()] = true
					}
				}
			}
		}
		return got, gone
	}
	waitFor(t, 10*time.Second, "both VIPs received", func() (bool, string) {
		got, _ := look()
		return len(got) == 2, fmt.Sprint(got)
	})
	got, _ := look()
	if g := got[v6.String()]; g.afi != 2 || g.safi != 1 || g.nh != "::1" {
		t.Errorf("IPv6 VIP received as %+v, want AFI 2 SAFI 1 next hop ::1 (next-hop self)", g)
	}
	if g := got[v4.String()]; g.nh != "192.0.2.10" {
		t.Errorf("IPv4 VIP over the IPv6 session received as %+v, want next hop 192.0.2.10", g)
	}
	if err := s.Withdraw(v6); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "IPv6 VIP withdrawn", func() (bool, string) {
		_, gone := look()
		return gone[v6.String()], fmt.Sprint(gone)
	})
	if p := s.Peers()[0]; p.State != StateEstablished {
		t.Errorf("peer %+v", p)
	}
}
