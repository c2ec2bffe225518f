//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/fulcrumlb/fulcrum/decap"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
)

// The DSR test topology, all inside two namespaces the test creates and
// deletes (the root namespace is never touched):
//
//	lbns  veth-lb 10.99.0.1/24 fd00:99::1/64  (the test plays the LB here:
//	  |           02:fd:00:00:00:01            it sends tunnelled packets
//	  |                                        and captures on veth-lb)
//	bens  veth-be 10.99.0.2/24 fd00:99::2/64, 02:fd:00:00:00:02
//	      lo      203.0.113.7/32 fd00:7::7/128 (the VIPs), HTTP on :80
//	      fdecap0 (fulcrum-decap's TUN)
//	      routes to the clients 10.99.1.0/24, fd00:98::/64 via lbns
//
// The clients 10.99.1.2 and fd00:98::2 exist nowhere: lbns neither owns
// nor forwards them, so the backend's replies are seen only by the capture.
var (
	lbMAC    = net.HardwareAddr{2, 0xfd, 0, 0, 0, 1}
	beMAC    = net.HardwareAddr{2, 0xfd, 0, 0, 0, 2}
	lbAddr4  = netip.MustParseAddr("10.99.0.1")
	beAddr4  = netip.MustParseAddr("10.99.0.2")
	lbAddr6  = netip.MustParseAddr("fd00:99::1")
	beAddr6  = netip.MustParseAddr("fd00:99::2")
	vipAddr4 = netip.MustParseAddr("203.0.113.7")
	vipAddr6 = netip.MustParseAddr("fd00:7::7")
	client4  = netip.MustParseAddr("10.99.1.2")
	client6  = netip.MustParseAddr("fd00:98::2")
)

const body = "served by bens\n"

func TestDSRInNetns(t *testing.T) {
	needNetns(t)
	bin := buildAgent(t)
	lbns, bens := setupNetns(t)

	stderr := startAgent(t, bens, bin)
	serveHTTP(t, bens)
	lb := openPacketSocket(t, lbns, "veth-lb")

	enc, err := encap.New(encap.Config{SrcV4: lbAddr4, SrcV6: lbAddr6})
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(41000)
	sent := map[decap.Kind]int{}
	for _, kind := range []decap.Kind{decap.GRE, decap.IPIP, decap.GUE} {
		for _, fams := range []struct{ outer6, inner6 bool }{{false, false}, {true, true}, {true, false}, {false, true}} {
			for _, builder := range []string{"gopacket", "encap"} {
				name := fmt.Sprintf("%s %s outer %s inner %s", kind, builder, fam(fams.outer6), fam(fams.inner6))
				port++
				t.Run(name, func(t *testing.T) {
					tunnel := func(inner []byte) []byte {
						if builder == "encap" {
							return encapFrame(t, enc, kind, fams.outer6, inner)
						}
						return gopacketFrame(t, kind, fams.outer6, inner)
					}
					sent[kind] += httpOverTunnel(t, lb, fams.inner6, port, tunnel)
				})
			}
		}
	}

	// A malformed tunnel packet is counted, not forwarded: a GRE sequence
	// number (a key is a second chance, chance_netns_test.go).
	lb.send(t, serialize(t,
		&layers.Ethernet{SrcMAC: lbMAC, DstMAC: beMAC, EthernetType: layers.EthernetTypeIPv4},
		outer(false, layers.IPProtocolGRE),
		&layers.GRE{SeqPresent: true, Seq: 1, Protocol: layers.EthernetTypeIPv4},
		gopacket.Payload(synPacket(t, false, 40999))))

	// SIGUSR1 logs the counters: ask until every packet sent has been
	// read (the last ones may still be in a socket queue). Then SIGTERM
	// stops the agent cleanly, and it logs them once more.
	counterLines := regexp.MustCompile(`msg=counters .*`)
	complete := func(line string) bool {
		for kind, n := range sent {
			if counter(line, "out."+kind.String()) < n {
				return false
			}
		}
		return counter(line, "drop.gre-flags") == 1
	}
	for end := time.Now().Add(5 * time.Second); ; {
		before := len(counterLines.FindAllString(stderr.String(), -1))
		stderr.cmd.Process.Signal(syscall.SIGUSR1)
		for len(counterLines.FindAllString(stderr.String(), -1)) == before && time.Now().Before(end) {
			time.Sleep(10 * time.Millisecond)
		}
		lines := counterLines.FindAllString(stderr.String(), -1)
		if len(lines) > before && complete(lines[len(lines)-1]) || time.Now().After(end) {
			break
		}
	}
	stderr.cmd.Process.Signal(syscall.SIGTERM)
	if err := stderr.wait(10 * time.Second); err != nil {
		t.Fatalf("agent exit: %v\n%s", err, stderr)
	}
	log := stderr.String()
	lines := counterLines.FindAllString(log, -1)
	if len(lines) < 2 {
		t.Fatalf("want counter lines on SIGUSR1 and at exit, got %d:\n%s", len(lines), log)
	}
	last := lines[len(lines)-1]
	for kind, n := range sent {
		// Every packet of the exchanges was decapsulated; the backend's
		// replies and retransmits go straight to lbns, never through here.
		if got := counter(last, "out."+kind.String()); got < n {
			t.Errorf("out.%s = %d, want at least the %d packets sent", kind, got, n)
		}
	}
	// Every packet read is either written to the TUN or counted as a drop.
	in, out := 0, 0
	for _, m := range regexp.MustCompile(` (in|out)\.[a-z0-9]+=(\d+)`).FindAllStringSubmatch(last, -1) {
		n, _ := strconv.Atoi(m[2])
		if m[1] == "in" {
			in += n
		} else {
			out += n
		}
	}
	if dropped := counter(last, "dropped"); in != out+dropped || in == 0 {
		t.Errorf("in %d != out %d + dropped %d", in, out, dropped)
	}
	if got := counter(last, "drop.gre-flags"); got != 1 {
		t.Errorf("drop.gre-flags = %d, want 1\n%s", got, last)
	}
	if !strings.Contains(log, "msg=stopping") {
		t.Errorf("no clean stop in the log:\n%s", log)
	}
	t.Logf("agent counters: %s", last)
}

func fam(v6 bool) string {
	if v6 {
		return "v6"
	}
	return "v4"
}

// counter reads name=N from a counters log line.
func counter(line, name string) int {
	m := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(name) + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// httpOverTunnel plays a client's side of one HTTP/1.0 request through the
// tunnel: it sends the SYN, expects the SYN-ACK straight from the VIP (not
// tunnelled: DSR), sends the ACK with the request, and expects the
// response, again straight from the VIP. It returns the packets sent.
func httpOverTunnel(t *testing.T, lb *packetSocket, v6 bool, cport uint16, tunnel func(inner []byte) []byte) int {
	vip, client := vipAddr4, client4
	if v6 {
		vip, client = vipAddr6, client6
	}
	const isn = 1000
	syn := tunnel(synPacket(t, v6, cport))
	var synack *layers.TCP
	sent := 0
	for try := 0; try < 20 && synack == nil; try++ {
		lb.send(t, syn)
		sent++
		synack = lb.expect(t, 250*time.Millisecond, func(src, dst netip.Addr, tcp *layers.TCP) bool {
			return tcp.DstPort == layers.TCPPort(cport) && tcp.SYN && tcp.ACK
		}, vip, client)
	}
	if synack == nil {
		t.Fatalf("no SYN-ACK from %s:80 to %s:%d", vip, client, cport)
	}
	if synack.Ack != isn+1 || synack.SrcPort != 80 {
		t.Fatalf("SYN-ACK %d->%d ack %d, want 80->%d ack %d", synack.SrcPort, synack.DstPort, synack.Ack, cport, isn+1)
	}

	req := []byte("GET / HTTP/1.0\r\nHost: vip\r\n\r\n")
	lb.send(t, tunnel(tcpPacket(t, v6, cport, &layers.TCP{Seq: isn + 1, Ack: synack.Seq + 1, ACK: true, PSH: true}, req)))
	sent++
	var resp []byte
	reply := lb.expect(t, 5*time.Second, func(src, dst netip.Addr, tcp *layers.TCP) bool {
		if tcp.DstPort != layers.TCPPort(cport) || tcp.SYN {
			return false
		}
		if off := int(tcp.Seq - synack.Seq - 1); off == len(resp) {
			resp = append(resp, tcp.Payload...)
		}
		return bytes.Contains(resp, []byte(body))
	}, vip, client)
	if reply == nil {
		t.Fatalf("no HTTP response from %s:80 to %s:%d; got %q", vip, client, cport, resp)
	}
	if !bytes.HasPrefix(resp, []byte("HTTP/1.0 200 OK")) {
		t.Errorf("response %q", resp)
	}
	// Reset the connection so the server does not keep retransmitting.
	lb.send(t, tunnel(tcpPacket(t, v6, cport, &layers.TCP{Seq: isn + 1 + uint32(len(req)), RST: true}, nil)))
	return sent + 1
}

func synPacket(t testing.TB, v6 bool, cport uint16) []byte {
	return tcpPacket(t, v6, cport, &layers.TCP{Seq: 1000, SYN: true, Window: 64240,
		Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0x00}}}}, nil)
}

// tcpPacket is the client's IP packet to the VIP's port 80.
func tcpPacket(t testing.TB, v6 bool, cport uint16, tcp *layers.TCP, payload []byte) []byte {
	tcp.SrcPort, tcp.DstPort = layers.TCPPort(cport), 80
	if tcp.Window == 0 {
		tcp.Window = 64240
	}
	var ip gopacket.NetworkLayer
	if v6 {
		ip = &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: client6.AsSlice(), DstIP: vipAddr6.AsSlice()}
	} else {
		ip = &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: client4.AsSlice(), DstIP: vipAddr4.AsSlice()}
	}
	tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ip.(gopacket.SerializableLayer), tcp, gopacket.Payload(payload))
}

func outer(v6 bool, proto layers.IPProtocol) gopacket.SerializableLayer {
	if v6 {
		return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: lbAddr6.AsSlice(), DstIP: beAddr6.AsSlice()}
	}
	return &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: proto, SrcIP: lbAddr4.AsSlice(), DstIP: beAddr4.AsSlice()}
}

// gopacketFrame tunnels inner toward the backend with gopacket's layers:
// the packet layout as the RFCs describe it, independent of package encap.
func gopacketFrame(t testing.TB, kind decap.Kind, outer6 bool, inner []byte) []byte {
	v6 := inner[0]>>4 == 6
	eth := &layers.Ethernet{SrcMAC: lbMAC, DstMAC: beMAC, EthernetType: layers.EthernetTypeIPv4}
	if outer6 {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	ipip, et := layers.IPProtocolIPv4, layers.EthernetTypeIPv4
	if v6 {
		ipip, et = layers.IPProtocolIPv6, layers.EthernetTypeIPv6
	}
	switch kind {
	case decap.GRE:
		return serialize(t, eth, outer(outer6, layers.IPProtocolGRE), &layers.GRE{Protocol: et}, gopacket.Payload(inner))
	case decap.IPIP:
		return serialize(t, eth, outer(outer6, ipip), gopacket.Payload(inner))
	}
	ip := outer(outer6, layers.IPProtocolUDP)
	udp := &layers.UDP{SrcPort: 50123, DstPort: layers.UDPPort(decap.DefaultGUEPort)}
	udp.SetNetworkLayerForChecksum(ip.(gopacket.NetworkLayer))
	return serialize(t, eth, ip, udp, gopacket.Payload{0, byte(ipip), 0, 0}, gopacket.Payload(inner))
}

// encapFrame tunnels inner with Fulcrum's own encapsulator, exactly as the
// LB's dataplane does: the pairing that production depends on.
func encapFrame(t testing.TB, enc *encap.Encapsulator, kind decap.Kind, outer6 bool, inner []byte) []byte {
	be, err := enc.Backend(beAddr4)
	if outer6 {
		be, err = enc.Backend(beAddr6)
	}
	if err != nil {
		t.Fatal(err)
	}
	et := layers.EthernetTypeIPv4
	if inner[0]>>4 == 6 {
		et = layers.EthernetTypeIPv6
	}
	const headroom = 128
	frame := serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xee}, DstMAC: lbMAC, EthernetType: et}, gopacket.Payload(inner))
	buf := append(make([]byte, headroom), frame...)
	var p packet.Parsed
	if r := packet.Parse(buf[headroom:], &p); r != packet.OK {
		t.Fatalf("parse: %v", r)
	}
	start, n, res := enc.Encap(buf, headroom, len(frame), &p, 0x9e3779b97f4a7c15, kind, &be, [6]byte(beMAC), [6]byte(lbMAC))
	if res != encap.Forward {
		t.Fatalf("encap: %v", res)
	}
	return buf[start : start+n]
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// buildAgent builds fulcrum-decap from this package's source.
func buildAgent(t *testing.T) string {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "fulcrum-decap")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// ipCmd runs iproute2's ip.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// setupNetns creates lbns and bens (named uniquely per test process, so
// parallel runs and leftovers never collide) and registers their removal
// first, so it runs last and even after a failure.
func setupNetns(t *testing.T) (lbns, bens string) {
	sfx := strconv.Itoa(os.Getpid())
	lbns, bens = "lbns-"+sfx, "bens-"+sfx
	t.Cleanup(func() {
		for _, ns := range []string{lbns, bens} {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("No such file")) {
				t.Logf("ip netns del %s: %v %s", ns, err, out)
			}
		}
	})
	for _, ns := range []string{lbns, bens} {
		ipCmd(t, "netns", "add", ns)
		// No duplicate address detection on the veths' link-local
		// addresses: neighbour discovery waits for it, which would stall
		// the first IPv6 replies by a second or two.
		ipCmd(t, "netns", "exec", ns, "sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad")
	}
	ipCmd(t, "-n", lbns, "link", "add", "veth-lb", "address", lbMAC.String(), "type", "veth",
		"peer", "name", "veth-be", "netns", bens, "address", beMAC.String())
	for _, c := range [][]string{
		{"-n", lbns, "link", "set", "lo", "up"},
		{"-n", lbns, "addr", "add", lbAddr4.String() + "/24", "dev", "veth-lb"},
		{"-n", lbns, "addr", "add", lbAddr6.String() + "/64", "dev", "veth-lb", "nodad"},
		{"-n", lbns, "link", "set", "veth-lb", "up"},

		{"-n", bens, "link", "set", "lo", "up"},
		{"-n", bens, "addr", "add", vipAddr4.String() + "/32", "dev", "lo"},
		{"-n", bens, "addr", "add", vipAddr6.String() + "/128", "dev", "lo"},
		{"-n", bens, "addr", "add", beAddr4.String() + "/24", "dev", "veth-be"},
		{"-n", bens, "addr", "add", beAddr6.String() + "/64", "dev", "veth-be", "nodad"},
		{"-n", bens, "link", "set", "veth-be", "up"},
		{"-n", bens, "route", "add", "10.99.1.0/24", "via", lbAddr4.String()},
		{"-n", bens, "route", "add", "fd00:98::/64", "via", lbAddr6.String()},
		// Strict reverse-path filtering would drop the decapsulated
		// packets (the clients are routed via veth-be, not the TUN).
		{"netns", "exec", bens, "sh", "-c", "echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter"},
	} {
		ipCmd(t, c...)
	}
	// IPv6 starts on a veth only once the kernel's link watch has seen
	// its carrier (up to a second): wait for the link-local addresses.
	for _, l := range [][2]string{{lbns, "veth-lb"}, {bens, "veth-be"}} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, err := exec.Command("ip", "-n", l[0], "-6", "addr", "show", "dev", l[1], "scope", "link").CombinedOutput()
			if err == nil && bytes.Contains(out, []byte("fe80:")) && !bytes.Contains(out, []byte("tentative")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s %s: no IPv6 link-local address after 5s: %s", l[0], l[1], out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return lbns, bens
}

// agentLog is the running agent and its stderr.
type agentLog struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	buf     bytes.Buffer
	exited  chan struct{} // closed when the agent has exited
	exitErr error         // then: how
}

func (l *agentLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *agentLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *agentLog) waitFor(t *testing.T, s string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(l.String(), s) {
			return
		}
		select {
		case <-l.exited:
			t.Fatalf("agent exited (%v) before logging %q:\n%s", l.exitErr, s, l)
		default:
		}
	}
	t.Fatalf("agent did not log %q within %v:\n%s", s, d, l)
}

func (l *agentLog) wait(d time.Duration) error {
	select {
	case <-l.exited:
		return l.exitErr
	case <-time.After(d):
		return errors.New("timeout")
	}
}

// startAgent runs fulcrum-decap in bens; the cleanup kills it if the test
// did not stop it.
func startAgent(t *testing.T, bens, bin string) *agentLog {
	l := &agentLog{exited: make(chan struct{})}
	l.cmd = exec.Command("ip", "netns", "exec", bens, bin, "-tun", "fdecap0",
		"-addr", beAddr4.String(), "-addr", beAddr6.String())
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
			t.Logf("agent log:\n%s", l)
		}
	})
	l.waitFor(t, "msg=ready", 10*time.Second)
	return l
}

// inNetns runs f on an OS thread that has entered namespace ns. The
// thread stays locked and ends with the goroutine, so no other goroutine
// ever runs in the namespace; sockets f opens stay in it.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// serveHTTP serves HTTP on the VIPs' port 80 in bens, from this process.
func serveHTTP(t *testing.T, bens string) {
	for _, vip := range []netip.Addr{vipAddr4, vipAddr6} {
		var ln net.Listener
		if err := inNetns(bens, func() (err error) {
			ln, err = net.Listen("tcp", netip.AddrPortFrom(vip, 80).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
}

// packetSocket is an AF_PACKET socket on one interface in lbns: it sends
// whole frames and sees every frame on the wire.
type packetSocket struct{ fd int }

func openPacketSocket(t *testing.T, ns, ifname string) *packetSocket {
	var fd int
	err := inNetns(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if err != nil {
		t.Fatalf("packet socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &packetSocket{fd: fd}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (s *packetSocket) send(t *testing.T, frame []byte) {
	t.Helper()
	if _, err := unix.Write(s.fd, frame); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// expect reads frames for up to d and returns the first TCP segment from
// src to dst, untunnelled, that match accepts.
func (s *packetSocket) expect(t *testing.T, d time.Duration, match func(src, dst netip.Addr, tcp *layers.TCP) bool, src, dst netip.Addr) *layers.TCP {
	t.Helper()
	buf := make([]byte, 65536)
	for end := time.Now().Add(d); time.Now().Before(end); {
		n, from, err := unix.Recvfrom(s.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			t.Fatalf("recv: %v", err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // our own frames
		}
		p := gopacket.NewPacket(buf[:n], layers.LayerTypeEthernet, gopacket.NoCopy)
		var sa, da netip.Addr
		switch ip := p.NetworkLayer().(type) {
		case *layers.IPv4:
			sa, da = netip.AddrFrom4([4]byte(ip.SrcIP.To4())), netip.AddrFrom4([4]byte(ip.DstIP.To4()))
		case *layers.IPv6:
			sa, da = netip.AddrFrom16([16]byte(ip.SrcIP)), netip.AddrFrom16([16]byte(ip.DstIP))
		default:
			continue
		}
		tcp, ok := p.TransportLayer().(*layers.TCP)
		if !ok || sa != src || da != dst || tcp.SrcPort != 80 {
			continue
		}
		if match(sa, da, tcp) {
			return tcp
		}
	}
	return nil
}

// needNetns skips a test that creates network namespaces where it cannot
// (not root, no iproute2) or should not (-short).
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	if testing.Short() {
		t.Skip("-short: skips the network-namespace test")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
}
