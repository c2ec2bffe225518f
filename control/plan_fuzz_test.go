package control

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// planConfig writes a configuration from plan's bytes: the values at and
// past every limit of the keys that shape the tables (families, encap
// kinds, schedulers, hash fields, table sizes, weights, drains, QUIC ids,
// second chance, checks through the tunnel), few enough VIPs and
// backends that Parse accepts many of them.
func planConfig(plan []byte) string {
	i := 0
	next := func(n int) int {
		if i >= len(plan) {
			return 0
		}
		i++
		return int(plan[i-1]) % n
	}
	pick := func(xs ...string) string { return xs[next(len(xs))] }
	var b strings.Builder
	b.WriteString("[dataplane]\nport = \"net_ring0\"\nlb_ipv4 = \"192.0.2.10\"\nnext_hop_mac = \"02:00:00:00:00:fe\"\n")
	b.WriteString(pick("lb_ipv6 = \"2001:db8::10\"\n", "lb_ipv6 = \"2001:db8::10\"\n", ""))
	b.WriteString(pick("", "encap = \"gre\"\n", "encap = \"ipip\"\n", "encap = \"gue\"\n"))
	b.WriteString(pick("", "second_chance = true\n", "second_chance = false\n"))
	b.WriteString(pick("", "mtu = 576\n", "mtu = 1280\n", "mtu = 9000\n", "mtu = 65535\n"))
	b.WriteString("hash_key = \"000102030405060708090a0b0c0d0e0f\"\n")
	b.WriteString("[conntrack]\ncapacity = 4096\n")
	b.WriteString(pick("", "[control]\nslow_start = \"10s\"\n", "[control]\npanic_threshold = 1.0\n", "[control]\npanic_threshold = 0\n"))
	nv := 1 + next(3)
	for v := 0; v < nv; v++ {
		proto := pick("tcp", "udp")
		fmt.Fprintf(&b, "[[vip]]\nname = \"v%d\"\naddress = %q\nport = %s\nprotocol = %q\n", v,
			pick("203.0.113.7", "203.0.113.8", "2001:db8:7::7", "2001:db8:7::8"), pick("80", "443", "0", "53", "65535"), proto)
		schedKey := pick("", "", "scheduler = \"p2c\"\n", "scheduler = \"least-conn\"\n", "scheduler = \"peak-ewma\"\n", "scheduler = \"round-robin\"\n", "scheduler = \"random\"\n")
		b.WriteString(schedKey)
		b.WriteString(pick("", "table_size = 3\n", "table_size = 5\n", "table_size = 7\n", "table_size = 11\n", "table_size = 251\n", "table_size = 65537\n"))
		if schedKey == "" {
			b.WriteString(pick("", "hash = \"3-tuple\"\n", "hash = \"src-ip\"\n", "hash = \"src-ip-prefix\"\n", "hash = \"src-ip-prefix\"\nhash_prefix = 1\nhash_prefix6 = 128\n", "hash = \"src-ip-prefix\"\nhash_prefix = 32\nhash_prefix6 = 1\n"))
		}
		b.WriteString(pick("", "encap = \"gre\"\n", "encap = \"ipip\"\n", "encap = \"gue\"\n"))
		b.WriteString(pick("", "second_chance = true\n", "second_chance = false\n"))
		b.WriteString(pick("", "on_down = \"move\"\n"))
		quic := proto == "udp" && next(2) == 1
		if quic {
			b.WriteString("quic = true\n")
			b.WriteString(pick("", "quic_cid_len = 6\nquic_server_id_len = 1\n", "quic_cid_len = 20\nquic_server_id_len = 8\nquic_config_id = 2\n"))
		}
		switch next(4) {
		case 1:
			b.WriteString("  [vip.health]\n  kind = \"tcp\"\n  port = 8080\n")
		case 2:
			b.WriteString("  [vip.health]\n  kind = \"tcp\"\n  port = 8080\n  through = \"tunnel\"\n")
		}
		nb := next(7)
		for k := 0; k < nb; k++ {
			fmt.Fprintf(&b, "  [[vip.backend]]\n  name = \"b%d\"\n  address = %q\n", k, pick(fmt.Sprintf("10.0.1.%d", k+1), fmt.Sprintf("2001:db8:1::%d", k+1), "10.0.1.1"))
			b.WriteString(pick("", "  weight = 0\n", "  weight = 2\n", "  weight = 100\n", "  weight = 65535\n"))
			b.WriteString(pick("", "", "  drain = true\n"))
			if quic {
				b.WriteString(pick("", fmt.Sprintf("  quic_id = %d\n", k), "  quic_id = 0\n", "  quic_id = 255\n", "  quic_id = 65535\n"))
			}
		}
	}
	return b.String()
}

// FuzzConfigPlan: FuzzParseApply's invariants over configurations written
// from a plan, so that the values reach validation and the builds instead
// of TOML's syntax errors.
func FuzzConfigPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 1, 1, 0, 1, 0, 1, 2, 3, 1, 2, 1, 0, 2, 3, 1, 1, 2, 3, 1, 4, 2})
	f.Add([]byte{0, 0, 3, 0, 0, 2, 1, 1, 1, 2, 0, 0, 4, 1, 1, 1, 5, 0, 2, 0, 0, 0, 0, 1, 0, 1, 3, 0, 1, 2})
	log := slog.New(slog.DiscardHandler)
	base, err := config.Parse([]byte(baseConfig), "base.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, plan []byte) { checkConfig(t, planConfig(plan), base, log) })
}

// checkConfig asserts FuzzConfigPlan's invariants for the configuration
// data, with base as the configuration a running plane reloads from.
func checkConfig(t *testing.T, data string, base *config.Config, log *slog.Logger) {
	cfg, err := config.Parse([]byte(data), "f.toml")
	if err != nil {
		return
	}
	capTable := func(c *config.Config) {
		if c.Conntrack.Capacity > 1<<20 {
			c.Conntrack.Capacity = 1 << 20 // memory, not behaviour: New builds no table of it
		}
	}
	capTable(cfg)
	s1 := &dataplane.Shared{}
	p1, err := New(cfg, s1, nil, log)
	if err != nil {
		t.Fatalf("Parse accepted a config New refuses: %v\n%s", err, data)
	}
	if _, err := healthTargets(cfg, s1.Services.Load()); err != nil {
		t.Fatalf("Parse accepted a config whose health checks do not build: %v\n%s", err, data)
	}
	if _, err := EngineConfig(cfg); err != nil {
		t.Fatalf("Parse accepted a config whose engine settings fail: %v\n%s", err, data)
	}
	_ = EALArgs(cfg)
	if cfg.BGP != nil {
		if err := cfg.BGP.Validate(); err != nil {
			t.Fatalf("Parse accepted a config whose BGP speaker fails: %v\n%s", err, data)
		}
	}
	cfg2, _ := config.Parse([]byte(data), "f.toml")
	capTable(cfg2)
	s2 := &dataplane.Shared{}
	if _, err := New(cfg2, s2, nil, log); err != nil {
		t.Fatal(err)
	}
	t1 := tablesOf(s1.Services.Load())
	if !sameTables(t1, tablesOf(s2.Services.Load())) {
		t.Fatalf("two instances built different tables from one config\n%s", data)
	}
	enc, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cfg3, err := config.Parse([]byte(enc), "encoded")
	if err != nil {
		t.Fatalf("effective config rejected: %v\n--- input\n%s\n--- effective\n%s", err, data, enc)
	}
	if enc3, _ := cfg3.Encode(); enc3 != enc {
		t.Fatalf("the effective config is not stable\n--- first\n%s\n--- second\n%s", enc, enc3)
	}
	s3 := &dataplane.Shared{}
	if _, err := New(cfg3, s3, nil, log); err != nil {
		t.Fatalf("effective config does not build: %v\n%s", err, enc)
	}
	if !sameTables(t1, tablesOf(s3.Services.Load())) {
		t.Fatalf("the effective config builds other tables\n--- input\n%s\n--- effective\n%s", data, enc)
	}
	// Reloads: the running plane to its own effective form (no
	// change), a plane of base to it and back.
	if err := p1.Apply(cfg3); err != nil {
		t.Fatalf("reload to the same config failed: %v\n%s", err, data)
	}
	if !sameTables(t1, tablesOf(s1.Services.Load())) {
		t.Fatalf("a reload to the same config changed the tables\n%s", data)
	}
	pb, err := New(base, &dataplane.Shared{}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := pb.Apply(cfg); err != nil && !errors.Is(err, ErrNeedsRestart) {
		t.Fatalf("reload to a valid config failed: %v\n%s", err, data)
	}
	if err := pb.Apply(base); err != nil {
		t.Fatalf("reload back failed: %v\n%s", err, data)
	}
	// The plane running cfg reloads to base's services (with cfg's
	// restart-only settings: a reload may refuse it, never panic) and
	// back to cfg, which it ran: that must succeed.
	mix := *cfg3
	mix.VIPs, mix.Control, mix.Health = base.VIPs, base.Control, base.Health
	_ = p1.Apply(&mix)
	if err := p1.Apply(cfg3); err != nil {
		t.Fatalf("reload back to the config in force failed: %v\n%s", err, data)
	}
}

// FuzzReloadPlan: the fleet contract across a reload. An instance that ran
// configuration A and reloaded to B builds the same tables as one started
// with B (without slow start, whose ramps depend on when each backend
// came up), and a reload it refuses leaves A's tables in force.
func FuzzReloadPlan(f *testing.F) {
	f.Add([]byte{}, []byte{1, 1, 1, 1})
	f.Add([]byte{1, 1, 1, 1, 0, 1, 0, 1, 2, 3, 1, 2, 1, 0, 2, 3, 1, 1, 2, 3, 1, 4, 2}, []byte{1, 1, 1, 1, 0, 1, 0, 1, 2, 3, 1, 2, 1, 0, 2, 3, 1, 1, 2, 3, 1, 5, 2})
	log := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, planA, planB []byte) { checkReload(t, planConfig(planA), planConfig(planB), log) })
}

func checkReload(t *testing.T, a, b string, log *slog.Logger) {
	cfgA, err := config.Parse([]byte(a), "a.toml")
	if err != nil {
		return
	}
	cfgB, err := config.Parse([]byte(b), "b.toml")
	if err != nil {
		return
	}
	sa := &dataplane.Shared{}
	pa, err := New(cfgA, sa, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	before := tablesOf(sa.Services.Load())
	err = pa.Apply(cfgB)
	if err != nil {
		if !errors.Is(err, ErrNeedsRestart) {
			t.Fatalf("reload refused: %v\n--- a\n%s\n--- b\n%s", err, a, b)
		}
		if !sameTables(before, tablesOf(sa.Services.Load())) {
			t.Fatalf("a refused reload changed the tables")
		}
		return
	}
	if cfgB.Control.SlowStart > 0 {
		return
	}
	for i := range cfgB.VIPs {
		if healthEnabled(cfgB, &cfgB.VIPs[i]) {
			return // a backend a reload adds starts down until checked (README)
		}
	}
	sb := &dataplane.Shared{}
	if _, err := New(cfgB, sb, nil, log); err != nil {
		t.Fatal(err)
	}
	ta, tb := tablesOf(sa.Services.Load()), tablesOf(sb.Services.Load())
	if !sameTables(ta, tb) {
		for k := range tb {
			if len(ta[k]) != len(tb[k]) {
				t.Logf("vip %s: %d slots after the reload, %d fresh", k, len(ta[k]), len(tb[k]))
				continue
			}
			n := 0
			for i := range ta[k] {
				if ta[k][i] != tb[k][i] {
					n++
				}
			}
			t.Logf("vip %s: %d of %d slots differ", k, n, len(tb[k]))
		}
		t.Fatalf("reloaded A to B: other tables than an instance started with B\n--- a\n%s\n--- b\n%s", a, b)
	}
}
