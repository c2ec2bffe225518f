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
// key = value per line, dotted keys, inline tables on the key's line),
// which is all errors need.
type locator struct {
	lines map[string]int   // indexed path -> line
	order []string         // indexed paths, in the order they are written
	plain map[string][]int // path without indices -> the line of each occurrence
}

var (
	headerRE = regexp.MustCompile(`^\[(\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*$`)
	keyRE    = regexp.MustCompile(`^([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*=`)
	indexRE  = regexp.MustCompile(`\[\d+\]`)
)

func newLocator(data []byte) *locator {
	l := &locator{lines: map[string]int{}, plain: map[string][]int{}}
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
			p := dropBlanks(m[1])
			if ctx != "" {
				p = ctx + "." + p
			}
			l.add(p, n)
			l.addInline(p, s[len(m[0]):], n)
		}
	}
	return l
}

func (l *locator) add(path string, line int) {
	if _, ok := l.lines[path]; !ok {
		l.lines[path] = line
		l.order = append(l.order, path)
	}
	plain := indexRE.ReplaceAllString(path, "")
	l.plain[plain] = append(l.plain[plain], line)
}

// dropBlanks removes the blanks a dotted key may have around its dots.
func dropBlanks(key string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, key)
}

// addInline records the keys of the inline tables in value, what follows
// "path =" on line n: `backend = [{address = "10.0.0.1", weight = 2}]`
// writes vip[0].backend[0].address and vip[0].backend[0].weight there.
// A value that goes on past its line is read as far as the line goes, and
// one up to a quoted key inside an inline table.
func (l *locator) addInline(path, value string, n int) {
	type frame struct {
		path  string
		array bool
		idx   int // arrays: the element being read
	}
	var stack []frame
	next := path // the path of the value that starts next
	wantKey := false
	for i := 0; i < len(value); i++ {
		c := value[i]
		switch {
		case c == '"' || c == '\'':
			if wantKey {
				return // a quoted key: not worth the trouble
			}
			i = endOfString(value, i)
		case c == '#':
			return // a comment
		case c == '{':
			stack = append(stack, frame{path: next})
			wantKey = true
		case c == '[':
			stack = append(stack, frame{path: next, array: true})
			next += "[0]"
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return
			}
			stack = stack[:len(stack)-1]
			wantKey = false
		case c == ',':
			if len(stack) == 0 {
				return
			}
			top := &stack[len(stack)-1]
			if top.array {
				top.idx++
				next = top.path + "[" + strconv.Itoa(top.idx) + "]"
			} else {
				wantKey = true
			}
		case wantKey && c != ' ' && c != '\t':
			eq := strings.IndexByte(value[i:], '=')
			if eq < 0 {
				return
			}
			key := dropBlanks(value[i : i+eq])
			next = stack[len(stack)-1].path + "." + key
			l.add(next, n)
			i += eq
			wantKey = false
		}
	}
}

// endOfString is the index of the quote that closes the string opening
// at s[i] (len(s) when the line does not close it).
func endOfString(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q == '"':
			j++
		case s[j] == q:
			return j
		}
	}
	return len(s)
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

// lineOfKey is the line of the i-th occurrence (from 0) of the unindexed
// decoder key k; the first line of k, or of its closest enclosing key,
// when the file has fewer that the scanner saw; 0 when unknown.
func (l *locator) lineOfKey(k toml.Key, i int) int {
	for j := len(k); j > 0; j-- {
		if lines := l.plain[strings.Join(k[:j], ".")]; len(lines) > 0 {
			if j == len(k) && i < len(lines) {
				return lines[i]
			}
			return lines[0]
		}
	}
	return 0
}

// pathAt is the indexed path of the decoder key k ("vip.encap") written
// at line n ("vip[1].encap"), the first when the line writes several;
// "" when no such key is written there.
func (l *locator) pathAt(n int, k string) string {
	if k == "" {
		return ""
	}
	for _, path := range l.order {
		if l.lines[path] == n && indexRE.ReplaceAllString(path, "") == k {
			return path
		}
	}
	return ""
}
