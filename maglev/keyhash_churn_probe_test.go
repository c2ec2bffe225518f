package maglev

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func keyHashHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestProbeKeyHashesPinKeyMemory: the control plane's backend names are
// substrings of the configuration file's text (the TOML decoder's strings
// share its input). A long-running daemon whose reloads bring one new name
// each builds tables whose keys are such substrings; once the build is
// over nothing but maglev's keyHashes cache refers to the old keys. The
// cache keeps the key strings as they came, so each new name pins its
// whole source text: the heap grows by the text's size per new name, up
// to keyHashesMax names (65,536 texts), not by a few bytes per name.
func TestProbeKeyHashesPinKeyMemory(t *testing.T) {
	const text = 32 << 10 // a 32 KiB configuration file
	n := 100
	clone := false
	build := func(i int) {
		src := strings.Repeat("#", text) + fmt.Sprintf("churned-%d", i) // a fresh "file"
		key := src[text:]                                               // the name, as a substring
		if clone {
			key = strings.Clone(key)
		}
		bs := []Backend{{Key: "fixed-a", Weight: 1}, {Key: "fixed-b", Weight: 1}, {Key: key, Weight: 1}}
		if _, err := Build(bs, 251); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	for ; i < 10; i++ {
		build(i)
	}
	h0 := keyHashHeap()
	for end := i + n; i < end; i++ {
		build(i)
	}
	h1 := keyHashHeap()
	for end := i + 9*n; i < end; i++ {
		build(i)
	}
	h2 := keyHashHeap()
	keyHashes.Lock()
	cached := len(keyHashes.m)
	keyHashes.Unlock()
	per := float64(int64(h2)-int64(h1)) / float64(9*n)
	t.Logf("heap after GC: %d, after N=%d builds +%d B, after 10N +%d B more (%.0f B a build; source text %d B); %d keys cached",
		h0, n, int64(h1)-int64(h0), int64(h2)-int64(h1), per, text, cached)
	// The same with the keys copied first: what a copy in the cache would
	// cost.
	clone = true
	h3 := keyHashHeap()
	for end := i + 9*n; i < end; i++ {
		build(i)
	}
	h4 := keyHashHeap()
	t.Logf("with copied keys: %.0f B a build", float64(int64(h4)-int64(h3))/float64(9*n))
	if per > 1024 {
		t.Errorf("each new key keeps %.0f B alive (its %d B source text): keyHashes should hold a copy of the key (strings.Clone)", per, text)
	}
}
