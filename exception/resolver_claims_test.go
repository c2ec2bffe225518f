package exception

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestResolverAlternatingClaimsPinDeadGateway: the gateway is gone (its MAC
// answers nothing). A station on the LAN claims the gateway's address at
// two MACs in turn, one ARP request every 2 s (under the kernel's
// delay_first_probe_time, 5 s): each claim overrides the entry back to
// STALE, so the kernel never probes it and it never fails. The resolver
// keeps the dead MAC published for as long as the claims go on: every
// tunnelled packet is sent to it and, the next hop never being lost, the
// VIPs are never withdrawn (control.NextHopGrace).
func TestResolverAlternatingClaimsPinDeadGateway(t *testing.T) {
	t.Parallel() // each waits tens of seconds on the kernel's timers, in a LAN of its own
	l := newLAN(t, "y9pn")
	in(t, l.lbNSh, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/neigh/"+l.lbIf+"/locktime", []byte("0"), 0o644)
	})
	dead := [6]byte{2, 0, 0, 0, 0, 0xee}
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, dead, netlink.NUD_REACHABLE)
	type pub struct {
		nh dataplane.NextHop
		at time.Time
	}
	pubs := make(chan pub, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: 200 * time.Millisecond}
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: l.gwAddr} }, nil, func(_ Gateways, nh dataplane.NextHop) bool {
			pubs <- pub{nh, time.Now()}
			return true
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	if p := <-pubs; !p.nh.Has4 || p.nh.MAC4 != dead {
		t.Fatalf("first %+v", p)
	}
	// Control: one claim, the kernel verifies it, the entry fails, the
	// gateway is unresolved (how long that takes: the attack below lasts
	// three times as long).
	macs := [2][6]byte{{2, 0, 0, 0, 0, 0x61}, {2, 0, 0, 0, 0, 0x62}}
	start := time.Now()
	l.send(t, arp(1, macs[0], macs[0], l.gwAddr, l.lbAddr))
	var took time.Duration
	for took == 0 {
		select {
		case p := <-pubs:
			if !p.nh.Has4 {
				took = p.at.Sub(start)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("control: a single unanswered claim never failed the entry")
		}
	}
	t.Logf("control: unresolved %v after one claim", took)
	// Back to the dead gateway's MAC, published.
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, dead, netlink.NUD_REACHABLE)
	for {
		p := <-pubs
		if p.nh.Has4 && p.nh.MAC4 == dead {
			break
		}
	}
	// The attack: claims in turn, for 3x the time one verification took.
	end := time.Now().Add(3*took + 2*time.Second)
	claims := 0
	for time.Now().Before(end) {
		l.send(t, arp(1, macs[claims%2], macs[claims%2], l.gwAddr, l.lbAddr))
		claims++
		select {
		case p := <-pubs:
			if !p.nh.Has4 {
				t.Logf("unresolved after %d claims: the attack did not pin it", claims)
				return
			}
			if p.nh.MAC4 != dead {
				t.Fatalf("published the claimed %v", net.HardwareAddr(p.nh.MAC4[:]))
			}
		case <-time.After(2 * time.Second):
		}
	}
	m, st, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
	t.Fatalf("after %d alternating claims over %v (one claim alone failed the entry in %v) the dead gateway's %v is still published; kernel entry %v state %#x, never probed",
		claims, 3*took+2*time.Second, took, net.HardwareAddr(dead[:]), net.HardwareAddr(m[:]), st)
}

// TestResolverAlternatingClaimsLiveGatewayKept: the same attack against a
// gateway that is there: its MAC stays the one published (a blip at most
// per claimHoldMax while the kernel resolves it afresh), never a claim's.
func TestResolverAlternatingClaimsLiveGatewayKept(t *testing.T) {
	t.Parallel() // each waits tens of seconds on the kernel's timers, in a LAN of its own
	l, pubs := gatewayLAN(t, "y9lv", map[string]string{"locktime": "0"}, 200*time.Millisecond, nil)
	if p := <-pubs; !p.has || p.mac != l.peerMAC {
		t.Fatalf("first %+v", p)
	}
	macs := [2][6]byte{{2, 0, 0, 0, 0, 0x61}, {2, 0, 0, 0, 0, 0x62}}
	end := time.Now().Add(claimHoldMax*2 + 2*time.Second)
	claims, unres := 0, 0
	last := published{l.peerMAC, true}
	for time.Now().Before(end) {
		l.send(t, arp(1, macs[claims%2], macs[claims%2], l.gwAddr, l.lbAddr))
		claims++
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case p := <-pubs:
				last = p
				if !p.has {
					unres++
				} else if p.mac != l.peerMAC {
					t.Fatalf("published the claimed %v", net.HardwareAddr(p.mac[:]))
				}
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// After the claims: the gateway's MAC published.
	deadline := time.Now().Add(15 * time.Second)
	for !(last.has && last.mac == l.peerMAC) {
		select {
		case last = <-pubs:
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("live gateway not published after the attack: %+v", last)
		}
	}
	t.Logf("%d claims, %d unresolved publications", claims, unres)
	if unres > 3 {
		t.Fatalf("%d unresolved publications during %d claims at a live gateway", unres, claims)
	}
}
