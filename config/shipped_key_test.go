package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The package installs examples/fulcrum.toml as /etc/fulcrum/fulcrum.toml
// (0640), and that file passes `fulcrum check` as it stands, hash_key
// included: 000102030405060708090a0b0c0d0e0f, the key of the repository's
// examples and of docs/flow-hash.md's published test vectors. An operator
// who edits the VIPs and backends and keeps the key (its comment says only
// "required: 32 hex digits, THE SAME on every instance", and every
// instance of a fleet installed from the package does have the same one)
// runs with a key everyone knows, the one thing README says an attacker
// needs to aim flows at a chosen backend; nothing tells them. Load must at
// least warn (as it does for an inline secret in a readable file), so
// that `fulcrum check` and the daemon's start say it.
func TestShippedHashKeyWarns(t *testing.T) {
	src, err := os.ReadFile("../examples/fulcrum.toml")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "fulcrum.toml")
	if err := os.WriteFile(p, src, 0o640); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatalf("the shipped configuration does not load: %v", err)
	}
	own := filepath.Join(t.TempDir(), "own.toml")
	if err := os.WriteFile(own, []byte(strings.Replace(string(src), c.Dataplane.HashKey, "5be1c3e6a07f42d9b81c0e2f6a4d3917", 1)), 0o640); err != nil {
		t.Fatal(err)
	}
	if o, err := Load(own); err != nil {
		t.Errorf("the shipped configuration with a key of its own: %v", err)
	} else if len(o.Warnings) != 0 {
		t.Errorf("the shipped configuration with a key of its own: warnings %q; want none", o.Warnings)
	}
	for _, w := range c.Warnings {
		if strings.HasPrefix(w, "dataplane.hash_key") {
			return
		}
	}
	t.Errorf("the shipped configuration with its published example hash_key %s loads with warnings %q: none names dataplane.hash_key", c.Dataplane.HashKey, c.Warnings)
}
