package dataplane

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/punt"

	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// What the dataplane hands the kernel (the exception path) when a packet
// is not VIP traffic, as an attacker on the LAN sees it.

// Only what the kernel can take is punted: the LB's own addresses,
// broadcast, multicast and link-local destinations. A packet to any other
// unicast address would cost the forwarding core a write to the tap and
// the kernel's work to drop it (it forwards nothing from the tap): a
// flood to random addresses would starve the loop.
func TestPuntOnlyForTheHost(t *testing.T) {
	r := newRig(t, testConfig)
	cases := []struct {
		dst  string
		want Verdict
	}{
		{lb4, Punt},                // BGP, ssh, ping to the LB
		{"255.255.255.255", Punt},  // broadcast
		{"224.0.0.5", Punt},        // multicast
		{"169.254.1.1", Punt},      // link-local
		{"192.0.2.77", Drop},       // another host
		{"10.9.9.9", Drop},         // another network
		{"198.51.100.1", Drop},     // a client's
		{"2001:db8:100::10", Punt}, // the LB's IPv6 address
		{"ff02::1:ff00:10", Punt},  // ND's solicited-node multicast
		{"fe80::1", Punt},          // link-local
		{"2001:db8:77::1", Drop},   // another host
	}
	for _, tc := range cases {
		src := "198.51.100.7"
		if strings.Contains(tc.dst, ":") {
			src = "2001:db8:c::7"
		}
		drops := r.w.c.Drops[DropNotForHost]
		punted := r.w.c.Punted
		_, v := r.run(frame(t, src, tc.dst, 40000, 22, layers.IPProtocolTCP, "S", 0, true))
		if v[0] != tc.want {
			t.Errorf("to %s: verdict %v, want %v", tc.dst, v[0], tc.want)
		}
		if tc.want == Drop && (r.w.c.Drops[DropNotForHost] != drops+1 || r.w.c.Punted != punted) {
			t.Errorf("to %s: not-for-host +%d, punted +%d; want +1, +0", tc.dst, r.w.c.Drops[DropNotForHost]-drops, r.w.c.Punted-punted)
		}
	}
	wantBalance(t, r)
}

// A SYN to a health check's source port on the LB's address is dropped
// while checks run through the tunnel: the kernel would take it for a
// simultaneous open of the check's connection (its addresses and ports are
// predictable) and the backend's real SYN-ACK would then fail the check.
// The backend's SYN-ACK itself, and other traffic to the LB, still go to
// the kernel; without checks through the tunnel nothing is dropped.
func TestForgedSYNToHealthCheckPortDropped(t *testing.T) {
	r := newRig(t, tunnelConfig)
	port := r.healthPort("web", "be1")
	_, v := r.run(
		frame(t, configtest.Web, lb4, 80, port, layers.IPProtocolTCP, "S", 0, true),     // forged, from the VIP
		frame(t, "198.51.100.7", lb4, 80, port, layers.IPProtocolTCP, "S", 0, true),     // forged, from anyone
		frame(t, configtest.Web, lb4, 80, port, layers.IPProtocolTCP, "SA", 0, true),    // the backend's answer
		frame(t, "198.51.100.7", lb4, 40000, 179, layers.IPProtocolTCP, "S", 0, true),   // BGP
		frame(t, "198.51.100.7", lb4, 40000, 60999, layers.IPProtocolTCP, "S", 0, true), // below the range
	)
	want := []Verdict{Drop, Drop, Punt, Punt, Punt}
	for i := range want {
		if v[i] != want[i] {
			t.Errorf("packet %d: verdict %v, want %v", i, v[i], want[i])
		}
	}
	if got := r.w.c.Drops[DropHealthForgedSYN]; got != 2 {
		t.Errorf("health-check-forged-syn %d, want 2", got)
	}
	wantBalance(t, r)

	r2 := newRig(t, testConfig) // no checks through the tunnel
	if _, v := r2.run(frame(t, configtest.Web, lb4, 80, port, layers.IPProtocolTCP, "S", 0, true)); v[0] != Punt {
		t.Errorf("without checks through the tunnel: verdict %v, want punt", v[0])
	}
}

// puntFrames returns builders of the i-th frame of each punt class, for
// the budget tests.
func puntFrames(t *testing.T) (arp, ns, bgp, health, other func(i int) []byte) {
	arp = func(i int) []byte {
		buf := gopacket.NewSerializeBuffer()
		_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
			&layers.Ethernet{SrcMAC: clientMAC, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
				SourceHwAddress: clientMAC, SourceProtAddress: []byte{192, 0, 2, byte(i)}, DstHwAddress: make([]byte, 6), DstProtAddress: []byte{192, 0, 2, 10}})
		return append([]byte(nil), buf.Bytes()...)
	}
	ns = func(i int) []byte {
		ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6,
			SrcIP: netip.MustParseAddr(fmt.Sprintf("fe80::%x", i+1)).AsSlice(), DstIP: netip.MustParseAddr("ff02::1:ff00:10").AsSlice()}
		icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}
		_ = icmp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv6}, ip, icmp,
			gopacket.Payload(append([]byte{0, 0, 0, 0}, netip.MustParseAddr("2001:db8:100::10").AsSlice()...))); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	bgp = func(i int) []byte {
		return frame(t, peer4, lb4, 179, uint16(40000+i), layers.IPProtocolTCP, "A", 0, true)
	}
	health = func(i int) []byte {
		return frame(t, "10.0.1.1", lb4, 8080, uint16(40000+i), layers.IPProtocolTCP, "SA", 0, true)
	}
	other = func(i int) []byte {
		return frame(t, fmt.Sprintf("198.51.%d.%d", 100+i/250, 1+i%250), lb4, uint16(1000+i), 53, layers.IPProtocolUDP, "", 0, true)
	}
	return
}

// peer4 is the BGP neighbour of the punt budget tests.
const peer4 = "192.0.2.1"

// runAt runs frames in one burst at the rig's clock without moving it.
func (r *rig) runAt(frames ...[]byte) []Verdict {
	r.now -= 10 // run moves the clock by 10 ms
	_, v := r.run(frames...)
	return v
}

func count(v []Verdict, want Verdict) int {
	n := 0
	for _, x := range v {
		if x == want {
			n++
		}
	}
	return n
}

// A flood for the host costs the forwarding core at most its class's
// budget: a burst of a tenth of a second's worth, then the rate. The rest
// is dropped and counted by class, and every packet is accounted for.
func TestPuntFloodBounded(t *testing.T) {
	r := newRig(t, testConfig)
	_, _, _, _, other := puntFrames(t)
	rate := punt.Default.Other
	burst := punt.Burst(rate)
	punted := 0
	for b := 0; b < 20; b++ { // 640 packets at one instant
		fs := make([][]byte, 32)
		for i := range fs {
			fs[i] = other(b*32 + i)
		}
		punted += count(r.runAt(fs...), Punt)
	}
	if punted != burst {
		t.Errorf("punted %d of 640 at one instant, want the burst %d", punted, burst)
	}
	if got := r.w.c.PuntLimited[punt.Other]; got != uint64(640-burst) || r.w.c.Drops[DropPuntRateLimited] != got {
		t.Errorf("punt-rate-limited %d (other %d), want %d", r.w.c.Drops[DropPuntRateLimited], got, 640-burst)
	}
	// 37 ms later, 37 tokens at 1000 a second; 2 s later, the burst again
	// (not 2,000: the budget holds a burst at most).
	for _, tc := range []struct {
		ms   conntrack.Time
		want int
	}{{37, rate * 37 / 1000}, {2000, burst}} {
		r.now += tc.ms
		punted = 0
		for b := 0; b < 10; b++ {
			fs := make([][]byte, 32)
			for i := range fs {
				fs[i] = other(b*32 + i)
			}
			punted += count(r.runAt(fs...), Punt)
		}
		if punted != tc.want {
			t.Errorf("%d ms later: punted %d, want %d", tc.ms, punted, tc.want)
		}
	}
	if r.w.c.PuntLimited[punt.Neighbour]+r.w.c.PuntLimited[punt.BGP]+r.w.c.PuntLimited[punt.Health] != 0 {
		t.Errorf("other classes limited: %v", r.w.c.PuntLimited)
	}
	wantBalance(t, r)
}

// While a flood spends the other class's budget, the traffic the LB needs
// still reaches the kernel: ARP and neighbour discovery, its BGP session,
// its health checks' answers (direct, and through the tunnel: from the VIP
// to a check's port). A flood forged from the BGP neighbour's address
// spends the bgp budget only.
func TestPuntClassesOutliveAFlood(t *testing.T) {
	r := newRig(t, tunnelConfig)
	r.shared.Services.Load().SetPunt(punt.Config{}, []netip.Addr{netip.MustParseAddr(peer4)})
	arp, ns, bgp, health, other := puntFrames(t)
	tunnelAnswer := frame(t, configtest.Web, lb4, 80, r.healthPort("web", "be2"), layers.IPProtocolTCP, "SA", 0, true)
	flood := func(f func(int) []byte) {
		for b := 0; b < 20; b++ {
			fs := make([][]byte, 32)
			for i := range fs {
				fs[i] = f(b*32 + i)
			}
			r.runAt(fs...)
		}
	}
	flood(other)
	if r.w.c.PuntLimited[punt.Other] == 0 {
		t.Fatal("the flood was not limited")
	}
	v := r.runAt(other(999), arp(1), ns(1), bgp(1), health(1), tunnelAnswer)
	want := []Verdict{Drop, Punt, Punt, Punt, Punt, Punt}
	for i := range want {
		if v[i] != want[i] {
			t.Errorf("packet %d during the flood: verdict %v, want %v", i, v[i], want[i])
		}
	}
	flood(bgp)
	v = r.runAt(bgp(999), arp(2), ns(2), health(2))
	want = []Verdict{Drop, Punt, Punt, Punt}
	for i := range want {
		if v[i] != want[i] {
			t.Errorf("packet %d during the forged BGP flood: verdict %v, want %v", i, v[i], want[i])
		}
	}
	for c, want := range map[punt.Class]bool{punt.Other: true, punt.BGP: true, punt.Neighbour: false, punt.Health: false} {
		if got := r.w.c.PuntLimited[c] > 0; got != want {
			t.Errorf("class %v limited: %v, want %v", c, got, want)
		}
	}
	wantBalance(t, r)
}

// A rate below one packet a millisecond (the clock's resolution) still
// refills: 5 a second is one every 200 ms, not none.
func TestPuntLowRate(t *testing.T) {
	r := newRig(t, testConfig)
	r.shared.Services.Load().SetPunt(punt.Config{Other: 5}, nil)
	_, _, _, _, other := puntFrames(t)
	n := 0
	for b := 0; b < 4; b++ {
		fs := make([][]byte, 32)
		for i := range fs {
			fs[i] = other(i)
		}
		n += count(r.runAt(fs...), Punt)
	}
	if n != punt.MinBurst {
		t.Fatalf("punted %d at once, want the smallest burst %d", n, punt.MinBurst)
	}
	got := 0
	for ms := 0; ms < 1000; ms++ { // one packet a millisecond for a second
		r.now++
		got += count(r.runAt(other(ms)), Punt)
	}
	if got != 5 {
		t.Errorf("punted %d in a second at 5 a second", got)
	}
}
