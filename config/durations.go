package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

var durationType = reflect.TypeOf(time.Duration(0))

// checkRawKeys walks the file decoded into maps (MetaData cannot look
// into arrays of tables) beside the Config type's toml tags, every key of
// every section, and refuses what the decoder took without a word:
//
//   - A duration written as a bare integer other than 0 (`drain_timeout =
//     300`): the decoder reads it as nanoseconds, which no configuration
//     means (a drain timeout of 300 ns moved drained backends' flows at
//     once). 0 is 0 in every unit.
//   - A key that is one of the configuration's only when case is ignored
//     ("Port" for "port"). TOML keys are case-sensitive, so it is an
//     unknown key; but the decoder falls back to a case-insensitive match
//     and sets the field, so MetaData never reports it, and with both
//     spellings in one table which value won depended on map order: one
//     file gave two configurations.
func (ck *checker) checkRawKeys() {
	raw := map[string]any{}
	if _, err := toml.Decode(string(ck.data), &raw); err != nil {
		return // cannot happen: the same text decoded before
	}
	ck.rawKeys(reflect.TypeOf(Config{}), raw, "")
}

func (ck *checker) rawKeys(t reflect.Type, v any, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return
		}
		for _, name := range slices.Sorted(func(yield func(string) bool) { // problems in a stable order
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
			if f, ok := fieldByTOML(t, name, false); ok {
				ck.rawKeys(f.Type, x[name], p)
			} else if f, ok := fieldByTOML(t, name, true); ok {
				ck.bad(p, "unknown key %q: keys are case-sensitive (%q)", p, tomlTag(f))
			}
		}
	case []map[string]any: // [[array]] of tables
		if t.Kind() == reflect.Slice {
			for i, m := range x {
				ck.rawKeys(t.Elem(), m, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case []any: // an inline array (of tables)
		if t.Kind() == reflect.Slice {
			for i, m := range x {
				ck.rawKeys(t.Elem(), m, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case int64:
		if t == durationType && x != 0 {
			ck.bad(path, "%d is a bare integer, which would be %d nanoseconds: write the duration with its unit (\"%ds\", \"%dms\")", x, x, x, x)
		}
	}
}

// fieldByTOML is t's field whose toml tag is name, or equals it when case
// is ignored (fold); embedded structs are searched too.
func fieldByTOML(t reflect.Type, name string, fold bool) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := tomlTag(f)
		if f.Anonymous && tag == "" {
			if ft := f.Type; ft.Kind() == reflect.Struct {
				if r, ok := fieldByTOML(ft, name, fold); ok {
					return r, true
				}
			}
			continue
		}
		if tag == name || fold && tag != "" && tag != "-" && strings.EqualFold(tag, name) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// tomlTag is f's toml key: its tag without options.
func tomlTag(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	return tag
}
