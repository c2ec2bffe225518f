package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

var durationType = reflect.TypeOf(time.Duration(0))

// checkBareDurations refuses a duration written as a bare integer other
// than 0 (`drain_timeout = 300`): the decoder reads it as nanoseconds,
// which no configuration means (a drain timeout of 300 ns moved drained
// backends' flows at once). 0 is 0 in every unit. Every duration key of
// every section is checked, by the Config type's toml tags, in the file
// decoded into maps (MetaData cannot look into arrays of tables).
func (ck *checker) checkBareDurations() {
	raw := map[string]any{}
	if _, err := toml.Decode(string(ck.data), &raw); err != nil {
		return // cannot happen: the same text decoded before
	}
	ck.bareDurations(reflect.TypeOf(Config{}), raw, "")
}

func (ck *checker) bareDurations(t reflect.Type, v any, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return
		}
		for name, sub := range x {
			if ft, ok := fieldByTOML(t, name); ok {
				p := name
				if path != "" {
					p = path + "." + name
				}
				ck.bareDurations(ft, sub, p)
			}
		}
	case []map[string]any: // [[array]] of tables
		if t.Kind() == reflect.Slice {
			for i, m := range x {
				ck.bareDurations(t.Elem(), m, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case []any: // an inline array (of tables)
		if t.Kind() == reflect.Slice {
			for i, m := range x {
				ck.bareDurations(t.Elem(), m, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case int64:
		if t == durationType && x != 0 {
			ck.bad(path, "%d is a bare integer, which would be %d nanoseconds: write the duration with its unit (\"%ds\", \"%dms\")", x, x, x, x)
		}
	}
}

// fieldByTOML is the type of t's field whose toml tag is name (embedded
// structs searched too).
func fieldByTOML(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if f.Anonymous && tag == "" {
			if ft := f.Type; ft.Kind() == reflect.Struct {
				if r, ok := fieldByTOML(ft, name); ok {
					return r, true
				}
			}
			continue
		}
		if tag == name {
			return f.Type, true
		}
	}
	return nil, false
}
