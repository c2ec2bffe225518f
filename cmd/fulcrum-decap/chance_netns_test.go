//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"
)

// The second-chance topology, in three namespaces the test creates:
//
//	sclb  la 10.96.1.1 ── al 10.96.1.2  scA  ab 10.96.3.1 ── ba 10.96.3.2  scB
//	      lb 10.96.2.1 ─────────────────────────────────── bl 10.96.2.2  scB
//
// The test plays the LB in sclb (sending tunnelled frames on la and lb and
// capturing the backends' direct answers there). A and B each hold the
// VIP 203.0.113.7 on lo, serve HTTP on it (each with its own body), run
// fulcrum-decap with -peers 10.96.3.0/24 (their link), and route the
// clients via sclb.
var (
	scLA, scAL = net.HardwareAddr{2, 0xfd, 0, 0, 1, 1}, net.HardwareAddr{2, 0xfd, 0, 0, 1, 2}
	scLB, scBL = net.HardwareAddr{2, 0xfd, 0, 0, 2, 1}, net.HardwareAddr{2, 0xfd, 0, 0, 2, 2}
	scLBAddrA  = netip.MustParseAddr("10.96.1.1")
	scAddrA    = netip.MustParseAddr("10.96.1.2")
	scLBAddrB  = netip.MustParseAddr("10.96.2.1")
	scAddrB    = netip.MustParseAddr("10.96.2.2")
	scPeerB    = netip.MustParseAddr("10.96.3.2") // B on the backends' link: the second chance
)

// TestSecondChanceInNetns: a mid-connection packet of a connection that
// lives on backend B, tunnelled to backend A naming B as its second
// chance (GRE key, then GUE private data), is forwarded by A's agent to B,
// whose socket receives it and answers the client. A packet of a
// connection A owns stays on A; a SYN naming B stays on A; a forged field
// naming an address outside -peers, or A itself, is not forwarded (A
// delivers it, and its stack resets the unknown flow) and no tunnel packet
// leaves A.
func TestSecondChanceInNetns(t *testing.T) {
	needNetns(t)
	bin := buildAgent(t)
	lbns, ans, bns := setupChanceNetns(t)
	// With -lbs: the tunnels from the LB side and B's forwards (from
	// -peers) are accepted.
	lbs := scLBAddrA.String() + "," + scLBAddrB.String()
	agentA := startChanceAgent(t, ans, bin, "-lbs", lbs)
	agentB := startChanceAgent(t, bns, bin, "-lbs", lbs)
	serveBody(t, ans, "served by A\n")
	serveBody(t, bns, "served by B\n")
	la := openPacketSocket(t, lbns, "la")
	lb := openPacketSocket(t, lbns, "lb")

	gre := func(toA bool, key netip.Addr) func([]byte) []byte {
		return func(inner []byte) []byte {
			src, dst, smac, dmac := scLBAddrB, scAddrB, scLB, scBL
			if toA {
				src, dst, smac, dmac = scLBAddrA, scAddrA, scLA, scAL
			}
			g := &layers.GRE{Protocol: layers.EthernetTypeIPv4}
			if key.IsValid() {
				g.KeyPresent, g.Key = true, uint32(key.As4()[0])<<24|uint32(key.As4()[1])<<16|uint32(key.As4()[2])<<8|uint32(key.As4()[3])
			}
			return serialize(t, &layers.Ethernet{SrcMAC: smac, DstMAC: dmac, EthernetType: layers.EthernetTypeIPv4},
				&layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolGRE, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()},
				g, gopacket.Payload(inner))
		}
	}
	gueToA := func(chance netip.Addr) func([]byte) []byte {
		return func(inner []byte) []byte {
			ip := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP, SrcIP: scLBAddrA.AsSlice(), DstIP: scAddrA.AsSlice()}
			udp := &layers.UDP{SrcPort: 50999, DstPort: 6080}
			udp.SetNetworkLayerForChecksum(ip)
			// GUE variant 0, Hlen 2, proto 4, then the private block
			// (docs/second-chance.md): 0x5343, family 4, 0, the address.
			hdr := append([]byte{2, 4, 0, 0, 0x53, 0x43, 4, 0}, chance.AsSlice()...)
			return serialize(t, &layers.Ethernet{SrcMAC: scLA, DstMAC: scAL, EthernetType: layers.EthernetTypeIPv4}, ip, udp, gopacket.Payload(append(hdr, inner...)))
		}
	}

	// 1. Connections that live on B, opened through B's own tunnel; their
	// request arrives at A naming B: A forwards it, B answers.
	for i, viaA := range []func([]byte) []byte{gre(true, scPeerB), gueToA(scPeerB)} {
		port := uint16(42001 + i)
		synack := handshake(t, lb, gre(false, netip.Addr{}), port)
		resp := request(t, la, lb, viaA, port, synack)
		if !bytes.Contains(resp, []byte("served by B")) {
			dbg, _ := exec.Command("sh", "-c", "ip -n "+ans+" -s link show dev al; ip -n "+ans+" addr; ip -n "+lbns+" -s link show dev la; ip netns exec "+ans+" nstat -az 2>/dev/null | grep -i -E 'InDiscards|InHdrErrors|InAddrErrors|NoPorts|InUnknownProtos|RPFilter'").CombinedOutput()
			t.Fatalf("connection %d on B, request via A: response %q, want B's\n%s\nA: %s\nB: %s", port, resp, dbg,
				counters(t, agentA, func(string) bool { return true }), counters(t, agentB, func(string) bool { return true }))
		}
	}
	// 2. A connection that lives on A, its SYN naming B (a SYN is never
	// forwarded) and its request naming B: A keeps both.
	synack := handshake(t, la, gre(true, scPeerB), 42010)
	if resp := request(t, la, la, gre(true, scPeerB), 42010, synack); !bytes.Contains(resp, []byte("served by A")) {
		t.Fatalf("connection on A: response %q, want A's", resp)
	}
	// 3. A forged field naming an address outside -peers (the LB side's
	// own address): not forwarded; A's stack, owning no such flow, resets it.
	la.send(t, gre(true, scLBAddrA)(tcpPacket(t, false, 42020, &layers.TCP{Seq: 5000, Ack: 7000, ACK: true, PSH: true}, []byte("hello"))))
	if rst := la.expect(t, 5*time.Second, func(_, _ netip.Addr, tcp *layers.TCP) bool { return tcp.DstPort == 42020 && tcp.RST }, vipAddr4, client4); rst == nil {
		t.Fatal("the forged packet was not delivered on A (no RST from A's stack)")
	}

	// 4. A field naming A itself (inside -peers): never forwarded to
	// itself; delivered, and reset by A's stack.
	la.send(t, gre(true, netip.MustParseAddr("10.96.3.1"))(tcpPacket(t, false, 42021, &layers.TCP{Seq: 5000, Ack: 7000, ACK: true, PSH: true}, []byte("hello"))))
	if rst := la.expect(t, 5*time.Second, func(_, _ netip.Addr, tcp *layers.TCP) bool { return tcp.DstPort == 42021 && tcp.RST }, vipAddr4, client4); rst == nil {
		t.Fatal("the packet naming A itself was not delivered on A (no RST from A's stack)")
	}

	ca := counters(t, agentA, func(l string) bool { return counter(l, "second_chance.in") >= 6 })
	cb := counters(t, agentB, func(string) bool { return true })
	for name, want := range map[string]int{"second_chance.in": 6, "second_chance.forwarded": 2, "second_chance.local": 1,
		"second_chance.skipped": 1, "second_chance.not-allowed": 1, "second_chance.self": 1, "second_chance.lookup-error": 0} {
		if got := counter(ca, name); got != want {
			t.Errorf("A: %s = %d, want %d\n%s", name, got, want, ca)
		}
	}
	// B received the two forwarded packets without a field: it never
	// considers forwarding them again.
	if got := counter(cb, "second_chance.in"); got != 0 {
		t.Errorf("B: second_chance.in = %d, want 0 (forwarded packets carry no second chance)\n%s", got, cb)
	}
	if counter(cb, "out.gre") < 2 || counter(cb, "out.gue") < 1 {
		t.Errorf("B: out.gre %d out.gue %d, want the handshakes and the forwarded packets\n%s", counter(cb, "out.gre"), counter(cb, "out.gue"), cb)
	}
	// No tunnel packet ever left A toward the LB side (no relay).
	if n := tunnelsFrom(t, la, scAddrA, 300*time.Millisecond); n != 0 {
		t.Errorf("%d tunnel packets left A toward sclb", n)
	}

	// 5. A holds a connection of the tuple in TIME_WAIT (its server closed
	// first); the client reuses the tuple for a connection that lives on
	// B, whose request reaches A naming B (an LB found the old pin): the
	// TIME_WAIT owns only the old connection's closing segments, so A
	// forwards the request and B answers. (Delivered to the TIME_WAIT, it
	// drew ACKs of the old connection and stalled the new one for good.)
	const reused = 42030
	synackA := handshake(t, la, gre(true, netip.Addr{}), reused)
	resp := request(t, la, la, gre(true, netip.Addr{}), reused, synackA)
	if !bytes.Contains(resp, []byte("served by A")) {
		t.Fatalf("the old connection on A: response %q", resp)
	}
	// A's server closed after its HTTP/1.0 answer: its FIN follows the
	// response. The client acknowledges it and closes: A is in TIME_WAIT.
	reqLen := uint32(len("GET / HTTP/1.0\r\nHost: vip\r\n\r\n"))
	finAck := gre(true, netip.Addr{})(tcpPacket(t, false, reused, &layers.TCP{Seq: 1001 + reqLen, Ack: synackA.Seq + 1 + uint32(len(resp)) + 1, ACK: true, FIN: true}, nil))
	var tw []byte
	for try := 0; try < 50 && !bytes.Contains(tw, []byte(":"+strconv.Itoa(reused))); try++ {
		la.send(t, finAck)
		time.Sleep(50 * time.Millisecond)
		tw, _ = exec.Command("ip", "netns", "exec", ans, "ss", "-tan", "state", "time-wait").CombinedOutput()
	}
	if !bytes.Contains(tw, []byte(":"+strconv.Itoa(reused))) {
		t.Fatalf("no TIME_WAIT on A for client port %d:\n%s", reused, tw)
	}
	synackB := handshake(t, lb, gre(false, netip.Addr{}), reused)
	if resp := request(t, la, lb, gre(true, scPeerB), reused, synackB); !bytes.Contains(resp, []byte("served by B")) {
		t.Fatalf("a new connection on B reusing the tuple of A's TIME_WAIT, its request via A naming B: response %q, want B's\nA: %s", resp,
			counters(t, agentA, func(string) bool { return true }))
	}
}

// setupChanceNetns creates the three namespaces and their links.
func setupChanceNetns(t *testing.T) (lbns, ans, bns string) {
	sfx := strconv.Itoa(os.Getpid())
	lbns, ans, bns = "sclb-"+sfx, "scA-"+sfx, "scB-"+sfx
	t.Cleanup(func() {
		for _, ns := range []string{lbns, ans, bns} {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	for _, ns := range []string{lbns, ans, bns} {
		ipCmd(t, "netns", "add", ns)
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	}
	ipCmd(t, "-n", lbns, "link", "add", "la", "address", scLA.String(), "type", "veth", "peer", "name", "al", "netns", ans, "address", scAL.String())
	ipCmd(t, "-n", lbns, "link", "add", "lb", "address", scLB.String(), "type", "veth", "peer", "name", "bl", "netns", bns, "address", scBL.String())
	ipCmd(t, "-n", ans, "link", "add", "ab", "type", "veth", "peer", "name", "ba", "netns", bns)
	for _, c := range [][]string{
		{"-n", lbns, "addr", "add", scLBAddrA.String() + "/24", "dev", "la"},
		{"-n", lbns, "addr", "add", scLBAddrB.String() + "/24", "dev", "lb"},
		{"-n", lbns, "link", "set", "dev", "la", "up"},
		{"-n", lbns, "link", "set", "dev", "lb", "up"},
		{"-n", ans, "addr", "add", scAddrA.String() + "/24", "dev", "al"},
		{"-n", ans, "addr", "add", "10.96.3.1/24", "dev", "ab"},
		{"-n", bns, "addr", "add", scAddrB.String() + "/24", "dev", "bl"},
		{"-n", bns, "addr", "add", scPeerB.String() + "/24", "dev", "ba"},
		{"-n", ans, "link", "set", "dev", "al", "up"},
		{"-n", ans, "link", "set", "dev", "ab", "up"},
		{"-n", bns, "link", "set", "dev", "bl", "up"},
		{"-n", bns, "link", "set", "dev", "ba", "up"},
		{"-n", ans, "addr", "add", vipAddr4.String() + "/32", "dev", "lo"},
		{"-n", bns, "addr", "add", vipAddr4.String() + "/32", "dev", "lo"},
		{"-n", ans, "route", "add", "10.99.1.0/24", "via", scLBAddrA.String()},
		{"-n", bns, "route", "add", "10.99.1.0/24", "via", scLBAddrB.String()},
		{"netns", "exec", ans, "sh", "-c", "echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter"},
		{"netns", "exec", bns, "sh", "-c", "echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter"},
	} {
		ipCmd(t, c...)
	}
	// A veth passes frames once the kernel's link watch has seen its
	// carrier: wait for every link to be up.
	for _, l := range [][2]string{{lbns, "la"}, {lbns, "lb"}, {ans, "al"}, {ans, "ab"}, {bns, "bl"}, {bns, "ba"}} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, err := exec.Command("ip", "-n", l[0], "link", "show", "dev", l[1]).CombinedOutput()
			if err == nil && bytes.Contains(out, []byte("state UP")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s %s not up after 5s: %s", l[0], l[1], out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return lbns, ans, bns
}

func startChanceAgent(t *testing.T, ns, bin string, extra ...string) *agentLog {
	l := &agentLog{exited: make(chan struct{})}
	l.cmd = exec.Command("ip", append([]string{"netns", "exec", ns, bin, "-tun", "fdecap0", "-gre", "-gue", "6080", "-peers", "10.96.3.0/24"}, extra...)...)
	l.cmd.Stderr = l
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		l.exitErr = l.cmd.Wait()
		close(l.exited)
	}()
	t.Cleanup(func() {
		l.cmd.Process.Kill()
		l.wait(5 * time.Second)
		if t.Failed() {
			t.Logf("agent in %s:\n%s", ns, l)
		}
	})
	l.waitFor(t, "msg=ready", 10*time.Second)
	return l
}

func serveBody(t *testing.T, ns, text string) {
	var ln net.Listener
	if err := inNetns(ns, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(vipAddr4, 80).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, text) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// handshake opens a connection from client4:cport to the VIP through
// tunnel, and returns the server's SYN-ACK, captured on s.
func handshake(t *testing.T, s *packetSocket, tunnel func([]byte) []byte, cport uint16) *layers.TCP {
	t.Helper()
	syn := tunnel(synPacket(t, false, cport))
	for try := 0; try < 20; try++ {
		s.send(t, syn)
		if sa := s.expect(t, 250*time.Millisecond, func(_, _ netip.Addr, tcp *layers.TCP) bool {
			return tcp.DstPort == layers.TCPPort(cport) && tcp.SYN && tcp.ACK
		}, vipAddr4, client4); sa != nil {
			return sa
		}
	}
	t.Fatalf("no SYN-ACK for client port %d", cport)
	return nil
}

// request sends the handshake's ACK with an HTTP request through tunnel
// on send and returns the response bytes captured on s (the connection's
// server answers directly).
func request(t *testing.T, send, s *packetSocket, tunnel func([]byte) []byte, cport uint16, synack *layers.TCP) []byte {
	t.Helper()
	req := []byte("GET / HTTP/1.0\r\nHost: vip\r\n\r\n")
	var resp []byte
	for try := 0; try < 3 && !bytes.Contains(resp, []byte("served by")); try++ {
		// Sent once more if nothing came back (the server takes a
		// duplicate segment as a retransmission).
		send.send(t, tunnel(tcpPacket(t, false, cport, &layers.TCP{Seq: 1001, Ack: synack.Seq + 1, ACK: true, PSH: true}, req)))
		s.expect(t, 2*time.Second, func(_, _ netip.Addr, tcp *layers.TCP) bool {
			if tcp.DstPort != layers.TCPPort(cport) || tcp.SYN {
				return false
			}
			if off := int(tcp.Seq - synack.Seq - 1); off == len(resp) {
				resp = append(resp, tcp.Payload...)
			}
			return bytes.Contains(resp, []byte("served by"))
		}, vipAddr4, client4)
	}
	return resp
}

// counters asks the agent for its counters (SIGUSR1) until a line satisfies
// ok, and returns it.
func counters(t *testing.T, l *agentLog, ok func(string) bool) string {
	t.Helper()
	lines := regexp.MustCompile(`msg=counters .*`)
	for end := time.Now().Add(5 * time.Second); ; {
		before := len(lines.FindAllString(l.String(), -1))
		l.cmd.Process.Signal(syscall.SIGUSR1)
		for len(lines.FindAllString(l.String(), -1)) == before && time.Now().Before(end) {
			time.Sleep(10 * time.Millisecond)
		}
		all := lines.FindAllString(l.String(), -1)
		if len(all) > before && ok(all[len(all)-1]) || time.Now().After(end) {
			if len(all) == 0 {
				t.Fatalf("no counters line:\n%s", l)
			}
			return all[len(all)-1]
		}
	}
}

// tunnelsFrom counts GRE and UDP packets from src seen on s for d.
func tunnelsFrom(t *testing.T, s *packetSocket, src netip.Addr, d time.Duration) int {
	t.Helper()
	buf := make([]byte, 65536)
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		m, _, err := unix.Recvfrom(s.fd, buf, 0)
		if err != nil {
			continue
		}
		p := gopacket.NewPacket(buf[:m], layers.LayerTypeEthernet, gopacket.NoCopy)
		if ip, ok := p.NetworkLayer().(*layers.IPv4); ok && ip.SrcIP.Equal(src.AsSlice()) && (ip.Protocol == layers.IPProtocolGRE || ip.Protocol == layers.IPProtocolUDP) {
			n++
		}
	}
	return n
}
