package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/gen"
)

// withHash is cfg (testConfig or fastTestConfig) with hash settings for
// its VIPs web, web6 and dns ("" leaves a VIP at the 5-tuple).
func withHash(cfg, web, web6, dns string) string {
	add := func(anchor, lines string) {
		if lines != "" {
			cfg = strings.Replace(cfg, anchor, anchor+lines+"\n", 1)
		}
	}
	add("name = \"web\"\naddress = \"203.0.113.7\"\nport = 80\n", web)
	add("port = 443\n", web6)
	add("protocol = \"udp\"\n", dns)
	return cfg
}

// backendsOf runs one SYN per (client, port) through a fresh worker and
// returns the backend (outer destination) each went to.
func backendsOf(t *testing.T, cfg string, clients []string, vip string, dport uint16, ports int) []netip.Addr {
	t.Helper()
	r := newRig(t, cfg)
	var out []netip.Addr
	for _, c := range clients {
		for p := 0; p < ports; p++ {
			o, v := r.run(frame(t, c, vip, uint16(20000+p*7), dport, layers.IPProtocolTCP, "S", 0, true))
			if v[0] != Tx {
				t.Fatalf("%s:%d -> %s: verdict %v", c, 20000+p*7, vip, v[0])
			}
			d, _, _ := decodeTunnel(t, o[0])
			out = append(out, d)
		}
	}
	return out
}

func distinct(as []netip.Addr) int {
	m := map[netip.Addr]bool{}
	for _, a := range as {
		m[a] = true
	}
	return len(m)
}

// Each mode keeps together what it promises to, and only that: one
// client's connections (different source ports) share a backend under the
// 3-tuple and the source address; the clients of one /24 (or IPv6 /48)
// share one under src-ip-prefix; under the 5-tuple they spread. Every
// count is over a fixed key and fixed tuples, so the test is deterministic.
func TestHashFieldsPlaceConnections(t *testing.T) {
	one := []string{"198.51.100.10"}
	slash24 := make([]string, 16)
	spread := make([]string, 16)
	for i := range slash24 {
		slash24[i] = fmt.Sprintf("198.51.100.%d", 10+i*13)
		spread[i] = fmt.Sprintf("198.51.%d.10", 100+i)
	}
	six48 := make([]string, 16)
	for i := range six48 {
		six48[i] = fmt.Sprintf("2001:db8:aaaa:%x::%x", i*4099, i+1)
	}
	for _, tc := range []struct {
		name     string
		web      string
		clients  []string
		vip      string
		dport    uint16
		web6     string
		together bool
	}{
		{"5-tuple spreads one client", "", one, "203.0.113.7", 80, "", false},
		{"3-tuple keeps one client", `hash = "3-tuple"`, one, "203.0.113.7", 80, "", true},
		{"src-ip keeps one client", `hash = "src-ip"`, one, "203.0.113.7", 80, "", true},
		{"src-ip spreads a /24", `hash = "src-ip"`, slash24, "203.0.113.7", 80, "", false},
		{"src-ip-prefix keeps a /24", `hash = "src-ip-prefix"`, slash24, "203.0.113.7", 80, "", true},
		{"src-ip-prefix /16 keeps a /16", "hash = \"src-ip-prefix\"\nhash_prefix = 16", spread, "203.0.113.7", 80, "", true},
		{"src-ip-prefix spreads /24s", `hash = "src-ip-prefix"`, spread, "203.0.113.7", 80, "", false},
		{"5-tuple spreads an IPv6 /48", "", six48, "2001:db8:ffff::7", 443, "", false},
		{"src-ip-prefix keeps an IPv6 /48", "", six48, "2001:db8:ffff::7", 443, `hash = "src-ip-prefix"`, true},
		{"src-ip-prefix /64 spreads a /48", "", six48, "2001:db8:ffff::7", 443, "hash = \"src-ip-prefix\"\nhash_prefix6 = 64", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ports := 4
			if len(tc.clients) == 1 {
				ports = 64
			}
			got := backendsOf(t, withHash(testConfig, tc.web, tc.web6, ""), tc.clients, tc.vip, tc.dport, ports)
			if n := distinct(got); (n == 1) != tc.together {
				t.Errorf("%d connections took %d backends, want together=%v", len(got), n, tc.together)
			}
		})
	}
}

// Fragments and ICMP errors carry no ports or quote the flow: under the
// 3-tuple both are hashed like the flow they belong to, so an instance
// that has never seen the flow (no conntrack entry: the packet is routed
// by the table alone) still sends them to the flow's backend. Under the
// 5-tuple a fragment (hashed without its ports) need not follow its flow.
func TestHashFieldsFragmentsAndICMPFollowTheFlow(t *testing.T) {
	frag := func(src string, more bool, off uint16) []byte {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolTCP, SrcIP: net.ParseIP(src).To4(), DstIP: net.IP{203, 0, 113, 7}, FragOffset: off, Id: 77}
		if more {
			ip.Flags = layers.IPv4MoreFragments
		}
		buf := gopacket.NewSerializeBuffer()
		_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4}, ip, gopacket.Payload(make([]byte, 64)))
		return append([]byte(nil), buf.Bytes()...)
	}
	icmpErr := func(client string, sport uint16) []byte {
		reply := frame(t, "203.0.113.7", client, 80, sport, layers.IPProtocolTCP, "SA", 0, true)[14:]
		buf := gopacket.NewSerializeBuffer()
		_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4},
			&layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{192, 0, 2, 99}, DstIP: net.IP{203, 0, 113, 7}},
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4), Seq: 1400}, gopacket.Payload(reply[:28]))
		return append([]byte(nil), buf.Bytes()...)
	}
	for _, tc := range []struct {
		web     string
		follows bool
	}{{"", false}, {`hash = "3-tuple"`, true}, {`hash = "src-ip"`, true}} {
		cfg := withHash(testConfig, tc.web, "", "")
		a, b := newRig(t, cfg), newRig(t, cfg) // b never sees the flows
		misses := 0
		for i := 0; i < 32; i++ {
			client := fmt.Sprintf("198.51.100.%d", 10+i)
			sport := uint16(40000 + i)
			o, v := a.run(frame(t, client, "203.0.113.7", sport, 80, layers.IPProtocolTCP, "S", 0, true))
			if v[0] != Tx {
				t.Fatalf("SYN verdict %v", v[0])
			}
			owner, _, _ := decodeTunnel(t, o[0])
			o, v = b.run(frag(client, false, 8), icmpErr(client, sport))
			if v[0] != Tx || v[1] != Tx {
				t.Fatalf("fragment, ICMP error verdicts %v (drops %v)", v, b.w.c.Drops)
			}
			fd, _, _ := decodeTunnel(t, o[0])
			id, _, _ := decodeTunnel(t, o[1])
			if id != owner {
				t.Errorf("%q: ICMP error for %s:%d went to %v, its flow to %v", tc.web, client, sport, id, owner)
			}
			if fd != owner {
				misses++
			}
		}
		if tc.follows && misses != 0 || !tc.follows && misses == 0 {
			t.Errorf("%q: %d of 32 fragments left their flow's backend, want follows=%v", tc.web, misses, tc.follows)
		}
		if b.w.ct.Len() != 0 {
			t.Errorf("fragments and ICMP errors made %d conntrack entries", b.w.ct.Len())
		}
	}
}

// Conntrack stays per connection under every mode: two connections of one
// client to a 3-tuple VIP are two entries, each with the VIP's hash stored
// for the fused path.
func TestHashFieldsConntrackPerConnection(t *testing.T) {
	r := newRig(t, withHash(testConfig, `hash = "3-tuple"`, "", ""))
	for _, p := range []uint16{1000, 2000, 3000} {
		r.run(frame(t, "198.51.100.10", "203.0.113.7", p, 80, layers.IPProtocolTCP, "S", 0, true))
	}
	if n := r.w.ct.Len(); n != 3 {
		t.Fatalf("%d conntrack entries for 3 connections, want 3", n)
	}
	var hashes []uint64
	r.w.ct.ForEach(func(e *conntrack.Entry) { hashes = append(hashes, e.FlowHash()) })
	if hashes[0] == 0 || hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Errorf("stored flow hashes %x: want one nonzero 3-tuple hash", hashes)
	}
}

// The fused path gives the general path's results under every mode, and
// across reloads that change the VIPs' modes (entries then hold a hash of
// the old mode: their packets keep it for the tunnel's entropy on both
// paths, a SYN re-chooses under the new one on both).
func TestFastPathMatchesGeneralUnderHashFields(t *testing.T) {
	vips, err := gen.ParseVIPs("203.0.113.7:80,[2001:db8:ffff::7]:443")
	if err != nil {
		t.Fatal(err)
	}
	udpVIPs, _ := gen.ParseVIPs("203.0.113.7:53")
	configs := []string{
		withHash(fastTestConfig, `hash = "3-tuple"`, `hash = "src-ip-prefix"`, `hash = "src-ip"`),
		withHash(fastTestConfig, "", `hash = "3-tuple"`, "hash = \"src-ip-prefix\"\nhash_prefix = 30"),
		withHash(fastTestConfig, `hash = "src-ip"`, "", ""),
	}
	tw := newTwin(t, configs[0])
	var gs []*gen.Generator
	for _, c := range []gen.Config{
		{VIPs: vips, Mode: gen.ModeMix, SYNShare: 0.2, IPv6: 0.4, Flows: 200, Seed: 11},
		{VIPs: vips, Mode: gen.ModeEstablished, IPv6: 0.5, Flows: 200, Seed: 12},
		{VIPs: udpVIPs, Mode: gen.ModeUDP, Flows: 60, Seed: 13},
	} {
		g, err := gen.New(c)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for step := 0; step < 300; step++ {
		if step%100 == 50 { // a reload changes the modes
			for _, r := range []*rig{tw.fast, tw.slow} {
				cfg, err := config.Parse([]byte(configs[(step/100+1)%len(configs)]), "reload.toml")
				if err != nil {
					t.Fatal(err)
				}
				r.cfg = cfg
				r.publish(nil)
			}
		}
		frames := make([][]byte, 1+rng.IntN(MaxBurst))
		for i := range frames {
			frames[i], _ = gs[rng.IntN(len(gs))].Next(nil)
		}
		tw.fast.now += conntrack.Time(rng.IntN(20))
		tw.slow.now = tw.fast.now
		name := fmt.Sprintf("burst %d", step)
		tw.burst(name, frames)
		tw.same(name)
	}
	if c := &tw.fast.w.c; c.CTHits == 0 || c.Encap[0] == 0 {
		t.Fatalf("the traffic missed a path: %s", summary(c))
	}
}

// BenchmarkProcessNewFlowsHashFields is BenchmarkProcessNewFlows (bursts
// of SYNs of new flows: each a hash, a miss, a Maglev choice and an
// insert) for a VIP under each hash setting, to compare their cost per
// packet in one run. The 5-tuple is the default path.
func BenchmarkProcessNewFlowsHashFields(b *testing.B) {
	for _, h := range []string{"", `hash = "3-tuple"`, `hash = "src-ip"`, `hash = "src-ip-prefix"`} {
		name := "5-tuple"
		if h != "" {
			name = strings.Trim(strings.TrimPrefix(h, "hash = "), `"`)
		}
		b.Run("hash="+name, func(b *testing.B) {
			t := &testing.T{}
			r := newRig(t, cfgWithCapacity(withHash(testConfig, h, "", ""), 1<<20))
			const burst = 32
			base := frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true)
			bufs := make([][]byte, burst)
			for i := range bufs {
				bufs[i] = make([]byte, headroom+len(base))
			}
			pkts := make([]Pkt, burst)
			next := uint32(0)
			b.ReportAllocs()
			cpu := startCPU(b)
			n := 0
			for ; n < b.N; n += burst {
				for i := range pkts {
					next++
					f := bufs[i][headroom:]
					copy(f, base)
					f[26], f[27], f[28], f[29] = 10, byte(next>>16), byte(next>>8), byte(next)
					f[34], f[35] = byte(next>>24), 1 // source port
					pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(base)}
				}
				r.now++
				r.w.Process(pkts, r.now)
			}
			cpu.stop(b, n)
			if r.w.c.Encap[0] == 0 {
				b.Fatal("nothing forwarded")
			}
		})
	}
}

// Every mode forwards without allocating, on the general path (new flows,
// fragments, ICMP errors) and the fused one.
func TestHashFieldsAllocateNothing(t *testing.T) {
	r := newRig(t, withHash(testConfig, `hash = "src-ip-prefix"`, `hash = "3-tuple"`, ""))
	var frames [][]byte
	for i := 0; i < 16; i++ {
		frames = append(frames,
			frame(t, fmt.Sprintf("198.51.100.%d", i), "203.0.113.7", uint16(1000+i), 80, layers.IPProtocolTCP, "S", 0, true),
			frame(t, fmt.Sprintf("2001:db8:aaaa::%x", i+1), "2001:db8:ffff::7", uint16(1000+i), 443, layers.IPProtocolTCP, "A", 0, true))
	}
	pkts := make([]Pkt, len(frames))
	bufs := make([][]byte, len(frames))
	for i, f := range frames {
		bufs[i] = make([]byte, headroom+len(f)+64)
	}
	run := func() {
		for i, f := range frames {
			copy(bufs[i][headroom:], f)
			pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(f)}
		}
		r.now++
		r.w.Process(pkts, r.now)
	}
	run() // schedulers and counters for the snapshot: once
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Fatalf("Process allocates %v times per burst", n)
	}
	if r.w.c.Encap[0] == 0 {
		t.Fatal("nothing forwarded")
	}
}
