package control

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
)

// The fleet contract across reloads: an instance that reached a
// configuration through any sequence of reloads runs what a fresh
// instance started with it runs: the same snapshot (every VIP, table slot
// by slot, backend, tunnel setting, punt budget, next hop) and the same
// bytes on the wire for the same new flows. The configurations leave out
// what a reload keeps by design (health verdicts, slow start ramps: no
// checks, slow_start = 0); the previous table of the second chance and
// ids are the instance's own history and are not compared.

// propVIP is one of the VIP keys the generated configurations use.
type propVIP struct {
	addr  string
	port  int
	proto string
}

var propVIPs = []propVIP{
	{"203.0.113.7", 80, "tcp"},
	{"203.0.113.7", 443, "tcp"},
	{"203.0.113.8", 0, "tcp"},
	{"203.0.113.9", 53, "udp"},
}

// propConfig is a random configuration: every key a reload applies varies
// over a few values, the rest is fixed.
func propConfig(rng *rand.Rand) string {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	dp := []string{`lb_ipv6 = "2001:db8:ff::10"`}
	dp = append(dp, pick(`next_hop_mac = "02:00:00:00:00:fe"`, `next_hop_mac = "02:00:00:00:00:fd"`))
	for _, k := range [][]string{
		{``, `encap = "gre"`, `encap = "ipip"`, `encap = "gue"`},
		{``, `ttl = 32`, `ttl = 200`},
		{``, `df = "set"`, `df = "clear"`},
		{``, `mtu = 9000`, `mtu = 1400`},
		{``, `gue_port = 7000`},
		{``, `second_chance = true`, `second_chance = false`},
		{``, `second_chance_window = "1m"`},
	} {
		if s := pick(k...); s != "" {
			dp = append(dp, s)
		}
	}
	b := configtest.New().Dataplane(dp...).
		Section("conntrack", "capacity = 4096").
		Section("control", `slow_start = "0s"`, `drain_timeout = "0s"`)
	if s := pick(``, `other = 500`, `neighbour = 300`); s != "" {
		b.Section("dataplane.punt", s)
	}
	names := rng.Perm(len(propVIPs))
	n := 0
	for i, pv := range propVIPs {
		if rng.IntN(4) == 0 {
			continue
		}
		n++
		keys := []string{fmt.Sprintf("protocol = %q", pv.proto)}
		add := func(xs ...string) {
			if s := pick(xs...); s != "" {
				keys = append(keys, s)
			}
		}
		add(``, `encap = "gre"`, `encap = "ipip"`, `encap = "gue"`)
		add(``, `table_size = 251`, `table_size = 4099`)
		add(``, `second_chance = true`, `second_chance = false`)
		add(``, `on_down = "move"`)
		quic := pv.proto == "udp" && rng.IntN(2) == 0
		if quic {
			keys = append(keys, "quic = true")
			add(``, `quic_cid_len = 12`)
		}
		switch rng.IntN(5) {
		case 0:
			keys = append(keys, `hash = "3-tuple"`)
		case 1:
			keys = append(keys, `hash = "src-ip"`)
		case 2:
			keys = append(keys, `hash = "src-ip-prefix"`, pick(`hash_prefix = 16`, `hash_prefix = 24`))
		case 3:
			if !quic {
				keys = append(keys, `scheduler = "round-robin"`)
			}
		}
		name := pick(fmt.Sprintf("v%d", names[i]), fmt.Sprintf("n%d", i))
		b.VIP(name, pv.addr, pv.port, keys...)
		nb := 0
		for j := 1; j <= 5; j++ {
			if rng.IntN(3) == 0 {
				continue
			}
			nb++
			host := j
			if rng.IntN(4) == 0 {
				host += 100 // the same name at another address
			}
			addr := fmt.Sprintf("10.0.%d.%d", i+1, host)
			if j == 5 {
				addr = fmt.Sprintf("2001:db8:%d::%d", i+1, host)
			}
			bk := []string{}
			if s := pick(``, `weight = 2`, `weight = 5`, `weight = 0`); s != "" {
				bk = append(bk, s)
			}
			if rng.IntN(6) == 0 {
				bk = append(bk, "drain = true")
			}
			if quic && rng.IntN(3) != 0 {
				bk = append(bk, fmt.Sprintf("quic_id = %d", j+10*rng.IntN(2)))
			}
			b.Backend(fmt.Sprintf("be%d", j), addr, bk...)
		}
		if nb == 0 {
			b.Backend("only", fmt.Sprintf("10.0.%d.99", i+1))
		}
	}
	if n == 0 {
		b.VIP("last", "203.0.113.20", 80).Backend("only", "10.0.9.9")
	}
	return b.String()
}

// describeSnapshot writes everything of s a configuration decides, by VIP
// key and backend name (not by id, which is the instance's history).
func describeSnapshot(s *dataplane.Services) string {
	var w strings.Builder
	fmt.Fprintf(&w, "enc %+v\nnexthop %+v\npunt %+v\n", s.Enc.Config(), s.NextHop, s.Punt())
	var vips []string
	for _, v := range s.VIPs {
		if v == nil {
			continue
		}
		var d strings.Builder
		q, hasQ := v.QUICLayout()
		fmt.Fprintf(&d, "vip %s name=%s encap=%v sched=%v opt=%+v hash=%+v quic=%v/%+v chance=%v htun=%v ramping=%v\n",
			v.Key, v.Name, v.Encap, v.Sched, v.SchedOpt, v.Hash, hasQ, q, v.SecondChance, v.HealthTunnel, v.Ramping)
		if v.Prev != nil {
			fmt.Fprintf(&d, "  prev window=%v\n", v.Prev.Window)
		}
		for _, id := range v.Members {
			b := s.Backends[id]
			fmt.Fprintf(&d, "  be %s %v w=%d cfg=%d down=%v unh=%v vipok=%v target=%v hdr=%x\n", b.Name, b.Addr, b.Weight, b.Config, b.Down, b.Unhealthy,
				b.VIP == v.ID, b.Target.Addr(), fmt.Sprintf("%+v", b.Hdr))
		}
		if v.Table != nil {
			fmt.Fprintf(&d, "  table size=%d:", v.Table.Size())
			h := 0
			for i := range v.Table.Size() {
				b := s.Backends[v.Backends[v.Table.Slot(i)]]
				h = h*31 + int(b.Addr.As16()[15]) + len(b.Name)
				if i < 8 {
					fmt.Fprintf(&d, " %s", b.Name)
				}
			}
			fmt.Fprintf(&d, " ... #%d\n", h)
		} else {
			d.WriteString("  no table\n")
		}
		if got := s.LookupVIP(v.Addr, v.Port, v.Proto); got != v {
			fmt.Fprintf(&d, "  lookup finds %v\n", got)
		}
		vips = append(vips, d.String())
	}
	sort.Strings(vips)
	w.WriteString(strings.Join(vips, ""))
	return w.String()
}

// propFrames are new flows to every VIP of cfg: SYNs (or datagrams) from
// several source ports.
func propFrames(t *testing.T, cfg *config.Config) [][]byte { return propFramesFrom(t, cfg, 1000) }

func propFramesFrom(t *testing.T, cfg *config.Config, first uint16) [][]byte {
	var out [][]byte
	for _, v := range cfg.VIPs {
		port := uint16(v.Port)
		if port == 0 {
			port = 8080
		}
		dst := netip.AddrPortFrom(v.Address.Addr, port)
		for sp := first; sp < first+40; sp++ {
			if v.Protocol == "udp" {
				out = append(out, dptest.UDP(t, sp, dst))
			} else {
				out = append(out, dptest.TCP(t, sp, dst, "S"))
			}
		}
	}
	return out
}

// forwardAll sends frames through a fresh worker on shared.
func forwardAll(t *testing.T, shared *dataplane.Shared, cfg *config.Config, frames [][]byte) []dptest.Result {
	l := newLcore(t, shared, cfg)
	out := make([]dptest.Result, len(frames))
	for i, f := range frames {
		out[i] = l.Send(f)
	}
	return out
}

func TestReloadSequenceMatchesFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 1))
	const sequences = 60
	bad := 0
	for seq := 0; seq < sequences && bad < 3; seq++ {
		steps := 2 + rng.IntN(4)
		tomls := make([]string, steps)
		for i := range tomls {
			for try := 0; try < 100; try++ {
				tomls[i] = propConfig(rng)
				if _, err := config.Parse([]byte(tomls[i]), "prop.toml"); err == nil {
					break
				}
			}
		}
		if rng.IntN(3) == 0 { // A -> B -> A
			tomls = append(tomls, tomls[0])
		}
		var cfgs []*config.Config
		ok := true
		for _, s := range tomls {
			c, err := config.Parse([]byte(s), "prop.toml")
			if err != nil {
				t.Logf("seq %d: generated config refused: %v", seq, err)
				ok = false
				break
			}
			cfgs = append(cfgs, c)
		}
		if !ok {
			continue
		}
		f := newFixture(t, tomls[0])
		applied := 1
		for k, c := range cfgs[1:] {
			f.advance(time.Minute)
			// The long-lived worker sees every snapshot (its caches).
			for _, fr := range propFramesFrom(t, cfgs[k], 2000) {
				f.lc.Send(fr)
			}
			if err := f.plane.Apply(c); err != nil {
				t.Errorf("seq %d step %d: reload refused: %v", seq, applied, err)
				ok = false
				break
			}
			applied++
		}
		if !ok {
			bad++
			continue
		}
		final := cfgs[len(cfgs)-1]
		fresh := newFixture(t, tomls[len(tomls)-1])
		a, b := describeSnapshot(f.shared.Services.Load()), describeSnapshot(fresh.shared.Services.Load())
		// The previous table is history; only its presence may differ.
		a = dropPrev(a)
		b = dropPrev(b)
		if a != b {
			bad++
			t.Errorf("seq %d: reloaded instance's snapshot differs from a fresh one's\n%s", seq, diffLines(a, b))
			for i, s := range tomls {
				t.Logf("seq %d config %d:\n%s", seq, i, s)
			}
			continue
		}
		frames := propFrames(t, final)
		ra, rb := forwardAll(t, f.shared, final, frames), forwardAll(t, fresh.shared, final, frames)
		// The reloaded instance's own worker, for flows it never saw.
		maglevOnly := *final
		maglevOnly.VIPs = nil
		for _, v := range final.VIPs {
			if v.Scheduler.String() == "maglev" {
				maglevOnly.VIPs = append(maglevOnly.VIPs, v)
			}
		}
		lf := propFramesFrom(t, &maglevOnly, 3000)
		for i, fr := range lf {
			x, y := f.lc.Send(fr), fresh.lc.Send(fr)
			if x.Verdict != y.Verdict || !bytes.Equal(x.Frame, y.Frame) {
				bad++
				t.Errorf("seq %d long-lived worker frame %d: reloaded %v %x, fresh %v %x", seq, i, x.Verdict, x.Frame, y.Verdict, y.Frame)
				break
			}
		}
		for i := range frames {
			if ra[i].Verdict != rb[i].Verdict || !bytes.Equal(ra[i].Frame, rb[i].Frame) {
				bad++
				t.Errorf("seq %d frame %d: reloaded %v %x, fresh %v %x", seq, i, ra[i].Verdict, ra[i].Frame, rb[i].Verdict, rb[i].Frame)
				break
			}
		}
	}
}

func dropPrev(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "  prev ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var d strings.Builder
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&d, "- reloaded: %s\n+ fresh:    %s\n", x, y)
		}
	}
	return d.String()
}
