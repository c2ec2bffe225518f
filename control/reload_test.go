package control

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
	"github.com/fulcrumlb/fulcrum/internal/testtls"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/punt"
)

// reloadBase is the configuration every reload case starts from. Its
// gateways are resolved by the test (SetNextHop), not configured as a
// static MAC, so gateway changes are observable. Every section is present
// so that a change to one key names that key.
var reloadBase = configtest.New().
	Section("eal", "memory_mb = 512").
	Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv6 = "2001:db8:100::1"`).
	Section("conntrack", "capacity = 4096").
	Section("control").
	Section("health").
	Section("admin").
	Section("bgp", "asn = 65100", `router_id = "192.0.2.10"`).
	Sub("[[bgp.neighbor]]", `address = "192.0.2.1"`, "peer_asn = 65000").
	Web(2).
	VIP("six", "203.0.113.8", 80).
	Backend("s1", "2001:db8:1::1").
	VIP("gue", "203.0.113.9", 80, `encap = "gue"`).
	Backend("g1", "10.0.2.1").
	VIP("chk", "203.0.113.10", 80).
	Sub("[vip.health]", `kind = "tcp"`).
	Backend("c1", "10.0.3.1").
	Backend("c2", "10.0.3.2").
	String()

var (
	gw4     = netip.MustParseAddr("192.0.2.1")
	gw6     = netip.MustParseAddr("2001:db8:100::1")
	gwMAC4  = [6]byte{2, 0, 0, 0, 0, 0xf4}
	gwMAC6  = [6]byte{2, 0, 0, 0, 0, 0xf6}
	web     = netip.MustParseAddrPort("203.0.113.7:80")
	webSix  = netip.MustParseAddrPort("203.0.113.8:80")
	webGUE  = netip.MustParseAddrPort("203.0.113.9:80")
	webChk  = netip.MustParseAddrPort("203.0.113.10:80")
	newMAC  = [6]byte{2, 0, 0, 0, 0, 0x99}
	newMAC2 = [6]byte{2, 0, 0, 0, 0, 0x98}
)

// reloadFixture is a control plane over one worker, with the gateways
// resolved, and a record of what the exception interface was told.
type reloadFixture struct {
	*fixture
	applied []*config.Config // the configurations SetOnApply's hook saw
}

func newReloadFixture(t *testing.T) *reloadFixture {
	t.Helper()
	f := &reloadFixture{fixture: newFixture(t, reloadBase)}
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: gwMAC4, MAC6: gwMAC6, Has4: true, Has6: true})
	f.plane.SetOnApply(func(_, cur *config.Config) error { f.applied = append(f.applied, cur); return nil })
	return f
}

// edit sets key = value in [section] of toml (replacing the key's line in
// that section if there is one).
func edit(toml, section, key, value string) string {
	lines := strings.Split(toml, "\n")
	in := false
	for i, l := range lines {
		tl := strings.TrimSpace(l)
		if strings.HasPrefix(tl, "[") {
			if in { // the end of the section: insert before the next header
				return strings.Join(append(lines[:i:i], append([]string{key + " = " + value}, lines[i:]...)...), "\n")
			}
			in = tl == "["+section+"]"
			continue
		}
		if in && strings.HasPrefix(tl, key+" ") {
			lines[i] = key + " = " + value
			return strings.Join(lines, "\n")
		}
	}
	panic("no section " + section)
}

// tcpFrame is a client's TCP segment to dst with n bytes of payload (DF set).
func tcpFrame(t *testing.T, sport uint16, dst netip.AddrPort, n int) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment,
		SrcIP: net.IP(dptest.Client.AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dst.Port()), SYN: true, Window: 100}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(make([]byte, n))); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// sent is what the worker transmitted for one frame, decoded.
type sent struct {
	tx       bool
	eth      *layers.Ethernet
	outer4   *layers.IPv4 // the first IPv4 header (outer, or the ICMP reply's)
	outer6   *layers.IPv6
	udp      *layers.UDP
	icmp     *layers.ICMPv4
	innerIP4 bool // an IPv4 header follows the outer one (IPIP, GRE, GUE)
}

var sport uint16 = 20000

// send sends a fresh flow's SYN (n payload bytes) to dst and decodes what
// came out.
func (f *reloadFixture) send(dst netip.AddrPort, n int) sent {
	f.t.Helper()
	sport++
	r := f.lc.Send(tcpFrame(f.t, sport, dst, n))
	if r.Verdict != dataplane.Tx {
		return sent{}
	}
	s := sent{tx: true}
	pk := gopacket.NewPacket(r.Frame, layers.LayerTypeEthernet, gopacket.Default)
	s.eth, _ = pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	s.outer6, _ = pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	s.udp, _ = pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
	s.icmp, _ = pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	n4 := 0
	for _, l := range pk.Layers() {
		if ip, ok := l.(*layers.IPv4); ok {
			if n4 == 0 {
				s.outer4 = ip
			}
			n4++
		}
	}
	s.innerIP4 = n4 > 1
	return s
}

func (f *reloadFixture) status(vip string) VIPStatus {
	for _, v := range f.plane.Status(false).VIPs {
		if v.Name == vip {
			return v
		}
	}
	f.t.Fatalf("no vip %s", vip)
	return VIPStatus{}
}

func (f *reloadFixture) webBackend(name string) BackendStatus {
	for _, b := range f.status("web").Backends {
		if b.Name == name {
			return b
		}
	}
	f.t.Fatalf("no backend web/%s", name)
	return BackendStatus{}
}

func (f *reloadFixture) vip(name string) *dataplane.VIP {
	for _, v := range f.shared.Services.Load().VIPs {
		if v != nil && v.Name == name {
			return v
		}
	}
	return nil
}

// tokenFile is a valid admin.token_file for the cases (set by the test).
var tokenFile string

// tlsCert and tlsKey are a valid admin.tls_cert and tls_key pair for the
// cases (set by the test): config.Parse loads them, as the daemon does.
var tlsCert, tlsKey string

type reloadCase struct {
	key  string                           // the key changed, as the error must name it
	edit func(string) string              // the changed configuration
	want func(*testing.T, *reloadFixture) // after the reload: the change is in effect; nil: refused
}

func set(section, key, value string) func(string) string {
	return func(s string) string { return edit(s, section, key, value) }
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic("no " + old)
		}
		return strings.Replace(s, old, new, 1)
	}
}

func healthChanged(field string, want any) func(*testing.T, *reloadFixture) {
	return func(t *testing.T, f *reloadFixture) {
		ts, err := healthTargets(f.plane.Config(), nil)
		if err != nil {
			t.Fatal(err)
		}
		tg, ok := ts[checkKey(dataplane.BackendRef{VIP: "chk", Backend: "c1"})]
		if !ok {
			t.Fatal("chk/c1 is not checked")
		}
		if got := reflect.ValueOf(tg.Config).FieldByName(field).Interface(); !reflect.DeepEqual(got, want) {
			t.Errorf("chk/c1 check %s = %v, want %v", field, got, want)
		}
	}
}

// configInForce is the weakest check: the key's new value is the one the
// control plane's consumers read (for keys whose consumer reads the
// configuration in force at each use).
func configInForce(get func(*config.Config) any, want any) func(*testing.T, *reloadFixture) {
	return func(t *testing.T, f *reloadFixture) {
		if got := get(f.plane.Config()); !reflect.DeepEqual(got, want) {
			t.Errorf("in force: %v, want %v", got, want)
		}
	}
}

func reloadCases() []reloadCase {
	refused := func(key, value string) reloadCase {
		sec, k, _ := strings.Cut(key, ".")
		return reloadCase{key: key, edit: set(sec, k, value)}
	}
	return []reloadCase{
		refused("eal.main_lcore", "4"),
		refused("eal.worker_lcores", "[3]"),
		refused("eal.memory_mb", "256"),
		refused("eal.hugepages", "true"),
		refused("eal.file_prefix", `"other"`),
		refused("eal.pci", `["0000:00:01.0"]`),
		refused("eal.vdevs", `["net_null0"]`),
		refused("eal.extra_args", `["--log-level=debug"]`),
		refused("eal.lcore_map", `"0@0,1@0"`),

		refused("dataplane.port", `"net_ring1"`),
		refused("dataplane.tx_port", `"net_ring2"`),
		refused("dataplane.burst", "16"),
		refused("dataplane.rx_desc", "512"),
		refused("dataplane.tx_desc", "512"),
		refused("dataplane.mempool_size", "8191"),
		refused("dataplane.idle_backoff", "false"),
		refused("dataplane.idle_max_sleep", `"1ms"`),
		{key: "dataplane.exception", edit: func(s string) string {
			return edit(edit(s, "dataplane", "exception", "false"), "dataplane", "next_hop_mac", `"02:00:00:00:00:99"`)
		}},
		refused("dataplane.exception_iface", `"fl1"`),
		refused("dataplane.hash_key", `"ffffffffffffffffffffffffffffffff"`),
		{key: "dataplane.lb_ipv4", edit: set("dataplane", "lb_ipv4", `"192.0.2.20"`), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(web, 10); s.outer4 == nil || !s.outer4.SrcIP.Equal(net.ParseIP("192.0.2.20")) {
				t.Errorf("outer source %v, want 192.0.2.20", s.outer4)
			}
			if n := len(f.applied); n == 0 || f.applied[n-1].Dataplane.LBIPv4.Addr != netip.MustParseAddr("192.0.2.20") {
				t.Error("the exception interface was not given the new address")
			}
		}},
		{key: "dataplane.lb_ipv6", edit: set("dataplane", "lb_ipv6", `"2001:db8:100::20"`), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(webSix, 10); s.outer6 == nil || !s.outer6.SrcIP.Equal(net.ParseIP("2001:db8:100::20")) {
				t.Errorf("outer IPv6 source %v, want 2001:db8:100::20", s.outer6)
			}
		}},
		{key: "dataplane.lb_ipv4_prefix", edit: set("dataplane", "lb_ipv4_prefix", "25"), want: func(t *testing.T, f *reloadFixture) {
			if n := len(f.applied); n == 0 || f.applied[n-1].Dataplane.LBPrefix4 != 25 {
				t.Error("the exception interface was not given the new prefix")
			}
		}},
		{key: "dataplane.lb_ipv6_prefix", edit: set("dataplane", "lb_ipv6_prefix", "96"), want: func(t *testing.T, f *reloadFixture) {
			if n := len(f.applied); n == 0 || f.applied[n-1].Dataplane.LBPrefix6 != 96 {
				t.Error("the exception interface was not given the new prefix")
			}
		}},
		{key: "dataplane.gateway_ipv4", edit: set("dataplane", "gateway_ipv4", `"192.0.2.2"`), want: func(t *testing.T, f *reloadFixture) {
			gatewayMoved(t, f, web, netip.MustParseAddr("192.0.2.2"), gw6, func(s sent) [6]byte { return [6]byte(s.eth.DstMAC) })
		}},
		{key: "dataplane.gateway_ipv6", edit: set("dataplane", "gateway_ipv6", `"2001:db8:100::2"`), want: func(t *testing.T, f *reloadFixture) {
			gatewayMoved(t, f, webSix, gw4, netip.MustParseAddr("2001:db8:100::2"), func(s sent) [6]byte { return [6]byte(s.eth.DstMAC) })
		}},
		{key: "dataplane.next_hop_mac", edit: set("dataplane", "next_hop_mac", `"02:00:00:00:00:99"`), want: func(t *testing.T, f *reloadFixture) {
			for _, dst := range []netip.AddrPort{web, webSix} {
				if s := f.send(dst, 10); !s.tx || [6]byte(s.eth.DstMAC) != newMAC {
					t.Errorf("to %v: Ethernet destination %v, want the static %v", dst, s.eth, net.HardwareAddr(newMAC[:]))
				}
			}
		}},
		{key: "dataplane.mtu", edit: set("dataplane", "mtu", "1280"), want: func(t *testing.T, f *reloadFixture) {
			s := f.send(web, 1400-40)
			if s.icmp == nil || s.icmp.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeFragmentationNeeded) {
				t.Fatalf("a 1400-byte packet after mtu = 1280: tx %v, icmp %v; want fragmentation needed", s.tx, s.icmp)
			}
			if mtu := s.icmp.Seq; mtu == 0 || mtu > 1280-24 { // the next-hop MTU field: 1280 less the GRE overhead
				t.Errorf("next-hop MTU %d, want at most 1256", mtu)
			}
		}},
		{key: "dataplane.encap", edit: set("dataplane", "encap", `"ipip"`), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(web, 10); s.outer4 == nil || s.outer4.Protocol != layers.IPProtocolIPv4 || !s.innerIP4 {
				t.Errorf("outer protocol %v, want IPIP", s.outer4)
			}
		}},
		{key: "dataplane.ttl", edit: set("dataplane", "ttl", "9"), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(web, 10); s.outer4 == nil || s.outer4.TTL != 9 {
				t.Errorf("outer TTL %v, want 9", s.outer4)
			}
		}},
		{key: "dataplane.df", edit: set("dataplane", "df", `"clear"`), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(web, 10); s.outer4 == nil || s.outer4.Flags&layers.IPv4DontFragment != 0 {
				t.Errorf("outer flags %v, want DF clear", s.outer4)
			}
		}},
		{key: "dataplane.gue_port", edit: set("dataplane", "gue_port", "7000"), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(webGUE, 10); s.udp == nil || s.udp.DstPort != 7000 {
				t.Errorf("GUE %v, want UDP port 7000", s.udp)
			}
		}},

		{key: "dataplane.second_chance", edit: set("dataplane", "second_chance", "true"), want: func(t *testing.T, f *reloadFixture) {
			if w := chanceOf(f, "web"); w != 5*time.Minute {
				t.Errorf("web's second-chance window %v, want 5m", w)
			}
		}},
		{key: "dataplane.second_chance_window", edit: func(s string) string {
			return set("dataplane", "second_chance", "true")(set("dataplane", "second_chance_window", `"90s"`)(s))
		}, want: func(t *testing.T, f *reloadFixture) {
			if w := chanceOf(f, "web"); w != 90*time.Second {
				t.Errorf("web's second-chance window %v, want 90s", w)
			}
		}},

		{key: "dataplane.punt", edit: func(s string) string {
			return s + "\n[dataplane.punt]\nbgp = 70\nother = 5\n"
		}, want: func(t *testing.T, f *reloadFixture) {
			want := punt.Default.Rates()
			want[punt.BGP], want[punt.Other] = 70, 5
			if got := f.shared.Services.Load().Punt(); got != want {
				t.Errorf("punt limits %v, want %v", got, want)
			}
		}},

		refused("conntrack.capacity", "8192"),
		refused("conntrack.tcp_established", `"100s"`),
		refused("conntrack.tcp_syn", `"5s"`),
		refused("conntrack.tcp_closing", `"5s"`),
		refused("conntrack.udp", `"10s"`),

		{key: "control.panic_threshold", edit: set("control", "panic_threshold", "0.9"), want: func(t *testing.T, f *reloadFixture) {
			// One of chk's two backends up: healthy 1 < 0.9 x 2, panic
			// (under the default 0.5 it would not be).
			f.plane.SetHealth("chk", "c1", true, "test")
			f.plane.SetHealth("chk", "c2", false, "test") // unknown counts as up
			f.plane.SetWeight("chk", "c2", 1)             // rebuild now
			if !f.plane.Panicked()["chk"] {
				t.Error("chk: one of two backends healthy under panic_threshold 0.9, want panic mode")
			}
		}},
		{key: "control.slow_start", edit: set("control", "slow_start", `"1m"`), want: func(t *testing.T, f *reloadFixture) {
			if err := f.plane.Drain("web", "be1"); err != nil {
				t.Fatal(err)
			}
			if err := f.plane.Undrain("web", "be1"); err != nil {
				t.Fatal(err)
			}
			if b := f.webBackend("be1"); !b.SlowStart {
				t.Errorf("be1 after undrain: %+v, want slow start", b)
			}
		}},
		{key: "control.slow_start_min", edit: func(s string) string {
			return edit(edit(s, "control", "slow_start", `"1m"`), "control", "slow_start_min", "0.5")
		}, want: func(t *testing.T, f *reloadFixture) {
			f.plane.Drain("web", "be1")
			f.plane.Undrain("web", "be1")
			if b := f.webBackend("be1"); b.Effective != WeightScale/2 {
				t.Errorf("be1 effective weight %d right after undrain, want %d (slow_start_min 0.5)", b.Effective, WeightScale/2)
			}
		}},
		{key: "control.drain_timeout", edit: set("control", "drain_timeout", `"5s"`), want: func(t *testing.T, f *reloadFixture) {
			f.plane.Drain("web", "be1")
			f.advance(6e9)
			f.plane.SetWeight("web", "be2", 1) // any rebuild
			if b := f.webBackend("be1"); !b.Down {
				t.Errorf("be1 drained 6s ago with drain_timeout 5s: %+v, want down", b)
			}
		}},
		// Behaviour: TestStallTimeoutZeroReportsOnly (a reload while a
		// worker is stalled withdraws or announces at once).
		{key: "control.stall_timeout", edit: set("control", "stall_timeout", `"0s"`), want: func(t *testing.T, f *reloadFixture) {
			if d := f.plane.Config().Control.StallTimeout; d != 0 {
				t.Errorf("stall_timeout in force %v after a reload set 0s", d)
			}
		}},

		{key: "health.kind", edit: set("health", "kind", `"tcp"`), want: func(t *testing.T, f *reloadFixture) {
			if h := f.webBackend("be1").Health; h != "unknown" {
				t.Errorf("web/be1 health %q after [health] kind = tcp, want unknown (not checked yet)", h)
			}
		}},
		{key: "health.port", edit: set("health", "port", "8080"), want: func(t *testing.T, f *reloadFixture) {
			ts, _ := healthTargets(f.plane.Config(), nil)
			if a := ts[checkKey(dataplane.BackendRef{VIP: "chk", Backend: "c1"})].ProbeAddr(); a.Port() != 8080 {
				t.Errorf("chk/c1 checked at %v, want port 8080", a)
			}
		}},
		{key: "health.through", edit: set("health", "through", `"tunnel"`), want: func(t *testing.T, f *reloadFixture) {
			// The checks go through the tunnel: bound to the snapshot's
			// check ports.
			ts, err := healthTargets(f.plane.Config(), f.shared.Services.Load())
			if err != nil {
				t.Fatal(err)
			}
			if tg, ok := ts[checkKey(dataplane.BackendRef{VIP: "chk", Backend: "c1"})]; !ok || tg.Config.Through != "tunnel" {
				t.Errorf("chk/c1 check %+v (found %v), want through the tunnel", tg.Config, ok)
			}
		}},
		{key: "health.path", edit: set("health", "path", `"/ready"`), want: healthChanged("Path", "/ready")},
		{key: "health.host", edit: set("health", "host", `"example.org"`), want: healthChanged("Host", "example.org")},
		{key: "health.expect", edit: set("health", "expect", `"204"`), want: healthChanged("ExpectStatus", "204")},
		{key: "health.interval", edit: set("health", "interval", `"7s"`), want: healthChanged("Interval", 7*time.Second)},
		{key: "health.timeout", edit: set("health", "timeout", `"1500ms"`), want: healthChanged("Timeout", 1500*time.Millisecond)},
		{key: "health.rise", edit: set("health", "rise", "4"), want: healthChanged("Rise", 4)},
		{key: "health.fall", edit: set("health", "fall", "5"), want: healthChanged("Fall", 5)},
		{key: "health.jitter", edit: set("health", "jitter", "0.3"), want: healthChanged("Jitter", 0.3)},
		{key: "health.flap_backoff", edit: set("health", "flap_backoff", `"3s"`), want: healthChanged("BackoffBase", 3*time.Second)},
		{key: "health.flap_backoff_max", edit: set("health", "flap_backoff_max", `"90s"`), want: healthChanged("BackoffMax", 90*time.Second)},
		// flap_window and the passive keys are read by their consumers
		// from the configuration in force (signals.go) at each use.
		{key: "health.flap_window", edit: set("health", "flap_window", "30"), want: configInForce(func(c *config.Config) any { return c.VIPs[3].Health.FlapWindow }, 30)},
		{key: "health.passive", edit: set("health", "passive", `"off"`), want: configInForce(func(c *config.Config) any { return c.VIPs[3].Health.Passive }, "off")},
		{key: "health.passive_window", edit: set("health", "passive_window", `"20s"`), want: configInForce(func(c *config.Config) any { return c.VIPs[3].Health.PassiveWindow }, 20*time.Second)},
		{key: "health.passive_min", edit: set("health", "passive_min", "5"), want: configInForce(func(c *config.Config) any { return c.VIPs[3].Health.PassiveMin }, 5)},
		{key: "health.passive_threshold", edit: set("health", "passive_threshold", "0.9"), want: configInForce(func(c *config.Config) any { return c.VIPs[3].Health.PassiveThreshold }, 0.9)},

		refused("admin.listen", `"127.0.0.1:9999"`),
		refused("admin.token", `"0123456789abcdef0123"`),
		refused("admin.token_file", fmt.Sprintf("%q", tokenFile)),
		{key: "admin.tls_cert", edit: func(s string) string {
			return edit(edit(s, "admin", "tls_cert", fmt.Sprintf("%q", tlsCert)), "admin", "tls_key", fmt.Sprintf("%q", tlsKey))
		}},
		{key: "admin.tls_key", edit: func(s string) string {
			return edit(edit(s, "admin", "tls_cert", fmt.Sprintf("%q", tlsCert)), "admin", "tls_key", fmt.Sprintf("%q", tlsKey))
		}},
		refused("admin.max_conns", "8"),

		refused("bgp.asn", "65101"),
		refused("bgp.router_id", `"192.0.2.11"`),
		refused("bgp.listen_port", "1790"),
		{key: "bgp.listen_addresses", edit: func(s string) string {
			return edit(edit(s, "bgp", "listen_port", "179"), "bgp", "listen_addresses", `["192.0.2.10"]`)
		}},
		refused("bgp.communities", `["65000:1"]`),
		refused("bgp.med", "5"),
		refused("bgp.next_hop_v4", `"192.0.2.10"`),
		refused("bgp.next_hop_v6", `"2001:db8::10"`),
		refused("bgp.drain_time", `"1s"`),
		{key: "bgp.neighbor", edit: replace(`peer_asn = 65000`, `peer_asn = 65001`)},
		{key: "bgp.vip", edit: replace(`[[vip]]
name = "web"`, `[[bgp.vip]]
prefix = "203.0.113.7/32"
med = 7

[[vip]]
name = "web"`)},

		{key: "vip.name", edit: replace(`name = "web"`, `name = "www"`), want: func(t *testing.T, f *reloadFixture) {
			if f.vip("www") == nil || f.vip("web") != nil {
				t.Error("the VIP was not renamed in the snapshot")
			}
		}},
		{key: "vip.address", edit: replace(`address = "203.0.113.7"`, `address = "203.0.113.77"`), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(netip.MustParseAddrPort("203.0.113.77:80"), 10); !s.tx {
				t.Error("the new VIP address is not forwarded")
			}
			if s := f.send(web, 10); s.tx {
				t.Error("the old VIP address is still forwarded")
			}
		}},
		{key: "vip.port", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 8080"), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(netip.MustParseAddrPort("203.0.113.7:8080"), 10); !s.tx {
				t.Error("the new VIP port is not forwarded")
			}
		}},
		{key: "vip.protocol", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nprotocol = \"udp\""), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || v.Proto != 17 {
				t.Errorf("web: %+v, want UDP", v)
			}
		}},
		{key: "vip.quic", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nprotocol = \"udp\"\nquic = true\nquic_cid_len = 12"), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || v.QUIC == nil {
				t.Errorf("web: %+v, want QUIC routing", v)
			}
		}},
		{key: "vip.quic_cid_len", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nprotocol = \"udp\"\nquic = true\nquic_cid_len = 12"), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || !quicLayout(v, func(c packet.QUICConfig) bool { return c.CIDLen == 12 }) {
				t.Errorf("web: %+v, want QUIC routing with 12-byte connection IDs", v)
			}
		}},
		{key: "vip.quic_server_id_len", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nprotocol = \"udp\"\nquic = true\nquic_server_id_len = 3"), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || !quicLayout(v, func(c packet.QUICConfig) bool { return c.ServerIDLen == 3 }) {
				t.Errorf("web: %+v, want QUIC routing with 3-byte server ids", v)
			}
		}},
		{key: "vip.quic_config_id", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nprotocol = \"udp\"\nquic = true\nquic_config_id = 1"), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || !quicLayout(v, func(c packet.QUICConfig) bool { return c.ConfigID == 1 }) {
				t.Errorf("web: %+v, want QUIC routing with config id 1", v)
			}
		}},
		{key: "vip.encap", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nencap = \"ipip\""), want: func(t *testing.T, f *reloadFixture) {
			if s := f.send(web, 10); s.outer4 == nil || s.outer4.Protocol != layers.IPProtocolIPv4 {
				t.Errorf("outer %v, want IPIP", s.outer4)
			}
		}},
		{key: "vip.table_size", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\ntable_size = 251"), want: func(t *testing.T, f *reloadFixture) {
			if n := f.status("web").TableSize; n != 251 {
				t.Errorf("table size %d, want 251", n)
			}
		}},
		{key: "vip.scheduler", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nscheduler = \"round-robin\""), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || v.Sched.String() != "round-robin" {
				t.Errorf("web scheduler %v, want round-robin", v.Sched)
			}
		}},
		{key: "vip.draws", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nscheduler = \"p2c\"\ndraws = 3"), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || v.SchedOpt.Draws != 3 {
				t.Errorf("web draws %v, want 3", v.SchedOpt)
			}
		}},
		{key: "vip.ewma_penalty", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nscheduler = \"peak-ewma\"\newma_penalty = \"2s\""), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || v.SchedOpt.Penalty != 2e9 {
				t.Errorf("web penalty %v, want 2s", v.SchedOpt)
			}
		}},
		{key: "vip.hash", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nhash = \"3-tuple\""), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || v.Hash.String() != "3-tuple" {
				t.Errorf("web hash %v, want 3-tuple", v.Hash)
			}
		}},
		{key: "vip.hash_prefix", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nhash = \"src-ip-prefix\"\nhash_prefix = 20"), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || v.Hash.String() != "src-ip-prefix /20 /48" {
				t.Errorf("web hash %v, want src-ip-prefix /20 /48", v.Hash)
			}
		}},
		{key: "vip.hash_prefix6", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nhash = \"src-ip-prefix\"\nhash_prefix6 = 56"), want: func(t *testing.T, f *reloadFixture) {
			if v := f.vip("web"); v == nil || v.Hash.String() != "src-ip-prefix /24 /56" {
				t.Errorf("web hash %v, want src-ip-prefix /24 /56", v.Hash)
			}
		}},
		{key: "vip.health", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\n  [vip.health]\n  kind = \"tcp\""), want: func(t *testing.T, f *reloadFixture) {
			if h := f.webBackend("be1").Health; h != "unknown" {
				t.Errorf("web/be1 health %q, want unknown (not checked yet)", h)
			}
		}},
		{key: "vip.second_chance", edit: replace("address = \"203.0.113.7\"\nport = 80", "address = \"203.0.113.7\"\nport = 80\nsecond_chance = true"),
			want: func(t *testing.T, f *reloadFixture) {
				if w, c := chanceOf(f, "web"), chanceOf(f, "chk"); w != 5*time.Minute || c != 0 {
					t.Errorf("second-chance windows web %v, chk %v; want 5m, 0", w, c)
				}
			}},
		{key: "vip.on_down", edit: replace("address = \"203.0.113.10\"\nport = 80", "address = \"203.0.113.10\"\nport = 80\non_down = \"move\""),
			want: func(t *testing.T, f *reloadFixture) {
				// move: a backend going down takes its tracked flows along.
				f.plane.SetHealth("chk", "c2", true, "test")
				f.plane.SetHealth("chk", "c1", false, "test")
				f.plane.SetWeight("chk", "c2", 1) // rebuild now
				for _, b := range f.status("chk").Backends {
					if b.Name == "c1" && !b.Down {
						t.Errorf("chk/c1 down under on_down = move: %+v, want Down (flows re-selected)", b)
					}
				}
			}},
		{key: "vip.backend", edit: replace(`address = "10.0.1.2"`, `address = "10.0.1.22"`), want: func(t *testing.T, f *reloadFixture) {
			for _, b := range f.status("web").Backends {
				if b.Name == "be2" && b.Address != "10.0.1.22" {
					t.Errorf("be2 at %s, want 10.0.1.22", b.Address)
				}
			}
		}},
	}
}

// gatewayMoved: after a reload changed a gateway, packets toward its family
// are dropped (never sent to the old gateway's MAC) until the resolver
// answers for the new gateway; an answer for the old one is ignored.
func gatewayMoved(t *testing.T, f *reloadFixture, dst netip.AddrPort, g4, g6 netip.Addr, mac func(sent) [6]byte) {
	t.Helper()
	select {
	case <-f.plane.GatewaysChanged():
	default:
		t.Error("the resolver was not told the gateways changed")
	}
	if a, b := f.plane.Gateways(); a != g4 || b != g6 {
		t.Errorf("gateways to resolve %v %v, want %v %v", a, b, g4, g6)
	}
	if s := f.send(dst, 10); s.tx {
		t.Errorf("sent to %v before the new gateway was resolved", macOf(mac(s)))
	}
	f.plane.SetNextHop(gw4, gw6, dataplane.NextHop{MAC4: newMAC2, MAC6: newMAC2, Has4: true, Has6: true}) // a late answer for the old gateways
	if s := f.send(dst, 10); s.tx {
		t.Errorf("sent to %v: the old gateway's answer was taken", macOf(mac(s)))
	}
	f.plane.SetNextHop(g4, g6, dataplane.NextHop{MAC4: newMAC, MAC6: newMAC, Has4: true, Has6: true})
	if s := f.send(dst, 10); !s.tx || mac(s) != newMAC {
		t.Errorf("after resolution: tx %v, want Ethernet destination %v", s.tx, net.HardwareAddr(newMAC[:]))
	}
}

// TestReloadEveryKey: a reload either applies a changed key, atomically
// with the tables, or refuses it by name; none is accepted and ignored.
func TestReloadEveryKey(t *testing.T) {
	tokenFile = filepath.Join(t.TempDir(), "token")
	tlsCert, tlsKey, _ = testtls.SelfSigned(t, t.TempDir(), "admin")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range reloadCases() {
		t.Run(c.key, func(t *testing.T) {
			f := newReloadFixture(t)
			cfg, err := config.Parse([]byte(c.edit(reloadBase)), "test.toml")
			if err != nil {
				t.Fatalf("the test's configuration: %v", err)
			}
			if changed := changedKeys(f.plane.Config(), cfg); !contains(changed, c.key) && !contains(changed, section(c.key)) {
				t.Fatalf("the edit changed %v, not %s", changed, c.key)
			}
			before := f.plane.Config()
			gen := f.shared.Services.Load().Gen
			err = f.plane.Apply(cfg)
			if c.want == nil {
				if err == nil || !errors.Is(err, ErrNeedsRestart) || !strings.Contains(err.Error(), c.key) {
					t.Fatalf("reload changing %s: err %v, want it refused by name", c.key, err)
				}
				if f.plane.Config() != before || f.shared.Services.Load().Gen != gen {
					t.Error("a refused reload changed the configuration in force or the snapshot")
				}
				if s := f.send(web, 10); !s.tx || [6]byte(s.eth.DstMAC) != gwMAC4 {
					t.Error("forwarding changed after a refused reload")
				}
				return
			}
			if err != nil {
				t.Fatalf("reload changing %s: %v", c.key, err)
			}
			c.want(t, f)
		})
	}
}

// TestReloadCasesCoverEveryKey: every key of the configuration has a
// reload case, so a key added later without a decision fails here (and is
// refused by reloadable until it has one).
func TestReloadCasesCoverEveryKey(t *testing.T) {
	have := map[string]bool{}
	for _, c := range reloadCases() {
		have[c.key] = true
	}
	var missing []string
	for _, k := range allKeys() {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("keys without a reload case: %v", missing)
	}
}

// quicLayout reports whether v routes QUIC by a layout ok accepts.
func quicLayout(v *dataplane.VIP, ok func(packet.QUICConfig) bool) bool {
	c, on := v.QUICLayout()
	return on && ok(c)
}

// allKeys lists "section.key" for every key of config.Config (the keys of
// [bgp] and of [[vip]] one level down).
func allKeys() []string {
	var out []string
	t := reflect.TypeOf(config.Config{})
	for i := 0; i < t.NumField(); i++ {
		sec := tomlName(t.Field(i))
		if sec == "" {
			continue
		}
		ft := t.Field(i).Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		out = append(out, keysOf(sec, ft)...)
	}
	return out
}

// keysOf lists "sec.key" for the keys of struct type t, reading an
// embedded struct's keys as the section's own, as the decoder and
// changedKeys (eachKey) do: [health]'s check keys are package health's
// Config, [dataplane]'s tunnel keys package encap's.
func keysOf(sec string, t reflect.Type) []string {
	var out []string
	for j := 0; j < t.NumField(); j++ {
		f := t.Field(j)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("toml") == "" {
			out = append(out, keysOf(sec, f.Type)...)
			continue
		}
		if k := tomlName(f); k != "" {
			out = append(out, sec+"."+k)
		}
	}
	return out
}

func contains(s []string, k string) bool {
	for _, x := range s {
		if x == k {
			return true
		}
	}
	return false
}

func macOf(m [6]byte) net.HardwareAddr { return net.HardwareAddr(m[:]) }

// TestReloadIsOneSwap: while the worker forwards, a reload changes the
// outer TTL, the next hop and every backend address of a VIP. Each packet
// shows all of the old state or all of the new one, never a mix: the
// tables, the encapsulator and the next hop are published together.
func TestReloadIsOneSwap(t *testing.T) {
	f := newReloadFixture(t)
	toml := edit(edit(reloadBase, "dataplane", "ttl", "9"), "dataplane", "next_hop_mac", `"02:00:00:00:00:99"`)
	toml = strings.Replace(strings.Replace(toml, `address = "10.0.1.1"`, `address = "10.0.1.11"`, 1), `address = "10.0.1.2"`, `address = "10.0.1.12"`, 1)
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	type state struct {
		ttl uint8
		mac [6]byte
		dst string
	}
	results := make(chan state, 1024)
	stop := make(chan struct{})
	go func() {
		defer close(results)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := f.send(web, 10)
			if !s.tx || s.outer4 == nil {
				results <- state{}
				continue
			}
			results <- state{s.outer4.TTL, [6]byte(s.eth.DstMAC), s.outer4.DstIP.String()}
		}
	}()
	applied := make(chan error, 1)
	old, cur := 0, 0
	deadline := time.Now().Add(20 * time.Second)
	for r := range results {
		switch {
		case r.ttl == 64 && r.mac == gwMAC4 && (r.dst == "10.0.1.1" || r.dst == "10.0.1.2"):
			old++
			if old == 20 { // forwarding under the old state: reload now
				go func() { applied <- f.plane.Apply(cfg) }()
			}
		case r.ttl == 9 && r.mac == newMAC && (r.dst == "10.0.1.11" || r.dst == "10.0.1.12"):
			cur++
		default:
			t.Errorf("a packet with a mix of states: TTL %d, Ethernet destination %v, backend %s", r.ttl, macOf(r.mac), r.dst)
		}
		if cur >= 20 || time.Now().After(deadline) {
			close(stop)
			for range results {
			}
			break
		}
	}
	if old < 20 {
		t.Fatalf("%d packets under the old state before the deadline: the reload never ran", old)
	}
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if cur < 20 {
		t.Errorf("%d packets under the new state before the deadline, want 20", cur)
	}
}

// chanceOf is the second-chance window of the VIP name in the snapshot in
// force.
func chanceOf(f *reloadFixture, name string) time.Duration {
	for _, v := range f.shared.Services.Load().VIPs {
		if v != nil && v.Name == name {
			return v.SecondChance
		}
	}
	return -1
}

// TestUndrainOfConfigDrainLasts: an API undrain of a backend the config
// drains lasts through a reload that leaves its drain as it was (as a
// weight override does); a reload that changes the drain (off, then on
// again) drains it as written.
func TestUndrainOfConfigDrainLasts(t *testing.T) {
	base := configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).VIP("web", configtest.Web, 80).
		Backend("be1", "10.0.1.1").Backend("be2", "10.0.1.2", "drain = true")
	f := newFixture(t, base.String())
	drained := func() bool {
		for _, b := range f.plane.Status(false).VIPs[0].Backends {
			if b.Name == "be2" {
				return b.Drained
			}
		}
		t.Fatal("no be2")
		return false
	}
	if !drained() {
		t.Fatal("be2 not drained by its configuration")
	}
	if err := f.plane.Undrain("web", "be2"); err != nil {
		t.Fatal(err)
	}
	f.apply(base.Backend("be3", "10.0.1.3").String()) // drain = true unchanged
	if drained() {
		t.Error("a reload that left be2's drain as it was drained it again")
	}
	f.apply(configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).VIP("web", configtest.Web, 80).
		Backend("be1", "10.0.1.1").Backend("be2", "10.0.1.2").String())
	f.apply(base.String())
	if !drained() {
		t.Error("a reload that wrote drain = true again left be2 undrained")
	}
}

// TestAPIChanges: the drains, undrains and weights made through the API
// that the config does not have are listed (what a restart loses), and
// no longer once the config says the same.
func TestAPIChanges(t *testing.T) {
	cfg := func(be2, be3 string) string {
		return configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).VIP("web", configtest.Web, 80).
			Backend("be1", "10.0.1.1").Backend("be2", "10.0.1.2", be2).Backend("be3", "10.0.1.3", be3).String()
	}
	f := newFixture(t, cfg("drain = true", "weight = 3"))
	if got := f.plane.APIChanges(); len(got) != 0 {
		t.Fatalf("fresh from the config: %q", got)
	}
	for _, err := range []error{f.plane.Drain("web", "be1"), f.plane.Undrain("web", "be2"), f.plane.SetWeight("web", "be3", 1)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"web/be1: drained", "web/be2: undrained", "web/be3: weight 1, the config's 3"}
	if got := f.plane.APIChanges(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the API's changes: %q, want %q", got, want)
	}
	if err := f.plane.SetWeight("web", "be3", 3); err != nil {
		t.Fatal(err)
	}
	f.apply(cfg("", "weight = 3")) // be2's drain off, as the API left it
	if got := f.plane.APIChanges(); !reflect.DeepEqual(got, want[:1]) {
		t.Errorf("once the config and the API agree on be2 and be3: %q, want %q", got, want[:1])
	}
}
