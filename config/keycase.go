package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// checkKeyCase refuses a key that is one of the configuration's keys
// only when case is ignored ("Port" for "port"). TOML keys are
// case-sensitive, so it is an unknown key; but the decoder falls back to
// a case-insensitive match and sets the field, so MetaData never reports
// it, and with both spellings in one table which value won depended on
// map order: one file gave two configurations.
func (ck *checker) checkKeyCase() {
	raw := map[string]any{}
	if _, err := toml.Decode(string(ck.data), &raw); err != nil {
		return // cannot happen: the same text decoded before
	}
	ck.keyCase(reflect.TypeOf(Config{}), raw, "")
}

func (ck *checker) keyCase(t reflect.Type, v any, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return
		}
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range x {
				if !yield(k) {
					return
				}
			}
		}) {
			p := name
			if path != "" {
				p = path + "." + name
			}
			if ft, ok := fieldByTOML(t, name); ok {
				ck.keyCase(ft, x[name], p)
			} else if want, ok := foldTOML(t, name); ok {
				ck.bad(p, "unknown key %q: keys are case-sensitive (%q)", p, want)
			}
		}
	case []map[string]any:
		if t.Kind() == reflect.Slice {
			for i, m := range x {
				ck.keyCase(t.Elem(), m, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case []any:
		if t.Kind() == reflect.Slice {
			for i, m := range x {
				ck.keyCase(t.Elem(), m, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
}

// foldTOML is the toml tag of t's field (embedded structs searched too)
// that equals name when case is ignored.
func foldTOML(t reflect.Type, name string) (string, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if f.Anonymous && tag == "" {
			if ft := f.Type; ft.Kind() == reflect.Struct {
				if r, ok := foldTOML(ft, name); ok {
					return r, true
				}
			}
			continue
		}
		if tag != "" && tag != "-" && strings.EqualFold(tag, name) {
			return tag, true
		}
	}
	return "", false
}
