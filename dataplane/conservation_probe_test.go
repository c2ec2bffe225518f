package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/sched"
)

// "Nothing is lost": every packet Process receives is counted exactly once,
// as forwarded (Encap[Forward]), a too-big reply (Encap[ICMPReply]), an
// echo reply, a punt, or a drop under one reason (parse, encapsulation or
// the dataplane's own), and its verdict agrees with the counter that
// moved. docs/drop-reasons.md states the identity:
//
//	rx = forwarded + icmp-reply + echo replies + punted + drops
//
// (drops from the kernel's side, ProcessFromKernel, excepted).

// outcome is one packet's accounted fate: "forward", "icmp-reply", "echo",
// "punt", or a drop reason's metric name.
type outcomes map[string]int64

// countOutcomes reads c's outcome counters by name.
func countOutcomes(c *Counters) outcomes {
	o := outcomes{
		"forward":    int64(c.Encap[encap.Forward]),
		"icmp-reply": int64(c.Encap[encap.ICMPReply]),
		"echo":       int64(c.EchoReplies),
		"punt":       int64(c.Punted),
		"parse-ok":   int64(c.Parse[packet.OK]), // never a drop: must stay 0
	}
	ForEachDrop(c, func(reason string, n uint64) { o[reason] += int64(n) })
	return o
}

// txKind tells what a Tx frame is: a tunnelled packet (outer source is the
// LB's address), an echo reply, or a too-big reply.
func txKind(t *testing.T, f []byte) string {
	t.Helper()
	et := 12
	for et+2 <= len(f) && (f[et] == 0x81 || f[et] == 0x88) && f[et+1] == 0x00 || et+2 <= len(f) && f[et] == 0x88 && f[et+1] == 0xa8 {
		et += 4
	}
	if et+2 > len(f) {
		t.Fatalf("tx frame of %d bytes", len(f))
	}
	l3 := et + 2
	switch {
	case f[et] == 0x08 && f[et+1] == 0x00:
		ip := f[l3:]
		src := netip.AddrFrom4([4]byte(ip[12:16]))
		if src.String() == lb4 {
			return "forward"
		}
		icmp := ip[int(ip[0]&0xf)*4:]
		if ip[9] == 1 && icmp[0] == 0 {
			return "echo"
		}
		return "icmp-reply"
	case f[et] == 0x86 && f[et+1] == 0xdd:
		ip := f[l3:]
		src := netip.AddrFrom16([16]byte(ip[8:24]))
		if src.String() == "2001:db8:100::10" {
			return "forward"
		}
		if ip[6] == 58 && ip[40] == 129 {
			return "echo"
		}
		return "icmp-reply"
	}
	t.Fatalf("tx frame with ethertype %x", f[et:et+2])
	return ""
}

// conservationConfig is attackConfig (TCP, UDP and every-port VIPs, IPv4
// and IPv6) under scheduler k for the web VIPs.
func conservationConfig(k sched.Kind) string {
	if k == sched.Maglev {
		return attackConfig
	}
	return withScheduler(k) + attackConfig[len(testConfig):]
}

// probeTemplates are the frames the random bursts draw from and mutate.
func probeTemplates(t *testing.T) [][]byte {
	tcp, udp, icmp4, icmp6 := layers.IPProtocolTCP, layers.IPProtocolUDP, layers.IPProtocolICMPv4, layers.IPProtocolICMPv6
	const web, web6, anyv = "203.0.113.7", "2001:db8:ffff::7", "203.0.113.9"
	var f [][]byte
	// Established-looking flows, new flows and their ends, a few clients.
	for c := 0; c < 4; c++ {
		src := fmt.Sprintf("198.51.100.%d", 20+c)
		sp := uint16(30000 + c)
		for _, fl := range []string{"S", "A", "PA", "FA", "R", "SA"} {
			f = append(f, frame(t, src, web, sp, 80, tcp, fl, 10, true))
		}
		src6 := fmt.Sprintf("2001:db8:aaaa::%x", 20+c)
		for _, fl := range []string{"S", "A", "PA", "FA"} {
			f = append(f, frame(t, src6, web6, sp, 443, tcp, fl, 10, true))
		}
		f = append(f, frame(t, src, web, sp, 53, udp, "", 30, true))
		f = append(f, frame(t, src, anyv, sp, 22, tcp, "A", 0, true))
		f = append(f, frame(t, src, anyv, sp, 5000, udp, "", 20, true))
	}
	// Too big: DF (a too-big reply), no DF (a drop), IPv6 (packet too big).
	f = append(f,
		frame(t, "192.0.2.98", web, 4002, 80, tcp, "PA", 1480, true),
		frame(t, "192.0.2.99", web, 4002, 80, tcp, "PA", 3000, false),
		frame(t, "2001:db8:aaaa::99", web6, 4003, 443, tcp, "PA", 1440, true),
		frame(t, "198.51.100.30", web, 4004, 53, udp, "", 1480, true),
	)
	// ICMP: echo to VIPs (v4, v6), from a VIP (to self), a timestamp
	// request, echo to the LB's own address (punt), to another host.
	f = append(f,
		icmpFrame(t, "198.51.100.40", web, icmp4, 8, 0, 64),
		icmpFrame(t, "2001:db8:aaaa::40", web6, icmp6, 128, 0, 64),
		icmpFrame(t, web, web, icmp4, 8, 0, 64),
		icmpFrame(t, lb4, web, icmp4, 8, 0, 64),
		icmpFrame(t, "198.51.100.41", web, icmp4, 13, 0, 64),
		icmpFrame(t, "198.51.100.42", lb4, icmp4, 8, 0, 64),
		icmpFrame(t, "198.51.100.43", "198.51.100.1", icmp4, 8, 0, 64),
		icmpFrame(t, "fe80::1", "ff02::1", icmp6, 135, 0, 255),
		icmpFrame(t, "2001:db8:c::1", "2001:db8:100::10", icmp6, 128, 0, 64),
	)
	// ICMP errors to the VIP quoting its flows (ours), and one that is not.
	quote := raw4(web, "198.51.100.20", 6, 1, 0x4000, tcpSeg(80, 30000, packet.TCPAck, 0))[14:]
	f = append(f,
		raw4("198.51.100.250", web, 1, 9, 0x4000, icmpMsg(3, 4, 1400, quote)),
		raw4("198.51.100.250", web, 1, 9, 0x4000, icmpMsg(3, 4, 1400, quote[:10])),
		raw4("198.51.100.250", web, 1, 9, 0x4000, icmpMsg(3, 4, 1400, raw4("192.0.2.200", "198.51.100.20", 6, 1, 0, tcpSeg(80, 30000, packet.TCPAck, 0))[14:])),
		// a big error with DF: too big, and an error itself
		raw4("198.51.100.250", web, 1, 9, 0x4000, icmpMsg(3, 4, 1400, append(append([]byte(nil), quote...), make([]byte, 1500)...))),
	)
	// Fragments: first, middle, last of a TCP datagram; one to a port-less
	// VIP protocol (UDP every-port); an IPv6 fragment.
	f = append(f,
		raw4("198.51.100.60", web, 6, 7, 0x2000, tcpSeg(40000, 80, packet.TCPAck, 60)),
		raw4("198.51.100.60", web, 6, 7, 0x2000|10, make([]byte, 80)),
		raw4("198.51.100.60", web, 6, 7, 20, make([]byte, 40)),
		raw4("198.51.100.61", anyv, 17, 8, 0x2000, udpDgram(1000, 2000, 100, 60)),
		raw4("198.51.100.62", "203.0.113.8", 17, 8, 0x2000, udpDgram(1000, 2000, 100, 60)),
		raw6("2001:db8:aaaa::61", web6, 44, cat(frag6(6, 0, true, 5), tcpSeg(40000, 443, packet.TCPAck, 40))),
	)
	// Non-VIP: to the LB (BGP-ish), to a broadcast, to another host, a
	// forged check SYN, from a martian, from the LB's own address, ARP.
	f = append(f,
		frame(t, "198.51.100.70", lb4, 40000, 179, tcp, "S", 0, true),
		frame(t, "198.51.100.71", "255.255.255.255", 68, 67, udp, "", 20, true),
		frame(t, "198.51.100.72", "198.51.100.1", 40000, 80, tcp, "S", 0, true),
		frame(t, "198.51.100.73", lb4, 40000, 61005, tcp, "S", 0, true),
		frame(t, "127.0.0.1", web, 40000, 80, tcp, "S", 0, true),
		frame(t, lb4, web, 40001, 80, tcp, "S", 0, true),
		frame(t, web, web, 40002, 80, tcp, "S", 0, true),
		frame(t, "198.51.100.74", web, 40003, 8080, tcp, "S", 0, true), // no service on that port
	)
	arp := make([]byte, 42)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 0xaa, 0x08, 0x06})
	f = append(f, arp)
	// VLAN-tagged copies of a few.
	for _, b := range [][]byte{f[1], f[6], f[len(f)-20]} {
		f = append(f, append(append(append([]byte(nil), b[:12]...), 0x81, 0, 0, 7), b[12:]...))
	}
	return f
}

// conservationWorker runs one random campaign on r and checks every burst.
func conservationCampaign(t *testing.T, r *rig, seed uint64, bursts int) outcomes {
	rng := rand.New(rand.NewPCG(seed, 17))
	tmpl := probeTemplates(t)
	var over Overrides
	prev := countOutcomes(&r.w.c)
	prevRx := r.w.c.RxPackets
	flood, floodLeft := -1, 0
	for b := 0; b < bursts; b++ {
		// Events between bursts.
		switch rng.IntN(10) {
		case 0:
			over = Overrides{{"web", "be1"}: {Weight: 0, Down: true}}
			r.publish(over)
		case 1:
			over = nil
			r.publish(over)
		case 2:
			r.now += conntrack.Time(rng.IntN(400_000)) // past the timeouts, at times
		case 3:
			// The next hop of one family unresolved.
			nh := NextHop{MAC6: gwMAC, Has6: true}
			if rng.IntN(2) == 0 {
				nh = NextHop{MAC4: gwMAC, Has4: true}
			}
			r.shared.Services.Store(r.publish(over).WithNextHop(nh))
		case 4:
			over = Overrides{{"web", "be2"}: {Weight: 0, Down: true}, {"web6", "six1"}: {Weight: 0, Down: true}}
			r.publish(over)
		}
		n := 1 + rng.IntN(MaxBurst)
		// A flood: full bursts of one template, with no time between
		// them, spend the ICMP, echo and punt budgets.
		if floodLeft == 0 && rng.IntN(8) == 0 {
			flood, floodLeft = rng.IntN(len(tmpl)), 5
		}
		if floodLeft > 0 {
			floodLeft--
			n = MaxBurst
		} else {
			flood = -1
		}
		pkts := make([]Pkt, n)
		for i := range pkts {
			k := flood
			if k < 0 {
				k = rng.IntN(len(tmpl))
			}
			fr := append([]byte(nil), tmpl[k]...)
			switch rng.IntN(8) {
			case 0: // corrupted bytes
				for e := 0; e < 1+rng.IntN(3); e++ {
					fr[rng.IntN(len(fr))] ^= byte(1 + rng.IntN(255))
				}
			case 1: // cut short
				fr = fr[:rng.IntN(len(fr))]
			}
			buf := make([]byte, headroom+len(fr)+64)
			copy(buf[headroom:], fr)
			p := Pkt{Buf: buf, Off: headroom, Len: len(fr)}
			switch rng.IntN(60) {
			case 0:
				p.Len = len(buf) // beyond the buffer: a driver bug
			case 1:
				p.Off = rng.IntN(headroom / 4) // little headroom
				copy(buf[p.Off:], fr)
			}
			pkts[i] = p
		}
		if flood < 0 {
			r.now += conntrack.Time(rng.IntN(5))
		}
		r.w.Process(pkts, r.now)

		// Per packet: the verdict and the counter that should move.
		want := outcomes{}
		for i := range pkts {
			switch r.w.Verdicts[i] {
			case Tx:
				p := pkts[i]
				want[txKind(t, p.Buf[p.Off:p.Off+p.Len])]++
			case Punt:
				want["punt"]++
			case Drop:
				want[r.w.why[i].String()]++
			default:
				t.Fatalf("burst %d packet %d: verdict %d", b, i, r.w.Verdicts[i])
			}
		}
		now := countOutcomes(&r.w.c)
		var sum int64
		for k, v := range now {
			d := v - prev[k]
			sum += d
			if d != want[k] {
				t.Errorf("burst %d (%d packets): %q moved by %d, verdicts say %d", b, n, k, d, want[k])
			}
		}
		for k, v := range want {
			if _, ok := now[k]; !ok && v != 0 {
				t.Errorf("burst %d: %d packets with outcome %q, which no counter has", b, v, k)
			}
		}
		if rx := int64(r.w.c.RxPackets - prevRx); rx != int64(n) || sum != rx {
			t.Errorf("burst %d: %d packets, rx moved by %d, outcomes by %d", b, n, rx, sum)
		}
		if t.Failed() {
			t.FailNow()
		}
		prev, prevRx = now, r.w.c.RxPackets
	}
	wantBalance(t, r)
	return prev
}

// TestConservationRandomBursts: long random mixed bursts under every
// scheduler, on the fused path and on the general path.
func TestConservationRandomBursts(t *testing.T) {
	seen := outcomes{}
	for _, k := range sched.Kinds() {
		for _, general := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/general=%v", k, general), func(t *testing.T) {
				r := newRig(t, conservationConfig(k))
				r.w.generalOnly = general
				for o, n := range conservationCampaign(t, r, 31+uint64(len(k.String())), 200) {
					seen[o] += n
				}
			})
		}
	}
	// The campaign reached every outcome it means to probe.
	for _, o := range []string{"forward", "icmp-reply", "echo", "punt", "punt-rate-limited", "echo-rate-limited", "icmp-rate-limited",
		"no-next-hop", "bad-buffer", "no-headroom", "martian-source", "no-service", "not-for-host", "icmp-error-to-self",
		"icmp-error-not-ours", "vip-icmp-not-error", "too-big-no-df", "too-big-icmp-error", "truncated-ethernet", "bad-icmp-quote"} {
		if seen[o] == 0 {
			t.Errorf("no burst reached outcome %q", o)
		}
	}
}

// The identity with checks through the tunnel: a forged check SYN from
// the wire is a counted drop among the rest.
func TestConservationWithTunnelChecks(t *testing.T) {
	for _, general := range []bool{false, true} {
		r := newRig(t, tunnelConfig)
		r.w.generalOnly = general
		p := r.healthPort("web", "be1")
		before := r.w.c.Drops[DropHealthForgedSYN]
		_, v := r.run(frame(t, "198.51.100.80", lb4, 40000, p, layers.IPProtocolTCP, "S", 0, true))
		if v[0] != Drop || r.w.c.Drops[DropHealthForgedSYN] != before+1 {
			t.Fatalf("forged check SYN: verdict %v, health-check-forged-syn moved by %d", v[0], r.w.c.Drops[DropHealthForgedSYN]-before)
		}
		conservationCampaign(t, r, 77, 60)
	}
}

// wireIdentity is rx minus what docs/drop-reasons.md says the wire's
// packets became: forwarded + icmp-reply + echo + punted + drops, the
// drops of packets from the kernel (the two health-check-* reasons) left
// out. Zero when nothing is lost or counted twice.
func wireIdentity(c *Counters) int64 {
	var out int64
	for k, n := range countOutcomes(c) {
		if k != "health-check-unknown-slot" && k != "health-check-not-encapsulated" {
			out += n
		}
	}
	return int64(c.RxPackets) - out
}

// A check packet from the kernel that cannot be sent for want of the next
// hop's MAC is a kernel packet: it must not be counted under a reason of
// the wire's packets (no-next-hop), or the wire's identity breaks (rx
// stays, a drop appears) and an operator reads it as client traffic lost.
func TestConservationKernelCheckNoNextHop(t *testing.T) {
	r := newRig(t, tunnelConfig)
	r.run(frame(t, "198.51.100.81", configtest.Web, 40000, 80, layers.IPProtocolTCP, "S", 0, true))
	r.shared.Services.Store(r.shared.Services.Load().WithNextHop(NextHop{MAC6: gwMAC, Has6: true})) // no IPv4 next hop
	p := r.healthPort("web", "be1")
	_, v := r.fromKernel(frame(t, lb4, configtest.Web, p, 8080, layers.IPProtocolTCP, "S", 0, true))
	if v[0] != Drop {
		t.Fatalf("check with no next hop: verdict %v", v[0])
	}
	if d := wireIdentity(&r.w.c); d != 0 {
		t.Errorf("rx %d, wire outcomes off by %d: drops %v (a kernel packet counted as a wire drop)", r.w.c.RxPackets, d, r.w.c.Drops)
	}
	if r.w.c.Drops[DropHealthNotSent] != 1 {
		t.Errorf("health-check-not-encapsulated = %d, want 1", r.w.c.Drops[DropHealthNotSent])
	}
}
