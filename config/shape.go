package config

import "fmt"

// Bounds on how a configuration nests. Fulcrum's deepest table is three
// names deep (dataplane.punt.health, vip.backend.x) and its deepest value
// two ([{...}] of backends written inline); the decoder and the line
// locator cost time and memory quadratic (or worse) in the depth, so a
// file of a few KB nested thousands deep would take gigabytes and
// minutes to refuse, on the daemon's main loop when a reload reads it.
const (
	// MaxNesting bounds how deep arrays and inline tables (and a table
	// header's brackets) nest.
	MaxNesting = 32
	// MaxKeyParts bounds the names of one dotted key or table header.
	MaxKeyParts = 32
)

// checkShape refuses a file that nests deeper than MaxNesting or has a key
// of more than MaxKeyParts parts, at the line where it goes too deep,
// before the decoder sees it. It reads strings and comments only to skip
// them: what it does not understand it leaves to the decoder.
func checkShape(data []byte, name string) *Problem {
	depth, dots, line := 0, 0, 1
	bad := func(format string, a ...any) *Problem {
		return &Problem{File: name, Line: line, Msg: fmt.Sprintf(format, a...)}
	}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '\n':
			line++
			dots = 0
		case '#':
			for i+1 < len(data) && data[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			i = skipString(data, i, &line)
		case '[', '{':
			depth++
			dots = 0
			if depth > MaxNesting {
				return bad("nested more than %d deep (arrays, inline tables): a configuration needs 2", MaxNesting)
			}
		case ']', '}':
			depth = max(depth-1, 0)
			dots = 0
		case '=', ',':
			dots = 0
		case '.':
			dots++
			if dots >= MaxKeyParts {
				return bad("a key or table name of more than %d parts: a configuration needs 3", MaxKeyParts)
			}
		}
	}
	return nil
}

// skipString is the index of the last byte of the string that opens at
// data[i] (a basic or literal string, single- or multi-line), counting the
// newlines of a multi-line one into line. A single-line string ends at
// its line's end at the latest (the decoder refuses it).
func skipString(data []byte, i int, line *int) int {
	q := data[i]
	if i+2 < len(data) && data[i+1] == q && data[i+2] == q {
		for j := i + 3; j < len(data); j++ {
			switch {
			case data[j] == '\n':
				*line++
			case data[j] == '\\' && q == '"':
				if j+1 < len(data) && data[j+1] == '\n' {
					*line++
				}
				j++
			case data[j] == q && j+2 < len(data) && data[j+1] == q && data[j+2] == q:
				// A run of up to five quotes closes it: the last three
				// are the delimiter.
				k := j + 3
				for k < len(data) && k < j+5 && data[k] == q {
					k++
				}
				return k - 1
			}
		}
		return len(data) - 1
	}
	for j := i + 1; j < len(data); j++ {
		switch {
		case data[j] == '\n':
			return j - 1 // the newline is counted by the caller
		case data[j] == '\\' && q == '"':
			if j+1 < len(data) && data[j+1] != '\n' {
				j++
			}
		case data[j] == q:
			return j
		}
	}
	return len(data) - 1
}
