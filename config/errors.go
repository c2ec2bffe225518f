package config

import (
	"errors"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is matched (errors.Is) by every validation error, so callers
// can tell a bad config from an unreadable file.
var ErrInvalid = errors.New("invalid configuration")

// Problem is one thing wrong in a configuration file.
type Problem struct {
	File string
	// Line is where the problem is: the key's line, or its table's header
	// when the key is missing; 1 when the file has no such table at all
	// (an empty file, a missing [dataplane]). Never 0.
	Line int
	// Key is the configuration path at fault ("vip[1].backend[0].weight");
	// "" for syntax errors, which have no key yet.
	Key string
	// Msg says what is wrong; it starts with Key when there is one.
	Msg string
}

// Error is "FILE:LINE: MSG", with MSG cut at MaxProblemLen bytes.
func (p *Problem) Error() string { return p.File + ":" + strconv.Itoa(p.Line) + ": " + clip(p.Msg) }

// MaxProblemLen bounds a problem's message as Error prints it: a bad value
// of megabytes is quoted in its message (sometimes twice), and printing it
// whole would bury every other problem (and fill a journal).
const MaxProblemLen = 512

// clip is s cut to MaxProblemLen bytes at a character boundary, saying how
// long it was.
func clip(s string) string { return clipAt(s, MaxProblemLen) }

// clipAt is s cut to n bytes at a character boundary, saying how long it
// was.
func clipAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)) + " bytes in all)"
}

// MaxQuotedLen bounds a value quoted within a problem (quoteClipped), so
// that what is wrong with a long value, said after it, is not cut off
// with the rest of the line at MaxProblemLen.
const MaxQuotedLen = 64

// quoteClipped is v quoted, cut first to MaxQuotedLen bytes at a
// character boundary: "/aaaa"... (4149 bytes in all).
func quoteClipped(v string) string {
	if len(v) <= MaxQuotedLen {
		return strconv.Quote(v)
	}
	c := clipAt(v, MaxQuotedLen)
	i := strings.LastIndex(c, "... (")
	return strconv.Quote(c[:i]) + c[i:]
}

// Is makes errors.Is(p, ErrInvalid) hold.
func (p *Problem) Is(target error) bool { return target == ErrInvalid }

// Errors is every problem of one file, in line order. Parse returns it
// (as an error) whenever the configuration is invalid, so that `fulcrum
// check` shows everything to fix at once.
type Errors []*Problem

// Error prints one problem per line.
func (es Errors) Error() string {
	return strings.Join(Lines(es), "\n")
}

// Is makes errors.Is(es, ErrInvalid) hold.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// Unwrap gives errors.As access to each Problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, p := range es {
		out[i] = p
	}
	return out
}

// splitJoined is the errors err joins (errors.Join, or an owning
// package's Validate that joins its field errors), or err alone: one
// entry a problem, so each can be reported at its own key. nil gives one
// nil entry.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// sorted orders the problems by line, keeping the order of finding
// within a line (a table's problems stay together).
func (es Errors) sorted() Errors {
	sort.SliceStable(es, func(i, j int) bool { return es[i].Line < es[j].Line })
	return es
}

// Lines is err as the operator reads it, one entry per problem: each
// Problem of an Errors ("FILE:LINE: MSG", kept whole even if MSG holds a
// newline), or err's own text when it is not an Errors (an unreadable
// file). `fulcrum check` prints them and `fulcrum run` logs them, one
// entry each.
func Lines(err error) []string {
	if err == nil {
		return nil
	}
	var es Errors
	if !errors.As(err, &es) {
		return []string{err.Error()}
	}
	out := make([]string, len(es))
	for i, p := range es {
		out[i] = p.Error()
	}
	return out
}
