package control

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// tablesOf is every VIP's Maglev table as the backend name of each slot,
// by VIP key: what the fleet contract says every instance builds alike.
func tablesOf(s *dataplane.Services) map[string][]string {
	out := map[string][]string{}
	for _, v := range s.VIPs {
		if v == nil {
			continue
		}
		var slots []string
		if v.Table != nil {
			for i := 0; i < v.Table.Size(); i++ {
				slots = append(slots, v.Table.Backend(v.Table.Slot(i)).Key)
			}
		}
		out[v.Name] = slots
	}
	return out
}

// FuzzParseApply: a configuration config.Parse accepts is one the daemon
// runs: control.New builds its first snapshot and health targets without
// an error or a panic (`fulcrum check` says "valid" only after Parse),
// two instances build the same tables from it (the fleet contract), its
// effective form (Encode, as `fulcrum check` prints it) builds those
// tables too, and a running plane can reload to it (or refuses it by
// name) and back without a panic.
func FuzzParseApply(f *testing.F) {
	files, _ := filepath.Glob("../examples/*.toml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(baseConfig))
	log := slog.New(slog.DiscardHandler)
	base, err := config.Parse([]byte(baseConfig), "base.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data, "f.toml")
		if err != nil {
			return
		}
		if cfg.Conntrack.Capacity > 1<<20 {
			cfg.Conntrack.Capacity = 1 << 20 // memory, not behaviour: New builds no table of it
		}
		s1 := &dataplane.Shared{}
		if _, err := New(cfg, s1, nil, log); err != nil {
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
		cfg2, err := config.Parse(data, "f.toml")
		if err != nil {
			t.Fatalf("second parse: %v", err)
		}
		s2 := &dataplane.Shared{}
		if _, err := New(cfg2, s2, nil, log); err != nil {
			t.Fatal(err)
		}
		t1, t2 := tablesOf(s1.Services.Load()), tablesOf(s2.Services.Load())
		if !sameTables(t1, t2) {
			t.Fatalf("two instances built different tables from one config\n%s", data)
		}
		enc, err := cfg.Encode()
		if err != nil {
			t.Fatal(err)
		}
		cfg3, err := config.Parse([]byte(enc), "encoded")
		if err != nil {
			t.Fatalf("effective config rejected: %v\n%s", err, enc)
		}
		if enc3, err := cfg3.Encode(); err != nil || enc3 != enc {
			t.Fatalf("the effective config is not stable: %v\n--- first\n%s\n--- second\n%s", err, enc, enc3)
		}
		s3 := &dataplane.Shared{}
		if _, err := New(cfg3, s3, nil, log); err != nil {
			t.Fatalf("effective config does not build: %v\n%s", err, enc)
		}
		if t3 := tablesOf(s3.Services.Load()); !sameTables(t1, t3) {
			t.Fatalf("the effective config builds other tables\n--- input\n%s\n--- effective\n%s", data, enc)
		}
		// A running plane reloads to it and back.
		sb := &dataplane.Shared{}
		p, err := New(base, sb, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(cfg); err != nil && !errors.Is(err, ErrNeedsRestart) {
			// A refusal by name is allowed; any other error after Parse is not.
			t.Fatalf("reload to a valid config failed: %v\n%s", err, data)
		}
		if err := p.Apply(base); err != nil && !errors.Is(err, ErrNeedsRestart) {
			t.Fatalf("reload back failed: %v\n%s", err, data)
		}
		// The plane running cfg reloads to base's services (with cfg's
		// restart-only settings: a reload may refuse it, never panic) and
		// back to cfg, which it ran: that must succeed.
		mix := *cfg3
		mix.VIPs, mix.Control, mix.Health = base.VIPs, base.Control, base.Health
		p3, _ := New(cfg, &dataplane.Shared{}, nil, log)
		_ = p3.Apply(&mix)
		if err := p3.Apply(cfg3); err != nil {
			t.Fatalf("reload back to the config in force failed: %v\n%s", err, data)
		}
	})
}

func sameTables(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
	}
	return true
}
