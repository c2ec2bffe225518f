package config

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/BurntSushi/toml"
)

// Every ```toml block of docs/*.md parses with config.Parse, merged into
// a minimal valid configuration (TestReadmeProbeTOMLSnippets does
// README.md's): its tables' keys join the base's tables of the same name,
// its [[vip]] are added to the base's (a [[vip]] fragment without an
// address is completed with one, one without backends gets one).
func TestDocsTOMLSnippets(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	fence := regexp.MustCompile("(?s)```toml\n(.*?)```")
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range fence.FindAllSubmatch(data, -1) {
			n++
			text, err := mergeSnippet(base, string(b[1]))
			if err != nil {
				t.Errorf("%s toml block %d: %v\n%s", f, i, err, b[1])
				continue
			}
			if _, err := Parse([]byte(text), filepath.Base(f)); err != nil {
				t.Errorf("%s toml block %d does not parse: %v\n%s", f, i, err, b[1])
			}
		}
	}
	if n < 2 {
		t.Errorf("found only %d toml blocks in docs/", n)
	}
}

// mergeSnippet merges the TOML fragment snippet into the configuration
// base, as described at TestDocsTOMLSnippets.
func mergeSnippet(base, snippet string) (string, error) {
	var b, s map[string]any
	if _, err := toml.Decode(base, &b); err != nil {
		return "", err
	}
	if _, err := toml.Decode(snippet, &s); err != nil {
		return "", err
	}
	for k, v := range s {
		switch sv := v.(type) {
		case map[string]any:
			bt, _ := b[k].(map[string]any)
			if bt == nil {
				bt = map[string]any{}
			}
			for kk, vv := range sv {
				bt[kk] = vv
			}
			b[k] = bt
		case []map[string]any:
			if k == "vip" {
				for j, vip := range sv {
					if _, ok := vip["address"]; !ok {
						vip["address"] = "203.0.113.8"
					}
					if _, ok := vip["port"]; !ok {
						vip["port"] = int64(8000 + j)
					}
					if _, ok := vip["backend"]; !ok {
						vip["backend"] = []map[string]any{{"address": "10.0.3.1"}}
					}
				}
				old, _ := b[k].([]map[string]any)
				b[k] = append(old, sv...)
				continue
			}
			b[k] = sv
		default:
			b[k] = v
		}
	}
	var out bytes.Buffer
	if err := toml.NewEncoder(&out).Encode(b); err != nil {
		return "", err
	}
	return out.String(), nil
}
