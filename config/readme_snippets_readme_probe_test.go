package config

import (
	"os"
	"regexp"
	"testing"
)

// Every ```toml block of README.md parses with config.Parse when put after
// a minimal valid configuration (a [[vip]] fragment gets one backend).
func TestReadmeProbeTOMLSnippets(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("no toml blocks in README.md")
	}
	for i, b := range blocks {
		text := base + "\n" + string(b[1]) + "\n  [[vip.backend]]\n  address = \"10.0.3.1\"\n"
		if _, err := Parse([]byte(text), "README-snippet.toml"); err != nil {
			t.Errorf("README toml block %d does not parse: %v\n%s", i, err, b[1])
		}
	}
}
