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
	if got := TunnelCheckedVIPs(cfg); len(got) != 1 || got[0] != vip {
		t.Errorf("TunnelCheckedVIPs = %v, want [%v]", got, vip)
	}
	// Without the snapshot there is no source port: refused, not guessed.
	if _, err := healthTargets(cfg, nil); err == nil {
		t.Error("healthTargets without a snapshot accepted checks through the tunnel")
	}
}
