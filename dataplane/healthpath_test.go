package dataplane

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/health"
)

// tunnelConfig: the "web" VIP (203.0.113.7:80, be1..be3 at 10.0.1.1..3,
// GRE) checks its backends through the tunnel on port 8080; "direct"
// (203.0.113.8:80) checks directly.
var tunnelConfig = configtest.New().
	Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
	Web(3).
	Sub("[vip.health]", `kind = "http"`, "port = 8080", `through = "tunnel"`).
	VIP("direct", "203.0.113.8", 80).
	Backend("d1", "10.0.2.1").
	Sub("[vip.health]", `kind = "http"`).
	String()

const lb4 = "192.0.2.10" // lb_ipv4 of every fixture

// healthPort is the check port of backend vip/name in the snapshot in force.
func (r *rig) healthPort(vip, name string) uint16 {
	r.t.Helper()
	s := r.shared.Services.Load()
	for _, b := range s.Backends {
		if b != nil && b.Name == name && s.VIPs[b.VIP].Name == vip {
			p, ok := s.HealthPort(s.VIPs[b.VIP].Key, name)
			if !ok {
				r.t.Fatalf("%s/%s has no health port", vip, name)
			}
			return p
		}
	}
	r.t.Fatalf("no backend %s/%s", vip, name)
	return 0
}

// fromKernel runs frames through one ProcessFromKernel call.
func (r *rig) fromKernel(frames ...[]byte) ([][]byte, []Verdict) {
	pkts := make([]Pkt, len(frames))
	for i, f := range frames {
		b := make([]byte, headroom+len(f)+64)
		copy(b[headroom:], f)
		pkts[i] = Pkt{Buf: b, Off: headroom, Len: len(f)}
	}
	r.w.ProcessFromKernel(pkts)
	out := make([][]byte, len(frames))
	v := make([]Verdict, len(frames))
	for i := range pkts {
		out[i] = pkts[i].Buf[pkts[i].Off : pkts[i].Off+pkts[i].Len]
		v[i] = r.w.Verdicts[i]
	}
	return out, v
}

// TestHealthCheckFromKernelGoesToItsBackend: each check packet the kernel
// sends (from lb_ipv4 and the backend's check port, to the VIP's check
// port) leaves encapsulated to that backend, whatever the VIP's table
// says, with the inner packet as the kernel wrote it; no conntrack entry,
// no client counter, HealthTunnelTx counts them.
func TestHealthCheckFromKernelGoesToItsBackend(t *testing.T) {
	r := newRig(t, tunnelConfig)
	if !r.w.SteersFromKernel() {
		t.Fatal("SteersFromKernel = false with a VIP checked through the tunnel")
	}
	names := []string{"be1", "be2", "be3"}
	ports := map[uint16]bool{}
	var frames [][]byte
	for _, n := range names {
		p := r.healthPort("web", n)
		if p < HealthPortBase || p >= HealthPortBase+HealthSlots || ports[p] {
			t.Fatalf("%s: check port %d outside %d+%d or taken twice", n, p, HealthPortBase, HealthSlots)
		}
		ports[p] = true
		for _, flags := range []string{"S", "A", "PA", "R"} {
			frames = append(frames, frame(t, lb4, configtest.Web, p, 8080, layers.IPProtocolTCP, flags, 40, true))
		}
	}
	out, v := r.fromKernel(frames...)
	for i, f := range frames {
		want := backendAddr(r, "web", names[i/4])
		if v[i] != Tx {
			t.Fatalf("check packet %d: verdict %v, drops %v", i, v[i], r.w.c.Drops)
		}
		dst, inner, kind := decodeTunnel(t, out[i])
		if dst != want || kind != "GRE" {
			t.Errorf("check packet %d of %s: %s to %v, want GRE to %v", i, names[i/4], kind, dst, want)
		}
		if !bytes.Equal(inner, ipPacket(f)) {
			t.Errorf("check packet %d: inner packet differs from the kernel's", i)
		}
	}
	c := &r.w.c
	if c.HealthTunnelTx != uint64(len(frames)) {
		t.Errorf("HealthTunnelTx = %d, want %d", c.HealthTunnelTx, len(frames))
	}
	if n := r.w.ct.Len(); n != 0 {
		t.Errorf("conntrack holds %d entries after checks, want 0", n)
	}
	if c.RxPackets != 0 || c.CTMisses != 0 || c.CTHits != 0 || c.Encap[0] != 0 || c.Dropped() != 0 {
		t.Errorf("checks counted as client traffic: rx %d misses %d hits %d forwards %d dropped %d", c.RxPackets, c.CTMisses, c.CTHits, c.Encap[0], c.Dropped())
	}
	for id := range c.VIPs {
		if c.VIPs[id] != (PacketBytes{}) {
			t.Errorf("VIP %d counters moved: %+v", id, c.VIPs[id])
		}
	}
	for id := range c.Backends {
		if pb := c.Backends[id]; pb.Packets != 0 || pb.NewFlows != 0 || pb.SYNs != 0 {
			t.Errorf("backend %d counters moved: %+v", id, pb)
		}
	}
}

// TestKernelPacketsPassUnchanged: what is not a check leaves as the kernel
// wrote it: BGP, a connection from the LB's address to a VIP outside the
// check ports, from another address in the check ports, UDP, a check port
// to an address that is no VIP.
func TestKernelPacketsPassUnchanged(t *testing.T) {
	r := newRig(t, tunnelConfig)
	p := r.healthPort("web", "be1")
	frames := [][]byte{
		frame(t, lb4, "192.0.2.1", 50123, 179, layers.IPProtocolTCP, "PA", 19, true),
		frame(t, lb4, configtest.Web, 40000, 8080, layers.IPProtocolTCP, "S", 0, true),
		frame(t, lb4, configtest.Web, HealthPortBase-1, 8080, layers.IPProtocolTCP, "S", 0, true),
		frame(t, "192.0.2.11", configtest.Web, p, 8080, layers.IPProtocolTCP, "S", 0, true),
		frame(t, lb4, configtest.Web, p, 8080, layers.IPProtocolUDP, "", 8, true),
		frame(t, lb4, "198.51.100.1", p, 8080, layers.IPProtocolTCP, "S", 0, true),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1}, // ARP, truncated
	}
	out, v := r.fromKernel(frames...)
	for i, f := range frames {
		if v[i] != Tx || !bytes.Equal(out[i], f) {
			t.Errorf("packet %d: verdict %v, changed %v; want it sent unchanged", i, v[i], !bytes.Equal(out[i], f))
		}
	}
	if c := &r.w.c; c.HealthTunnelTx != 0 || c.Dropped() != 0 {
		t.Errorf("HealthTunnelTx %d dropped %d, want 0 and 0", c.HealthTunnelTx, c.Dropped())
	}
}

// TestHealthCheckToUnknownSlotDropped: a check port that names no backend
// of the VIP (free, or a backend of another VIP) is dropped under its
// reason, never sent to some backend.
func TestHealthCheckToUnknownSlotDropped(t *testing.T) {
	r := newRig(t, tunnelConfig)
	frames := [][]byte{
		frame(t, lb4, configtest.Web, HealthPortBase+HealthSlots-1, 8080, layers.IPProtocolTCP, "S", 0, true),
		// be1's port, to the other VIP's address: not be1's VIP.
		frame(t, lb4, "203.0.113.8", r.healthPort("web", "be1"), 8080, layers.IPProtocolTCP, "S", 0, true),
	}
	_, v := r.fromKernel(frames...)
	for i := range frames {
		if v[i] != Drop {
			t.Errorf("packet %d: verdict %v, want Drop", i, v[i])
		}
	}
	if c := &r.w.c; c.Drops[DropHealthNoSlot] != 2 || c.HealthTunnelTx != 0 {
		t.Errorf("health-check-unknown-slot %d, HealthTunnelTx %d; want 2, 0", c.Drops[DropHealthNoSlot], c.HealthTunnelTx)
	}
}

// TestSpoofedCheckOnWireNotSteered: only the kernel's packets are trusted.
// A packet on the wire from lb_ipv4 and a check port is client traffic:
// to the check port it has no service; to the VIP's port it goes where
// the Maglev table sends its 5-tuple, not to the backend its port names.
func TestSpoofedCheckOnWireNotSteered(t *testing.T) {
	r := newRig(t, tunnelConfig)
	web := map[string]int{"be1": 1, "be2": 1, "be3": 1}
	// A backend and a port of its that the table does not choose for the
	// packet's own 5-tuple: steering would be visible.
	var victim string
	var port uint16
	for _, n := range []string{"be1", "be2", "be3"} {
		p := r.healthPort("web", n)
		if r.expectBackend("web", web, lb4, configtest.Web, p, 80, 6) != n {
			victim, port = n, p
			break
		}
	}
	if victim == "" {
		t.Fatal("every backend's check port hashes to itself: pick another fixture")
	}
	_, v := r.run(
		frame(t, lb4, configtest.Web, port, 8080, layers.IPProtocolTCP, "S", 0, true),
		frame(t, lb4, configtest.Web, port, 80, layers.IPProtocolTCP, "S", 0, true),
	)
	if v[0] != Drop || r.w.c.Drops[DropNoService] != 1 {
		t.Errorf("spoofed check to the check port: verdict %v, no-service %d; want Drop, 1", v[0], r.w.c.Drops[DropNoService])
	}
	// To the VIP's port it is a new flow from the LB's own address: a
	// martian source, dropped, not steered to %s (nor forwarded at all).
	if v[1] != Drop || r.w.c.Drops[DropMartianSource] != 1 {
		t.Errorf("spoofed check to the VIP port: verdict %v, martian-source %d; want Drop, 1 (not steered to %s)", v[1], r.w.c.Drops[DropMartianSource], victim)
	}
	if r.w.c.HealthTunnelTx != 0 {
		t.Errorf("HealthTunnelTx = %d after wire packets, want 0", r.w.c.HealthTunnelTx)
	}
}

// TestHealthSlotsAcrossReloads: a backend keeps its check port across
// snapshots; a removed backend's port is not handed to a new backend in
// the next snapshot; a VIP checked directly has none, and a
// configuration without checks through the tunnel steers nothing.
func TestHealthSlotsAcrossReloads(t *testing.T) {
	r := newRig(t, tunnelConfig)
	p1, p2, p3 := r.healthPort("web", "be1"), r.healthPort("web", "be2"), r.healthPort("web", "be3")
	s := r.shared.Services.Load()
	for _, b := range s.Backends {
		if b != nil && s.VIPs[b.VIP].Name == "direct" {
			if _, ok := s.HealthPort(s.VIPs[b.VIP].Key, b.Name); ok {
				t.Errorf("directly checked backend %s has a check port", b.Name)
			}
		}
	}
	// Reload: be2 removed, be4 added.
	r.cfg.VIPs[0].Backends = append(r.cfg.VIPs[0].Backends[:1], r.cfg.VIPs[0].Backends[2:]...)
	b4 := r.cfg.VIPs[0].Backends[0]
	b4.Name, b4.Address.Addr = "be4", backendAddr(r, "web", "be1").Next().Next().Next()
	r.cfg.VIPs[0].Backends = append(r.cfg.VIPs[0].Backends, b4)
	r.publish(nil)
	if r.healthPort("web", "be1") != p1 || r.healthPort("web", "be3") != p3 {
		t.Errorf("ports moved across a reload: be1 %d->%d, be3 %d->%d", p1, r.healthPort("web", "be1"), p3, r.healthPort("web", "be3"))
	}
	if p4 := r.healthPort("web", "be4"); p4 == p1 || p4 == p2 || p4 == p3 {
		t.Errorf("be4 got port %d, one of the last snapshot's (%d %d %d)", p4, p1, p2, p3)
	}
	_, v := r.fromKernel(frame(t, lb4, configtest.Web, p2, 8080, layers.IPProtocolTCP, "S", 0, true))
	if v[0] != Drop || r.w.c.Drops[DropHealthNoSlot] != 1 {
		t.Errorf("check of removed be2: verdict %v, unknown-slot %d; want Drop, 1", v[0], r.w.c.Drops[DropHealthNoSlot])
	}

	d := newRig(t, testConfig)
	if d.w.SteersFromKernel() {
		t.Error("SteersFromKernel = true without checks through the tunnel")
	}
	f := frame(t, lb4, configtest.Web, HealthPortBase, 8080, layers.IPProtocolTCP, "S", 0, true)
	if out, v := d.fromKernel(f); v[0] != Tx || !bytes.Equal(out[0], f) {
		t.Errorf("without checks through the tunnel: verdict %v, changed %v", v[0], !bytes.Equal(out[0], f))
	}
}

func TestProcessFromKernelAllocatesNothing(t *testing.T) {
	r := newRig(t, tunnelConfig)
	var frames [][]byte
	for i := 0; i < 32; i++ {
		sport := r.healthPort("web", []string{"be1", "be2", "be3"}[i%3])
		if i%4 == 3 {
			sport = 179 // not a check
		}
		frames = append(frames, frame(t, lb4, configtest.Web, sport, 8080, layers.IPProtocolTCP, "S", 0, true))
	}
	allocs := allocsPerBurst(frames, func(pkts []Pkt) {
		r.w.ProcessFromKernel(pkts)
	})
	if allocs != 0 {
		t.Fatalf("ProcessFromKernel allocates %v times per burst", allocs)
	}
	if r.w.c.HealthTunnelTx == 0 {
		t.Fatal("no check was steered")
	}
}

// BenchmarkProcessFromKernel is the exception tap's cost per packet while
// a VIP has checks through the tunnel: a burst of 32, three in four a
// check (parsed, recognised, encapsulated), one in four passed through.
func BenchmarkProcessFromKernel(b *testing.B) {
	t := &testing.T{}
	r := newRig(t, tunnelConfig)
	var frames [][]byte
	for i := 0; i < 32; i++ {
		sport := r.healthPort("web", []string{"be1", "be2", "be3"}[i%3])
		if i%4 == 3 {
			sport = 179
		}
		frames = append(frames, frame(t, lb4, configtest.Web, sport, 8080, layers.IPProtocolTCP, "PA", 80, true))
	}
	pkts := make([]Pkt, len(frames))
	bufs := make([][]byte, len(frames))
	for i, f := range frames {
		bufs[i] = make([]byte, headroom+len(f))
	}
	b.ResetTimer()
	for range b.N {
		for i, f := range frames {
			copy(bufs[i][headroom:], f)
			pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(f)}
		}
		r.w.ProcessFromKernel(pkts)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(frames)), "ns/pkt")
}

// TestHealthCheckFromKernelIPv6: the same for an IPv6 VIP, from lb_ipv6,
// to an IPv6 backend and (a mixed family, as client traffic allows) an
// IPv4 one.
func TestHealthCheckFromKernelIPv6(t *testing.T) {
	cfg := configtest.New().
		Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		VIP("web6", "2001:db8:ffff::7", 443, `encap = "ipip"`).
		Backend("six1", "2001:db8:1::1").
		Backend("six2", "10.0.1.9").
		Sub("[vip.health]", `kind = "tcp"`, `through = "tunnel"`).
		String()
	r := newRig(t, cfg)
	const lb6 = "2001:db8:100::10"
	for _, name := range []string{"six1", "six2"} {
		p := r.healthPort("web6", name)
		f := frame(t, lb6, "2001:db8:ffff::7", p, 443, layers.IPProtocolTCP, "S", 0, false)
		out, v := r.fromKernel(f)
		if v[0] != Tx {
			t.Fatalf("%s: verdict %v, drops %v", name, v[0], r.w.c.Drops)
		}
		dst, inner, _ := decodeTunnel(t, out[0])
		if dst != backendAddr(r, "web6", name) || !bytes.Equal(inner, ipPacket(f)) {
			t.Errorf("%s: to %v (inner unchanged %v), want %v", name, dst, bytes.Equal(inner, ipPacket(f)), backendAddr(r, "web6", name))
		}
		// The same packet from another address of the LB's subnet is not a check.
		other := frame(t, "2001:db8:100::11", "2001:db8:ffff::7", p, 443, layers.IPProtocolTCP, "S", 0, false)
		if out, v := r.fromKernel(other); v[0] != Tx || !bytes.Equal(out[0], other) {
			t.Errorf("%s: a packet from another address was changed", name)
		}
	}
	if r.w.c.HealthTunnelTx != 2 || r.w.ct.Len() != 0 {
		t.Errorf("HealthTunnelTx %d, conntrack %d; want 2, 0", r.w.c.HealthTunnelTx, r.w.ct.Len())
	}
}

// manyTunnelChecked is a configuration whose VIP "web" (port port) has n
// backends b0..b<n-1> (10.1.x.y, name+i) checked through the tunnel.
func manyTunnelChecked(n, port int, name func(i int) string) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		VIP("web", configtest.Web, port)
	for i := 0; i < n; i++ {
		b.Backend(name(i), fmt.Sprintf("10.1.%d.%d", i/250, 1+i%250))
	}
	return b.Sub("[vip.health]", `kind = "tcp"`, "port = 8080", `through = "tunnel"`).String()
}

// checkSlots fails unless every backend of s checked through the tunnel
// has its own port in the range, and returns them by backend name.
func checkSlots(t *testing.T, s *Services, want int) map[string]uint16 {
	t.Helper()
	ports := map[string]uint16{}
	seen := map[uint16]string{}
	for _, b := range s.Backends {
		if b == nil {
			continue
		}
		p, ok := s.HealthPort(s.VIPs[b.VIP].Key, b.Name)
		if !ok || p < HealthPortBase || int(p) >= HealthPortBase+HealthSlots {
			t.Fatalf("%s: check port %d %v, want one in %d+%d", b.Name, p, ok, HealthPortBase, HealthSlots)
		}
		if o, dup := seen[p]; dup {
			t.Fatalf("%s and %s share check port %d", o, b.Name, p)
		}
		seen[p] = b.Name
		ports[b.Name] = p
		if got := s.healthBackend(p); got != b {
			t.Fatalf("port %d steers to %v, want %s", p, got, b.Name)
		}
	}
	if len(ports) != want {
		t.Fatalf("%d backends with a check port, want %d", len(ports), want)
	}
	return ports
}

// TestHealthSlotsAtTheLimit: the steering table holds HealthSlots
// backends, and a reload that stays within it must be accepted, even when
// the slots the last snapshot used are needed again: an operator replacing
// one backend of a full table, or moving a VIP of more than half as many
// backends to another port (every backend is then new to the table), was
// refused with "more than 4096 backends checked through the tunnel" while
// holding no more than 4096. A slot is still not handed to a new backend
// while another one is free. More than HealthSlots is refused.
func TestHealthSlotsAtTheLimit(t *testing.T) {
	be := func(i int) string { return fmt.Sprintf("b%d", i) }
	r := newRig(t, manyTunnelChecked(HealthSlots, 80, be))
	before := checkSlots(t, r.shared.Services.Load(), HealthSlots)

	// Replace b7 by "fresh" (another name, another address).
	next, err := config.Parse([]byte(manyTunnelChecked(HealthSlots, 80, func(i int) string {
		if i == 7 {
			return "fresh"
		}
		return be(i)
	})), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	next.VIPs[0].Backends[7].Address.Addr = netip.MustParseAddr("10.2.0.1")
	s, err := servicesOf(next, r.enc, r.shared.Services.Load(), nil, NextHop{MAC4: gwMAC, Has4: true})
	if err != nil {
		t.Fatalf("replacing one backend of %d: %v", HealthSlots, err)
	}
	after := checkSlots(t, s, HealthSlots)
	for name, p := range after {
		if name != "fresh" && before[name] != p {
			t.Fatalf("%s moved from port %d to %d", name, before[name], p)
		}
	}
	if after["fresh"] != before["b7"] {
		t.Errorf("fresh got port %d; the only free one is b7's %d", after["fresh"], before["b7"])
	}

	// 2100 backends, then the VIP on port 81: 2100 new idents with 2100
	// slots of the last snapshot in use and 1996 never used.
	r2 := newRig(t, manyTunnelChecked(2100, 80, be))
	checkSlots(t, r2.shared.Services.Load(), 2100)
	moved, err := config.Parse([]byte(manyTunnelChecked(2100, 81, be)), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := servicesOf(moved, r2.enc, r2.shared.Services.Load(), nil, NextHop{MAC4: gwMAC, Has4: true})
	if err != nil {
		t.Fatalf("moving a VIP of 2100 backends checked through the tunnel to another port: %v", err)
	}
	ports := checkSlots(t, s2, 2100)
	fresh := 0
	for _, p := range ports {
		if int(p-HealthPortBase) >= 2100 {
			fresh++
		}
	}
	if fresh != HealthSlots-2100 {
		t.Errorf("%d backends got a slot the last snapshot did not use, want %d (all of those)", fresh, HealthSlots-2100)
	}

	// One more than the table holds is refused (config refuses it first,
	// TestHealthThroughLimit; here it is added past the check).
	over, err := config.Parse([]byte(manyTunnelChecked(HealthSlots, 80, be)), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	extra := over.VIPs[0].Backends[0]
	extra.Name = "one-too-many"
	extra.Address.Addr = netip.MustParseAddr("10.2.0.2")
	over.VIPs[0].Backends = append(over.VIPs[0].Backends, extra)
	if _, err := servicesOf(over, r.enc, nil, nil, NextHop{MAC4: gwMAC, Has4: true}); err == nil {
		t.Errorf("%d backends checked through the tunnel accepted", HealthSlots+1)
	}
}

// TestHealthPortsAgreeWithHealth: package health (which config checks the
// limit with) and the dataplane name the same check ports.
func TestHealthPortsAgreeWithHealth(t *testing.T) {
	if HealthPortBase != health.TunnelPortBase || HealthSlots != health.TunnelSlots {
		t.Errorf("dataplane ports %d+%d, health's %d+%d", HealthPortBase, HealthSlots, health.TunnelPortBase, health.TunnelSlots)
	}
}
