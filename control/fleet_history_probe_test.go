package control

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// Fleet contract probes: two instances with the same configuration and the
// same backend health must send every new flow to the same backend,
// whatever each one's history (reloads, flaps, drains) and whatever the
// configuration's spelling (order, defaulted names, address forms).

const probeFlows = 100000

// fleetProbeBase is [dataplane] (IPv4 and IPv6), conntrack, control and
// an optional [health], then the VIP sections vips.
func fleetProbeBase(health bool, vips string) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, `lb_ipv6 = "2001:db8:ff::10"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "10s"`, `drain_timeout = "30s"`)
	if health {
		b.Section("health", `kind = "tcp"`)
	}
	return b.String() + vips
}

// The final configuration X: three VIPs, weighted backends, named and
// defaulted names, IPv4 and IPv6, a src-ip VIP.
const vipsX = `
[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
  [[vip.backend]]
  name = "be1"
  address = "10.0.1.1"
  weight = 1
  [[vip.backend]]
  name = "be2"
  address = "10.0.1.2"
  weight = 2
  [[vip.backend]]
  name = "be3"
  address = "10.0.1.3"
  weight = 3
  [[vip.backend]]
  name = "be4"
  address = "10.0.1.4"
  [[vip.backend]]
  name = "be5"
  address = "2001:db8:1::5"

[[vip]]
name = "api"
address = "203.0.113.8"
port = 443
hash = "src-ip"
  [[vip.backend]]
  address = "10.0.2.1"
  [[vip.backend]]
  address = "10.0.2.2"
  weight = 4
  [[vip.backend]]
  address = "10.0.2.3"

[[vip]]
address = "2001:db8:ffff::7"
port = 80
table_size = 4099
  [[vip.backend]]
  address = "2001:db8:2::1"
  [[vip.backend]]
  address = "2001:db8:2::2"
  [[vip.backend]]
  address = "10.0.3.3"
`

// W: where B starts. web has other backends (be2 elsewhere, be4 absent, a
// be9), api is IPv6-less with a 5-tuple hash, an extra VIP "old".
const vipsW = `
[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
  [[vip.backend]]
  name = "be1"
  address = "10.0.1.1"
  weight = 7
  [[vip.backend]]
  name = "be2"
  address = "10.0.1.22"
  [[vip.backend]]
  name = "be3"
  address = "10.0.1.3"
  drain = true
  [[vip.backend]]
  name = "be9"
  address = "10.0.1.9"

[[vip]]
name = "api"
address = "203.0.113.8"
port = 443
  [[vip.backend]]
  address = "10.0.2.1"
  [[vip.backend]]
  address = "10.0.2.9"

[[vip]]
name = "old"
address = "203.0.113.9"
port = 25
  [[vip.backend]]
  address = "10.0.9.1"
`

// Y: in between. web renamed "www" (its backends' state is keyed by the
// VIP's name), be1 renamed "first", be3 reweighted, api removed, the IPv6
// VIP present under another name with a 3-tuple hash.
const vipsY = `
[[vip]]
name = "www"
address = "203.0.113.7"
port = 80
  [[vip.backend]]
  name = "first"
  address = "10.0.1.1"
  [[vip.backend]]
  name = "be2"
  address = "10.0.1.2"
  weight = 9
  [[vip.backend]]
  name = "be3"
  address = "10.0.1.3"
  weight = 5
  [[vip.backend]]
  name = "be4"
  address = "10.0.1.4"

[[vip]]
name = "six"
address = "2001:db8:ffff::7"
port = 80
hash = "3-tuple"
table_size = 4099
  [[vip.backend]]
  address = "2001:db8:2::2"
  [[vip.backend]]
  address = "10.0.3.3"
  weight = 3

[[vip]]
name = "old"
address = "203.0.113.9"
port = 25
  [[vip.backend]]
  address = "10.0.9.1"
`

// compareChoices compares two snapshots VIP by VIP (matched by address,
// port and protocol): the table slot by slot (the backend's address and
// Maglev key) and the backends probeFlows random new flows per VIP pick
// through the fleet hash. It returns the number of flows whose backend
// differs, per VIP name.
func compareChoices(t *testing.T, key flow.Key, a, b *dataplane.Services) map[string]int {
	t.Helper()
	h := flow.NewHasher(key)
	diff := map[string]int{}
	n := 0
	for _, va := range a.VIPs {
		if va == nil {
			continue
		}
		n++
		vb := b.LookupVIP(va.Addr, va.Port, va.Proto)
		if vb == nil {
			t.Errorf("vip %s: missing on the other instance", va.Name)
			continue
		}
		if va.Hash != vb.Hash {
			t.Errorf("vip %s: hash fields %+v vs %+v", va.Name, va.Hash, vb.Hash)
		}
		if (va.Table == nil) != (vb.Table == nil) {
			t.Errorf("vip %s: table present %v vs %v", va.Name, va.Table != nil, vb.Table != nil)
			continue
		}
		if va.Table == nil {
			continue
		}
		slots := 0
		for s := range va.Table.Size() {
			x, y := a.Backends[va.Backends[va.Table.Slot(s)]], b.Backends[vb.Backends[vb.Table.Slot(s)]]
			if x.Addr != y.Addr || va.Table.Backend(va.Table.Slot(s)).Key != vb.Table.Backend(vb.Table.Slot(s)).Key {
				slots++
			}
		}
		if slots > 0 {
			t.Logf("vip %s: %d of %d slots differ", va.Name, slots, va.Table.Size())
		}
		rng := rand.New(rand.NewPCG(uint64(va.Port), 42))
		for range probeFlows {
			var tu flow.Tuple
			if va.Addr.Is6() {
				src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xcc, byte(rng.Uint32()), 0, 0, byte(rng.Uint32()), byte(rng.Uint32()), 0, 0, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())})
				tu.Src, tu.V6 = src.As16(), true
			} else {
				tu.Src = netip.AddrFrom4([4]byte{198, 51, byte(rng.Uint32()), byte(rng.Uint32())}).As16()
			}
			tu.Dst = va.Addr.As16()
			tu.SrcPort, tu.DstPort, tu.Proto = uint16(1024+rng.IntN(64000)), va.Port, va.Proto
			x := a.Backends[va.Backends[va.Table.Lookup(h.HashFields(&tu, va.Hash))]]
			y := b.Backends[vb.Backends[vb.Table.Lookup(h.HashFields(&tu, vb.Hash))]]
			if x.Addr != y.Addr {
				diff[va.Name]++
			}
		}
	}
	if n == 0 {
		t.Fatal("no VIP compared")
	}
	return diff
}

func fixtureKey(t *testing.T, f *fixture) flow.Key {
	k, err := flow.ParseKey(f.plane.Config().Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (f *fixture) setHealthOf(vip, name string, up bool) {
	f.t.Helper()
	if err := f.plane.SetHealth(vip, name, up, "probe"); err != nil {
		f.t.Fatal(err)
	}
	f.rebuild()
}

// allUp gives every backend of the configuration in force the verdict up.
func (f *fixture) allUp() {
	f.t.Helper()
	for _, v := range f.plane.Config().VIPs {
		for _, b := range v.Backends {
			f.setHealthOf(v.Name, b.Name, true)
		}
	}
}

// Instance A starts on X; instance B starts on W, reloads through Y and
// then X with flaps, drains, a weight override and a drain left over by
// the configuration, ending in the same health as A. Once slow start is
// over, every slot and every one of 100,000 new flows per VIP agree.
func TestFleetHistoryProbe(t *testing.T) {
	for _, checked := range []bool{false, true} {
		t.Run(fmt.Sprintf("checked=%v", checked), func(t *testing.T) {
			a := newFixture(t, fleetProbeBase(checked, vipsX))
			b := newFixture(t, fleetProbeBase(checked, vipsW))
			if checked {
				a.allUp()
				b.allUp()
				b.setHealthOf("web", "be1", false)
				b.setHealthOf("web", "be2", false) // both down: panic threshold 0.5 of 3 live
			}
			if err := b.plane.Drain("web", "be9"); err != nil {
				t.Fatal(err)
			}
			if err := b.plane.SetWeight("web", "be1", 3); err != nil {
				t.Fatal(err)
			}
			b.advance(3 * time.Second)
			b.apply(fleetProbeBase(checked, vipsY))
			if checked {
				b.allUp()
				b.setHealthOf("six", "10.0.3.3", false)
				b.setHealthOf("six", "10.0.3.3", true)
			}
			if err := b.plane.Drain("www", "be4"); err != nil {
				t.Fatal(err)
			}
			b.advance(4 * time.Second)
			b.apply(fleetProbeBase(checked, vipsX))
			if checked {
				b.allUp()
				for range 3 { // flaps, ending up
					b.setHealthOf("web", "be3", false)
					b.advance(time.Second)
					b.setHealthOf("web", "be3", true)
				}
			}
			if err := b.plane.Drain("web", "be2"); err != nil {
				t.Fatal(err)
			}
			if err := b.plane.Undrain("web", "be2"); err != nil {
				t.Fatal(err)
			}
			// The drain of www's be4 lived through the rename back to web
			// (carryRenamedVIPs): the operator ends it, as A never had it.
			if !fhDrained(b, "web", "be4") {
				t.Errorf("web/be4: the drain made under the name www was lost in the rename back")
			}
			if err := b.plane.Undrain("web", "be4"); err != nil {
				t.Fatal(err)
			}
			// Slow start (10s) over on both.
			a.advance(time.Minute)
			b.advance(time.Minute)
			a.rebuild()
			b.rebuild()
			sa, sb := a.shared.Services.Load(), b.shared.Services.Load()
			diff := compareChoices(t, fixtureKey(t, a), sa, sb)
			for v, n := range diff {
				t.Errorf("vip %s: %d of %d new flows pick another backend on the instance with a history", v, n, probeFlows)
			}
			// The backends' ids differ between the two (ids are local);
			// the prepared tunnel header must not.
			ids := 0
			for _, x := range sa.Backends {
				if x == nil {
					continue
				}
				for _, y := range sb.Backends {
					if y == nil || y.Addr != x.Addr || sa.VIPs[x.VIP].Key != sb.VIPs[y.VIP].Key {
						continue
					}
					if x.ID != y.ID {
						ids++
					}
					if !reflect.DeepEqual(x.Hdr, y.Hdr) || x.Target != y.Target || x.Weight != y.Weight || x.Down != y.Down {
						t.Errorf("backend %s of %s: header/target/weight/down differ: %d/%v vs %d/%v", x.Name, sa.VIPs[x.VIP].Name, x.Weight, x.Down, y.Weight, y.Down)
					}
				}
			}
			t.Logf("backends with another id on B: %d", ids)
			if pa, pb := a.plane.Panicked(), b.plane.Panicked(); !reflect.DeepEqual(pa, pb) {
				t.Errorf("panic mode: %v vs %v", pa, pb)
			}
		})
	}
}

// buildFrom parses vips under the probe's base and builds the snapshot a
// fresh instance publishes.
func buildFrom(t *testing.T, vips string, extra ...string) *dataplane.Services {
	t.Helper()
	toml := fleetProbeBase(false, vips)
	for i := 0; i+1 < len(extra); i += 2 {
		toml = strings.Replace(toml, extra[i], extra[i+1], 1)
	}
	cfg, err := config.Parse([]byte(toml), "probe.toml")
	if err != nil {
		t.Fatal(err)
	}
	nh, _ := StaticNextHop(cfg)
	s, err := BuildServices(cfg, nil, nil, nh)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func probeKey(t *testing.T) flow.Key {
	k, err := flow.ParseKey(configtest.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// reverseBlocks reverses the order of the blocks of s that start with sep.
func reverseBlocks(s, sep string) string {
	i := strings.Index(s, sep)
	head, parts := s[:i], strings.Split(s[i+len(sep):], sep)
	var b strings.Builder
	b.WriteString(head)
	for j := len(parts) - 1; j >= 0; j-- {
		p := parts[j]
		if !strings.HasSuffix(p, "\n") {
			p += "\n"
		}
		b.WriteString(sep + p)
	}
	return b.String()
}

// The same configuration written differently must give the same choices.
func TestFleetSpellingProbe(t *testing.T) {
	key := probeKey(t)
	ref := buildFrom(t, vipsX)
	// Backends reversed within each VIP, and VIPs reversed.
	var revB strings.Builder
	for i, v := range strings.Split(vipsX, "\n[[vip]]\n") {
		if i > 0 {
			revB.WriteString("\n[[vip]]\n")
		}
		if strings.Contains(v, "  [[vip.backend]]\n") {
			v = reverseBlocks(v, "  [[vip.backend]]\n")
		}
		revB.WriteString(v)
	}
	revV := reverseBlocks(vipsX, "\n[[vip]]\n")
	cases := []struct {
		name    string
		vips    string
		extra   []string
		sameFor bool // the contract says the choices must agree
	}{
		{"backends reversed", revB.String(), nil, true},
		{"vips reversed", revV, nil, true},
		{"conntrack capacity and lcores", vipsX, []string{"capacity = 65536", "capacity = 4096"}, true},
		{"upper-case ipv6 addresses", strings.ReplaceAll(vipsX, `address = "2001:db8:2::`, `address = "2001:DB8:2:0::`), nil, true},
		{"explicit names equal to the canonical address", strings.Replace(vipsX, `  [[vip.backend]]
  address = "10.0.2.1"`, `  [[vip.backend]]
  name = "10.0.2.1"
  address = "10.0.2.1"`, 1), nil, true},
		// A name that reads as the backend's own address, written in
		// another form: accepted by validation as "this backend's own
		// address" (nameIsAddress), and README says the name defaults to
		// the address.
		{"explicit name = ipv4-mapped own address", strings.Replace(vipsX, `  [[vip.backend]]
  address = "10.0.2.1"`, `  [[vip.backend]]
  name = "::ffff:10.0.2.1"
  address = "10.0.2.1"`, 1), nil, true},
		{"explicit name = upper-case own ipv6 address", strings.Replace(vipsX, `  [[vip.backend]]
  address = "2001:db8:2::1"`, `  [[vip.backend]]
  name = "2001:DB8:2::1"
  address = "2001:db8:2::1"`, 1), nil, true},
		{"explicit name = ipv6 own address with zeros written", strings.Replace(vipsX, `  [[vip.backend]]
  address = "2001:db8:2::1"`, `  [[vip.backend]]
  name = "2001:0db8:2:0:0:0:0:1"
  address = "2001:db8:2::1"`, 1), nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := buildFrom(t, c.vips, c.extra...)
			diff := compareChoices(t, key, ref, got)
			for v, n := range diff {
				t.Errorf("vip %s: %d of %d new flows pick another backend", v, n, probeFlows)
			}
		})
	}
	// IPv4 with leading zeros is refused (netip), not read as octal.
	if _, err := config.Parse([]byte(fleetProbeBase(false, strings.Replace(vipsX, `"10.0.2.1"`, `"010.0.2.1"`, 1))), "p.toml"); err == nil {
		t.Error("a backend address with a leading zero was accepted")
	}
}

// Weights scaled by a common factor: documented as relative, do they build
// the same table? Reported, not asserted as a contract.
func TestFleetScaledWeightsProbe(t *testing.T) {
	key := probeKey(t)
	ref := buildFrom(t, vipsX)
	for _, k := range []int{2, 3, 100} {
		cfg, err := config.Parse([]byte(fleetProbeBase(false, vipsX)), "probe.toml")
		if err != nil {
			t.Fatal(err)
		}
		for i := range cfg.VIPs {
			for j := range cfg.VIPs[i].Backends {
				w := *cfg.VIPs[i].Backends[j].Weight * k
				cfg.VIPs[i].Backends[j].Weight = &w
			}
		}
		nh, _ := StaticNextHop(cfg)
		got, err := BuildServices(cfg, nil, nil, nh)
		if err != nil {
			t.Fatal(err)
		}
		for v, n := range compareChoices(t, key, ref, got) {
			t.Logf("weights x%d: vip %s: %d of %d new flows pick another backend", k, v, n, probeFlows)
		}
	}
}

// An instance that restarts mid slow start builds the full-weight table at
// once while the others ramp (README, "Slow start and the fleet": by
// design, documented). Reported: how many flows differ at each step, and
// that they agree once the ramp is over.
func TestFleetRestartMidSlowStartProbe(t *testing.T) {
	x := fleetProbeBase(false, vipsX)
	w := strings.Replace(x, "  [[vip.backend]]\n  name = \"be4\"\n  address = \"10.0.1.4\"\n", "", 1)
	a := newFixture(t, w)
	a.apply(x) // be4 added: slow start from now
	a.advance(5 * time.Second)
	b := newFixture(t, x) // restarted mid-ramp
	key := fixtureKey(t, a)
	for step := range 3 {
		a.rebuild()
		b.rebuild()
		d := compareChoices(t, key, a.shared.Services.Load(), b.shared.Services.Load())
		t.Logf("t=%ds into the ramp: web differs for %d of %d flows", 5+5*step, d["web"], probeFlows)
		if step == 2 && len(d) != 0 {
			t.Errorf("after the ramp: %v", d)
		}
		a.advance(5 * time.Second)
		b.advance(5 * time.Second)
	}
}

// fhDrained reports whether backend be of VIP vip is drained on f.
func fhDrained(f *fixture, vip, be string) bool {
	for _, v := range f.plane.Status(true).VIPs {
		for _, b := range v.Backends {
			if v.Name == vip && b.Name == be {
				return b.Drained
			}
		}
	}
	f.t.Fatalf("no backend %s of %s", be, vip)
	return false
}
