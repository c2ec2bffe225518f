package config

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// Lines gives one entry per problem, a problem whose message holds a
// newline whole (splitting the text at newlines, as `fulcrum run` and
// `fulcrum check` did, made two entries, one without file and line), and
// an error that is not Errors as its text.
func TestLines(t *testing.T) {
	es := Errors{{File: "f", Line: 3, Msg: "a: x"}, {File: "f", Line: 7, Msg: "b: one\ntwo"}}
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"nil", nil, nil},
		{"errors", es, []string{"f:3: a: x", "f:7: b: one\ntwo"}},
		{"wrapped", fmt.Errorf("reload: %w", es), []string{"f:3: a: x", "f:7: b: one\ntwo"}},
		{"other", errors.New("config: open f: no such file"), []string{"config: open f: no such file"}},
	} {
		if got := Lines(tc.err); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
