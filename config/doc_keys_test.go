package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"testing"
)

// Every dotted configuration key that README.md and docs/*.md write in a
// code span (`control.drain_timeout`, `dataplane.punt.health`,
// `vip.health.kind`) is a key Config accepts: a renamed or removed key
// would otherwise stay in the prose an operator copies from.
func TestDocDottedKeysExist(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range configKeys(reflect.TypeFor[Config](), "") {
		keys[k] = true
	}
	sections := map[string]bool{}
	for k := range keys {
		for i := range k {
			if k[i] == '.' {
				sections[k[:i]] = true
			}
		}
	}
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md")
	span := regexp.MustCompile("`\\[?\\[?((eal|dataplane|conntrack|control|health|admin|bgp|vip)(\\.[a-z0-9_]+)+)\\]?\\]?`")
	var bad []string
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "benchmarks.md" {
			continue // profiles: Go functions (`conntrack.candidates`), not keys
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range span.FindAllStringSubmatch(string(data), -1) {
			n++
			if !keys[m[1]] && !sections[m[1]] {
				bad = append(bad, filepath.Base(f)+": "+m[1])
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("keys the docs name that the configuration does not have:\n%v", bad)
	}
	if n < 20 {
		t.Errorf("found only %d dotted keys in the docs", n)
	}
}
