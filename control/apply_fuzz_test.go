package control

import (
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
	f.Fuzz(func(t *testing.T, data []byte) { checkConfig(t, string(data), base, log) })
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
