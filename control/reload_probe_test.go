package control

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
)

// A reload whose file differs from the one in force only in how it
// writes the same settings changes nothing and is accepted: an empty
// list written out or left out (`pci = []`, as examples/fulcrum.toml
// writes it, or deleted), the hash key in upper-case digits. Before, each
// was refused as a change of its key that needs a restart (the hash key's
// "must change on every instance at once").
func TestReloadSameSettingsOtherSpelling(t *testing.T) {
	for _, e := range []struct{ sec, key, value string }{
		{"eal", "pci", "[]"},
		{"eal", "vdevs", "[]"},
		{"eal", "extra_args", "[]"},
		{"bgp", "communities", "[]"},
		{"bgp", "listen_addresses", "[]"},
		{"dataplane", "hash_key", `"000102030405060708090A0B0C0D0E0F"`},
	} {
		t.Run(e.sec+"."+e.key, func(t *testing.T) {
			f := newReloadFixture(t)
			cfg, err := config.Parse([]byte(edit(reloadBase, e.sec, e.key, e.value)), "test.toml")
			if err != nil {
				t.Fatal(err)
			}
			if ch := changedKeys(f.plane.Config(), cfg); len(ch) != 0 {
				t.Errorf("changed keys %v, want none", ch)
			}
			if err := f.plane.Apply(cfg); err != nil {
				t.Errorf("reload: %v; want it accepted", err)
			}
			if f.plane.Config() != cfg {
				t.Error("the reloaded configuration is not in force")
			}
		})
	}
	// The other way round: a list that is not empty is still a change.
	a, _ := config.Parse([]byte(reloadBase), "a.toml")
	b, _ := config.Parse([]byte(edit(reloadBase, "eal", "extra_args", `["--x"]`)), "b.toml")
	if ch := changedKeys(a, b); len(ch) != 1 || ch[0] != "eal.extra_args" {
		t.Errorf("changed keys %v, want [eal.extra_args]", ch)
	}
}

// A reload that changes keys it applies together with one it refuses
// changes nothing: the refusal names only the refused key, and the
// configuration in force and the snapshot stay whole.
func TestReloadMixedRefusalChangesNothing(t *testing.T) {
	f := newReloadFixture(t)
	toml := edit(edit(edit(reloadBase, "dataplane", "ttl", "9"), "conntrack", "capacity", "8192"), "control", "panic_threshold", "0.9")
	toml = strings.Replace(toml, `address = "10.0.1.1"`, `address = "10.0.1.11"`, 1)
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	before, gen := f.plane.Config(), f.shared.Services.Load().Gen
	err = f.plane.Apply(cfg)
	if !errors.Is(err, ErrNeedsRestart) || !strings.Contains(err.Error(), "conntrack.capacity changed") ||
		strings.Contains(err.Error(), "dataplane.ttl") || strings.Contains(err.Error(), "vip") {
		t.Fatalf("err %v; want it refused naming conntrack.capacity alone", err)
	}
	if f.plane.Config() != before || f.shared.Services.Load().Gen != gen || len(f.applied) != 0 {
		t.Error("the refused reload changed the configuration in force, the snapshot or the exception interface")
	}
	if s := f.send(web, 10); !s.tx || s.outer4 == nil || s.outer4.TTL == 9 || !s.outer4.DstIP.Equal(netip.MustParseAddr("10.0.1.1").AsSlice()) && !s.outer4.DstIP.Equal(netip.MustParseAddr("10.0.1.2").AsSlice()) {
		t.Errorf("after the refused reload: %+v", s.outer4)
	}
}

// Reload reads the file once: what is in force is what it read, and a
// file rewritten badly afterwards leaves it in force.
func TestReloadFileRewritten(t *testing.T) {
	f := newReloadFixture(t)
	p := filepath.Join(t.TempDir(), "f.toml")
	good := edit(reloadBase, "dataplane", "ttl", "9")
	if err := os.WriteFile(p, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Reload(p); err != nil {
		t.Fatal(err)
	}
	inForce := f.plane.Config()
	if err := os.WriteFile(p, []byte(edit(good, "dataplane", "ttl", "0x")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Reload(p); err == nil {
		t.Fatal("a broken file was accepted")
	}
	if f.plane.Config() != inForce || inForce.Dataplane.TTL != 9 {
		t.Error("a rejected reload changed the configuration in force")
	}
	if s := f.send(web, 10); s.outer4 == nil || s.outer4.TTL != 9 {
		t.Errorf("outer %+v, want TTL 9", s.outer4)
	}
}
