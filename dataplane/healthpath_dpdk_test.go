//go:build dpdk

package dataplane

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// TestEngineSteersKernelHealthCheck: a connection the kernel opens from
// lb_ipv4 and be2's check port to the VIP, routed into the exception tap
// as package exception routes it, leaves the engine's wire GRE-encapsulated
// to be2, the kernel's SYN inside unchanged; the kernel's other packets
// leave as they were, and the worker counts the check in HealthTunnelTx,
// not as client traffic.
func TestEngineSteersKernelHealthCheck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the exception path needs root (tap device)")
	}
	for _, tool := range []string{"ip", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	const ifc = "fltest9"
	toml := strings.Replace(tunnelConfig, `next_hop_mac`, "exception = true\nexception_iface = \""+ifc+"\"\nnext_hop_mac", 1) + "\n[eal]\nmemory_mb = 512\n"
	l := newLab(t, toml)
	ns := fmt.Sprintf("fulcrum-dphc-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	mac := net.HardwareAddr(l.eng.PortMAC[:]).String()
	for _, a := range [][]string{{"link", "set", "dev", ifc, "netns", ns},
		{"-n", ns, "link", "set", "dev", ifc, "address", mac},
		{"-n", ns, "link", "set", "dev", ifc, "up"},
		{"-n", ns, "addr", "replace", lb4 + "/24", "dev", ifc},
		// What exception.Configure does for a VIP checked through the tunnel.
		{"-n", ns, "neigh", "replace", configtest.Web, "lladdr", mac, "dev", ifc, "nud", "permanent"},
		{"-n", ns, "route", "replace", configtest.Web + "/32", "dev", ifc, "scope", "link"}} {
		if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", a, err, out)
		}
	}
	svc := l.shared.Services.Load()
	port, ok := svc.HealthPort(l.cfg.VIPs[0].Key(), "be2")
	if !ok {
		t.Fatal("be2 has no check port")
	}
	be2 := netip.MustParseAddr("10.0.1.2")
	var got []byte
	deadline := time.Now().Add(15 * time.Second)
	for got == nil && time.Now().Before(deadline) {
		// Nothing answers: the kernel sends its SYN, then gives up.
		c := exec.Command("ip", "netns", "exec", ns, "curl", "-s", "-m", "1", "--local-port", fmt.Sprint(port),
			fmt.Sprintf("http://%s:8080/healthz", configtest.Web))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		for _, f := range l.recv(1<<20, time.Second) {
			pk := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			outer, ok := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if !ok || outer.Protocol != layers.IPProtocolGRE {
				continue
			}
			if !outer.DstIP.Equal(be2.AsSlice()) || !outer.SrcIP.Equal(net.ParseIP(lb4)) {
				t.Fatalf("check encapsulated %v -> %v, want %s -> %v", outer.SrcIP, outer.DstIP, lb4, be2)
			}
			got = f
		}
		c.Wait()
	}
	if got == nil {
		t.Fatal("no encapsulated check left the wire")
	}
	_, inner, _ := decodeTunnelFrom(t, got, l.eng.PortMAC)
	ip := gopacket.NewPacket(inner, layers.LayerTypeIPv4, gopacket.Default)
	tcp, ok := ip.Layer(layers.LayerTypeTCP).(*layers.TCP)
	in4, _ := ip.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok || in4 == nil || !tcp.SYN || uint16(tcp.SrcPort) != port || tcp.DstPort != 8080 ||
		in4.SrcIP.String() != lb4 || in4.DstIP.String() != configtest.Web {
		t.Fatalf("inner packet %v, want the kernel's SYN %s:%d -> %s:8080", ip, lb4, port, configtest.Web)
	}
	var c Counters
	if !l.eng.Workers()[0].Snapshot(&c, 5*time.Second) {
		t.Fatal("worker did not answer a snapshot")
	}
	if c.HealthTunnelTx == 0 || c.FromKernel < c.HealthTunnelTx || c.Encap[0] != 0 || c.CTMisses != 0 {
		t.Errorf("health_tunnel_tx %d from_kernel %d forwarded %d ct misses %d; want checks counted apart from client traffic",
			c.HealthTunnelTx, c.FromKernel, c.Encap[0], c.CTMisses)
	}
}
