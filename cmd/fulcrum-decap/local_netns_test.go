//go:build linux

package main

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/fulcrumlb/fulcrum/decap"
)

// oneNetns creates a namespace with a veth pair in it (lo up, 10.97.0.1/24
// on v0, 10.97.0.2/24 on v1) and removes it at the end of the test.
func oneNetns(t *testing.T, name string) string {
	t.Helper()
	needNetns(t)
	ns := name + "-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ipCmd(t, "netns", "add", ns)
	for _, c := range [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"-n", ns, "addr", "add", "10.97.0.1/24", "dev", "v0"},
		{"-n", ns, "addr", "add", "10.97.0.2/24", "dev", "v1"},
		{"-n", ns, "link", "set", "v0", "up"},
		{"-n", ns, "link", "set", "v1", "up"},
	} {
		ipCmd(t, c...)
	}
	return ns
}

// TestReadLocalInNetns: the agent's idea of this host's addresses: the
// interface addresses, -addr, the local table's routes (AnyIP), but not a
// route of type local in another table (TPROXY), and the local subnets'
// network and broadcast addresses.
func TestReadLocalInNetns(t *testing.T) {
	ns := oneNetns(t, "fdlocal")
	ipCmd(t, "-n", ns, "addr", "add", vipAddr4.String()+"/32", "dev", "lo")
	ipCmd(t, "-n", ns, "route", "add", "local", "198.51.100.0/24", "dev", "lo")
	ipCmd(t, "-n", ns, "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", "100")
	var l *localSet
	if err := inNetns(ns, func() (err error) {
		l, err = readLocal([]netip.Addr{netip.MustParseAddr("192.0.2.50")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a           string
		local, edge bool
	}{
		{"10.97.0.1", true, false},
		{"10.97.0.2", true, false},
		{vipAddr4.String(), true, false},
		{"127.0.0.1", true, false},
		{"127.8.0.1", true, false},
		{"::1", true, false},
		{"198.51.100.77", true, false}, // ip route add local 198.51.100.0/24 dev lo
		{"192.0.2.50", true, false},    // -addr
		{"10.97.0.3", false, false},
		{"192.0.2.1", false, false}, // only table 100's local default names it
		{"10.97.0.255", false, true},
		{"10.97.0.0", false, true},
	} {
		a := netip.MustParseAddr(c.a)
		if l.has(a) != c.local || l.edges[a] != c.edge {
			t.Errorf("%s: local %v edge %v, want %v %v", a, l.has(a), l.edges[a], c.local, c.edge)
		}
	}
}

// TestForwardNoBroadcastInNetns: the sockets the agent forwards from have
// SO_BROADCAST off, so a forward to a broadcast address fails even if the
// checks before it missed it (Go turns SO_BROADCAST on for every raw and
// UDP socket).
func TestForwardNoBroadcastInNetns(t *testing.T) {
	ns := oneNetns(t, "fdbcast")
	d, err := decap.New(decap.Config{Kinds: []decap.Kind{decap.GRE, decap.GUE}})
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{senders: map[string]any{}, guePort: d.GUEPort()}
	if err := inNetns(ns, func() error {
		return a.openFamily("4", netip.IPv4Unspecified(), options{kinds: []decap.Kind{decap.GRE, decap.GUE}}, d)
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range a.sources {
			s.close()
		}
	}()
	for _, s := range a.sources {
		a.senders[s.name] = s.conn
	}
	inner := tcpPacket(t, false, 40100, &layers.TCP{Seq: 1, Ack: 1, ACK: true}, []byte("x"))
	for _, kind := range []decap.Kind{decap.GRE, decap.GUE} {
		var st scState
		if err := a.forward(&st, kind, inner, netip.MustParseAddr("10.97.0.9")); err != nil {
			t.Errorf("%s: forward to a unicast address: %v", kind, err)
		}
		for _, to := range []string{"10.97.0.255"} {
			if err := a.forward(&st, kind, inner, netip.MustParseAddr(to)); !errors.Is(err, unix.EACCES) {
				t.Errorf("%s: forward to the broadcast address %s: %v, want EACCES (SO_BROADCAST off)", kind, to, err)
			}
		}
	}
}

// TestRefusalsInNetns: attacks on A's agent in the second-chance topology
// (chance_netns_test.go), run with -lbs naming the LB side's addresses,
// from the LB side's link: a second chance naming the broadcast address of
// -peers is not sent; a tunnel from a source that is no LB is dropped
// before decapsulation; an inner packet to an address that is not A's is
// not routed on, even with ip_forward=1; a tunnel in a tunnel is dropped
// once; a VIP added after the agent started is served.
func TestRefusalsInNetns(t *testing.T) {
	needNetns(t)
	bin := buildAgent(t)
	lbns, ans, bns := setupChanceNetns(t)
	agentA := startChanceAgent(t, ans, bin, "-lbs", scLBAddrA.String()+","+scLBAddrB.String())
	la := openPacketSocket(t, lbns, "la")
	ba := openPacketSocket(t, bns, "ba")
	abAddr := netip.MustParseAddr("10.96.3.1")
	ack := func(port uint16) []byte {
		return tcpPacket(t, false, port, &layers.TCP{Seq: 5000, Ack: 7000, ACK: true, PSH: true}, []byte("attacker payload"))
	}
	ipCmd(t, "netns", "exec", ans, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")

	// A forged field naming the broadcast address of -peers.
	la.send(t, greFrame(t, scLBAddrA, netip.MustParseAddr("10.96.3.255"), ack(43001)))
	if n := greSeen(ba, abAddr, netip.MustParseAddr("10.96.3.255"), time.Second); n != 0 {
		t.Errorf("A sent %d GRE packets to the broadcast address 10.96.3.255", n)
	}
	// A tunnel from a source that is no LB, naming B.
	la.send(t, greFrame(t, netip.MustParseAddr("192.0.2.66"), scPeerB, ack(43002)))
	if n := greSeen(ba, abAddr, scPeerB, time.Second); n != 0 {
		t.Errorf("a tunnel from 192.0.2.66 (not an LB) made A relay %d GRE packets to B", n)
	}
	// An inner packet to B's address (not A's), from an LB.
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{198, 51, 100, 99}, DstIP: scPeerB.AsSlice()}
	udp := &layers.UDP{SrcPort: 1234, DstPort: 53}
	udp.SetNetworkLayerForChecksum(ip)
	la.send(t, greFrame(t, scLBAddrA, netip.Addr{}, serialize(t, ip, udp, gopacket.Payload("relayed"))))
	if n := udpFromSeen(ba, netip.MustParseAddr("198.51.100.99"), time.Second); n != 0 {
		t.Errorf("an inner packet 198.51.100.99 -> 10.96.3.2 (not A's) was routed on by A %d times", n)
	}
	// Ten tunnels in one another, every layer addressed to A.
	pkt := ack(43003)
	for i := 1; i < 10; i++ {
		pkt = serialize(t, &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolGRE, SrcIP: scLBAddrA.AsSlice(), DstIP: scAddrA.AsSlice()},
			&layers.GRE{Protocol: layers.EthernetTypeIPv4}, gopacket.Payload(pkt))
	}
	la.send(t, greFrame(t, scLBAddrA, netip.Addr{}, pkt))

	line := counters(t, agentA, func(l string) bool {
		return counter(l, "drop.outer-not-lb") >= 1 && counter(l, "drop.inner-not-local") >= 1 && counter(l, "drop.inner-tunnel") >= 1
	})
	for name, want := range map[string]int{"in.gre4": 4, "drop.outer-not-lb": 1, "drop.inner-not-local": 1, "drop.inner-tunnel": 1,
		"second_chance.in": 1, "second_chance.not-allowed": 1, "second_chance.forwarded": 0, "out.gre": 1} {
		if got := counter(line, name); got != want {
			t.Errorf("A: %s = %d, want %d\n%s", name, got, want, line)
		}
	}

	// A VIP added after the agent started: its SYN is delivered (A's stack
	// answers it, with a reset: nothing listens there).
	newVIP := netip.MustParseAddr("203.0.113.99")
	ipCmd(t, "-n", ans, "addr", "add", newVIP.String()+"/32", "dev", "lo")
	syn := func() []byte {
		ip := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: client4.AsSlice(), DstIP: newVIP.AsSlice()}
		tcp := &layers.TCP{SrcPort: 43004, DstPort: 80, Seq: 1000, SYN: true, Window: 64240}
		tcp.SetNetworkLayerForChecksum(ip)
		return serialize(t, ip, tcp)
	}()
	var rst *layers.TCP
	for try := 0; try < 3 && rst == nil; try++ {
		la.send(t, greFrame(t, scLBAddrA, netip.Addr{}, syn))
		rst = la.expect(t, time.Second, func(_, _ netip.Addr, tcp *layers.TCP) bool { return tcp.DstPort == 43004 && tcp.RST }, newVIP, client4)
	}
	if rst == nil {
		t.Errorf("a SYN to %s, added after the agent started, was not delivered\n%s", newVIP, counters(t, agentA, func(string) bool { return true }))
	}
}

// greFrame is a frame from the LB side to A carrying inner in GRE, from
// the outer source src, with a second chance if chance is valid.
func greFrame(t *testing.T, src, chance netip.Addr, inner []byte) []byte {
	g := &layers.GRE{Protocol: layers.EthernetTypeIPv4}
	if chance.IsValid() {
		b := chance.As4()
		g.KeyPresent, g.Key = true, uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])
	}
	return serialize(t, &layers.Ethernet{SrcMAC: scLA, DstMAC: scAL, EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolGRE, SrcIP: src.AsSlice(), DstIP: scAddrA.AsSlice()},
		g, gopacket.Payload(inner))
}

// greSeen counts the GRE packets from src to dst captured on s within d.
func greSeen(s *packetSocket, src, dst netip.Addr, d time.Duration) int {
	return seen(s, d, func(ip *layers.IPv4) bool {
		return ip.Protocol == layers.IPProtocolGRE && ip.SrcIP.Equal(src.AsSlice()) && ip.DstIP.Equal(dst.AsSlice())
	})
}

// udpFromSeen counts the UDP packets from src captured on s within d.
func udpFromSeen(s *packetSocket, src netip.Addr, d time.Duration) int {
	return seen(s, d, func(ip *layers.IPv4) bool {
		return ip.Protocol == layers.IPProtocolUDP && ip.SrcIP.Equal(src.AsSlice())
	})
}

func seen(s *packetSocket, d time.Duration, match func(*layers.IPv4) bool) int {
	buf := make([]byte, 65536)
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		m, _, err := unix.Recvfrom(s.fd, buf, 0)
		if err != nil {
			continue
		}
		p := gopacket.NewPacket(buf[:m], layers.LayerTypeEthernet, gopacket.NoCopy)
		if ip, ok := p.NetworkLayer().(*layers.IPv4); ok && match(ip) {
			n++
		}
	}
	return n
}
