package control

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/health"
)

// TestTunnelHealthTargets: a VIP checked through the tunnel gets targets
// that connect to the VIP on the check port from lb_ipv4 and the port the
// snapshot gave each backend (the port the dataplane steers by); a VIP
// checked directly keeps its backends' addresses; the kernel routes only
// the tunnel-checked VIP into the exception path.
func TestTunnelHealthTargets(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Web(3).
		Sub("[vip.health]", `kind = "http"`, "port = 8080", `through = "tunnel"`).
		VIP("direct", "203.0.113.8", 80).
		Backend("d1", "10.0.2.1").
		Sub("[vip.health]", `kind = "tcp"`).
		String()
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := BuildServices(cfg, nil, nil, dataplane.NextHop{})
	if err != nil {
		t.Fatal(err)
	}
	targets, err := healthTargets(cfg, svc)
	if err != nil {
		t.Fatal(err)
	}
	vip := netip.MustParseAddr(configtest.Web)
	ports := map[uint16]string{}
	for _, name := range []string{"be1", "be2", "be3"} {
		tg, ok := targets["web/"+name]
		if !ok {
			t.Fatalf("no target for web/%s", name)
		}
		port, ok := svc.HealthPort(cfg.VIPs[0].Key(), name)
		if !ok {
			t.Fatalf("web/%s has no check port in the snapshot", name)
		}
		want := health.Tunnel{VIP: vip, Source: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.10"), port)}
		if tg.Tunnel != want || tg.ProbeAddr() != netip.AddrPortFrom(vip, 8080) {
			t.Errorf("web/%s: tunnel %+v probe %v, want %+v probe %v:8080", name, tg.Tunnel, tg.ProbeAddr(), want, vip)
		}
		if other, dup := ports[port]; dup {
			t.Errorf("web/%s and web/%s share check port %d", name, other, port)
		}
		ports[port] = name
	}
	d := targets["direct/d1"]
	if d.Tunnel != (health.Tunnel{}) || d.ProbeAddr() != netip.MustParseAddrPort("10.0.2.1:80") {
		t.Errorf("direct/d1: tunnel %+v probe %v, want none and 10.0.2.1:80", d.Tunnel, d.ProbeAddr())
	}
	if got := TunnelCheckedVIPs(cfg); len(got) != 1 || got[0].Addr != vip {
		t.Errorf("TunnelCheckedVIPs = %v, want [%v]", got, vip)
	}
	// Without the snapshot there is no source port: refused, not guessed.
	if _, err := healthTargets(cfg, nil); err == nil {
		t.Error("healthTargets without a snapshot accepted checks through the tunnel")
	}
}

// The kernel's route to a tunnel-checked VIP carries the largest packet
// every tunnel of the VIPs at that address takes: dataplane.mtu less the
// largest overhead. GRE over IPv4 is 20 + 4 bytes (RFC 2784), GUE over
// IPv6 40 + 8 + 4 (RFC 8200, 768, the GUE draft's base header). A
// ClientHello filled a 1500-byte segment, which no tunnel took at mtu
// 1500: HTTPS checks through the tunnel never passed.
func TestTunnelRouteMTU(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, `lb_ipv6 = "2001:db8::10"`, "mtu = 1500").
		VIP("web", "203.0.113.7", 80).
		Backend("be1", "10.0.1.1").
		Sub("[vip.health]", `kind = "https"`, "port = 8443", `through = "tunnel"`).
		VIP("api", "203.0.113.9", 80).
		Backend("a1", "10.0.1.1").
		Sub("[vip.health]", `kind = "https"`, "port = 8443", `through = "tunnel"`).
		VIP("api-tls", "203.0.113.9", 443, `encap = "gue"`).
		Backend("a2", "2001:db8:1::2").
		Sub("[vip.health]", `kind = "https"`, "port = 8443", `through = "tunnel"`).
		String()
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Addr]int{
		netip.MustParseAddr("203.0.113.7"): 1500 - (20 + 4),
		netip.MustParseAddr("203.0.113.9"): 1500 - (40 + 8 + 4),
	}
	got := TunnelCheckedVIPs(cfg)
	if len(got) != len(want) {
		t.Fatalf("TunnelCheckedVIPs = %+v, want %v", got, want)
	}
	for _, r := range got {
		if r.MTU != want[r.Addr] {
			t.Errorf("route to %v: mtu %d, want %d", r.Addr, r.MTU, want[r.Addr])
		}
	}
}
