package config

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// locator maps configuration paths ("vip[1].backend[0].address") to line
// numbers, so validation errors can say where the bad value is. TOML's
// decoder keeps key positions private; this line scanner understands the
// layout configs are written in (table headers, arrays of tables, one
// key = value per line), which is all errors need.
type locator struct {
	lines map[string]int // indexed path -> line
	plain map[string]int // path without indices -> first line
}

var (
	headerRE = regexp.MustCompile(`^\[(\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*$`)
	keyRE    = regexp.MustCompile(`^([A-Za-z0-9_\-]+)\s*=`)
	indexRE  = regexp.MustCompile(`\[\d+\]`)
)

func newLocator(data []byte) *locator {
	l := &locator{lines: map[string]int{}, plain: map[string]int{}}
	count := map[string]int{} // array-of-tables name -> entries seen (within the current parent)
	ctx := ""
	for i, raw := range strings.Split(string(data), "\n") {
		n := i + 1
		s := strings.TrimSpace(raw)
		if m := headerRE.FindStringSubmatch(s); m != nil {
			name := m[2]
			parts := strings.Split(name, ".")
			// Rebuild the indexed context: every prefix that is an array of
			// tables takes its current index.
			var b strings.Builder
			for j, p := range parts {
				if j > 0 {
					b.WriteByte('.')
				}
				b.WriteString(p)
				prefix := strings.Join(parts[:j+1], ".")
				if j == len(parts)-1 && m[1] == "[" {
					count[prefix]++
					for k := range count { // a new parent entry restarts its children
						if strings.HasPrefix(k, prefix+".") {
							delete(count, k)
						}
					}
				}
				if c, ok := count[prefix]; ok {
					b.WriteString("[" + strconv.Itoa(c-1) + "]")
				}
			}
			ctx = b.String()
			l.add(ctx, n)
			continue
		}
		if m := keyRE.FindStringSubmatch(s); m != nil {
			p := m[1]
			if ctx != "" {
				p = ctx + "." + p
			}
			l.add(p, n)
		}
	}
	return l
}

func (l *locator) add(path string, line int) {
	if _, ok := l.lines[path]; !ok {
		l.lines[path] = line
	}
	plain := indexRE.ReplaceAllString(path, "")
	if _, ok := l.plain[plain]; !ok {
		l.plain[plain] = line
	}
}

// line is the line of path, or of its closest enclosing table when the key
// itself is absent (a missing required key); 0 when unknown.
func (l *locator) line(path string) int {
	for p := path; p != ""; {
		if n, ok := l.lines[p]; ok {
			return n
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// has reports whether the file writes the key or table at path.
func (l *locator) has(path string) bool { _, ok := l.lines[path]; return ok }

// lineOfKey is the first line where an (unindexed) decoder key appears.
func (l *locator) lineOfKey(k toml.Key) int {
	return l.plain[strings.Join(k, ".")]
}

// pathAt is the indexed path of the decoder key k ("vip.encap") written
// at line n ("vip[1].encap"); "" when no such key is written there.
func (l *locator) pathAt(n int, k string) string {
	if k == "" {
		return ""
	}
	for path, line := range l.lines {
		if line == n && indexRE.ReplaceAllString(path, "") == k {
			return path
		}
	}
	return ""
}
