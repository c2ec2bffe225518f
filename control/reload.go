package control

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/fulcrumlb/fulcrum/config"
)

// ErrNeedsRestart is wrapped by a reload refused because it changes
// settings only a restart can apply; the error names every such key.
var ErrNeedsRestart = errors.New("restart fulcrum to apply it")

// Reload policy by configuration key ("section.key", or a whole
// section). A key a reload applies maps to ""; any other reason refuses
// the reload. A key in neither (one added to package config later) is
// refused until someone gives it a reload path: no setting is ever
// accepted and silently ignored.
var reloadPolicy = map[string]string{
	// Set up once with the EAL, the ports, their queues and pools.
	"eal":                       "",
	"dataplane.port":            "",
	"dataplane.tx_port":         "",
	"dataplane.burst":           "",
	"dataplane.rx_desc":         "",
	"dataplane.tx_desc":         "",
	"dataplane.mempool_size":    "",
	"dataplane.idle_backoff":    "",
	"dataplane.idle_max_sleep":  "",
	"dataplane.exception":       "",
	"dataplane.exception_iface": "",
	"conntrack":                 "", // sizes and timeouts of tables the workers own
	"admin":                     "", // the listener and its credentials (a rotated token_file's token is taken: OnConfig)
	// Changing the hash key moves every flow unless the whole fleet
	// changes it at once.
	"dataplane.hash_key": "it must change on every instance at once (restart the fleet)",
	"bgp":                "one instance at a time",

	// Applied: in the snapshot (tables, encapsulator, next hop), read live
	// by the control plane, or re-applied to the exception interface.
	"dataplane.lb_ipv4":        applied,
	"dataplane.lb_ipv6":        applied,
	"dataplane.lb_ipv4_prefix": applied,
	"dataplane.lb_ipv6_prefix": applied,
	"dataplane.gateway_ipv4":   applied,
	"dataplane.gateway_ipv6":   applied,
	"dataplane.next_hop_mac":   applied,
	"dataplane.mtu":            applied,
	"dataplane.encap":          applied,
	"dataplane.ttl":            applied,
	"dataplane.df":             applied,
	"dataplane.gue_port":       applied,
	"control":                  applied,
	"health":                   applied,
	"vip":                      applied,

	// The second chance (docs/second-chance.md): in the snapshot.
	"dataplane.second_chance":        applied,
	"dataplane.second_chance_window": applied,

	// The exception path's budgets: in the snapshot.
	"dataplane.punt": applied,
}

// applied marks a key a reload applies.
const applied = "applied"

// reloadable refuses a reload that changes a key it cannot apply, naming
// every such key.
func reloadable(old, cur *config.Config) error {
	if old == nil {
		return nil
	}
	var refused []string
	for _, k := range changedKeys(old, cur) {
		why, ok := reloadPolicy[k]
		if !ok {
			why, ok = reloadPolicy[section(k)]
		}
		switch {
		case !ok:
			refused = append(refused, k+" changed: no reload path for it")
		case why == "":
			refused = append(refused, k+" changed")
		case why != applied:
			refused = append(refused, k+" changed: "+why)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", strings.Join(refused, "; "), ErrNeedsRestart)
}

func section(k string) string {
	s, _, _ := strings.Cut(k, ".")
	return s
}

// changedKeys lists the keys whose values differ between a and b, as
// "section.key" for the keys of a table section and as the section's
// name for arrays of tables ([[vip]]) and an added or removed section.
func changedKeys(a, b *config.Config) []string {
	var out []string
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	t := av.Type()
	for i := 0; i < t.NumField(); i++ {
		name := tomlName(t.Field(i))
		if name == "" {
			continue
		}
		x, y := av.Field(i), bv.Field(i)
		if x.Kind() == reflect.Pointer && !x.IsNil() && !y.IsNil() {
			x, y = x.Elem(), y.Elem()
		}
		if x.Kind() != reflect.Struct {
			if !sameValue(x, y) {
				out = append(out, name)
			}
			continue
		}
		eachKey(x, y, func(k string, x, y reflect.Value) {
			if !sameValue(x, y) {
				out = append(out, name+"."+k)
			}
		})
	}
	sort.Strings(out)
	return out
}

// sameValue is reflect.DeepEqual as the configuration means it: an empty
// list is the same setting as an absent one (`pci = []` and no pci line
// both decode to "none", one as an empty slice and one as nil), so a
// reload that only deletes or adds an empty list changes nothing instead
// of being refused as a change of its key.
func sameValue(x, y reflect.Value) bool {
	if x.IsValid() != y.IsValid() {
		return false
	}
	if !x.IsValid() {
		return true
	}
	if x.Type() != y.Type() {
		return false
	}
	switch x.Kind() {
	case reflect.Slice:
		if x.Len() != y.Len() {
			return false
		}
		if x.Len() > 0 && x.Pointer() == y.Pointer() {
			return true
		}
		fallthrough
	case reflect.Array:
		for i := 0; i < x.Len(); i++ {
			if !sameValue(x.Index(i), y.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		if x.IsNil() || y.IsNil() {
			return x.IsNil() == y.IsNil()
		}
		return x.Pointer() == y.Pointer() || sameValue(x.Elem(), y.Elem())
	case reflect.Interface:
		if x.IsNil() || y.IsNil() {
			return x.IsNil() == y.IsNil()
		}
		return sameValue(x.Elem(), y.Elem())
	case reflect.Struct:
		for i := 0; i < x.NumField(); i++ {
			if !sameValue(x.Field(i), y.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if x.Len() != y.Len() {
			return false
		}
		for _, k := range x.MapKeys() {
			yv := y.MapIndex(k)
			if !yv.IsValid() || !sameValue(x.MapIndex(k), yv) {
				return false
			}
		}
		return true
	case reflect.Bool:
		return x.Bool() == y.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return x.Int() == y.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return x.Uint() == y.Uint()
	case reflect.Float32, reflect.Float64:
		return x.Float() == y.Float()
	case reflect.Complex64, reflect.Complex128:
		return x.Complex() == y.Complex()
	case reflect.String:
		return x.String() == y.String()
	}
	// Funcs, channels, unsafe pointers: equal only when both are nil or
	// the same (none is a configuration value).
	return x.Pointer() == y.Pointer()
}

// eachKey calls fn with each keyed field of the structs x and y, reading
// an embedded struct's fields as the section's own, as the decoder does
// (a section decoded into an owning package's type, such as
// health.Config in config.Health).
func eachKey(x, y reflect.Value, fn func(key string, x, y reflect.Value)) {
	st := x.Type()
	for j := 0; j < st.NumField(); j++ {
		f := st.Field(j)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("toml") == "" {
			eachKey(x.Field(j), y.Field(j), fn)
			continue
		}
		if k := tomlName(f); k != "" {
			fn(k, x.Field(j), y.Field(j))
		}
	}
}

// tomlName is a struct field's TOML key ("" for fields that are none).
func tomlName(f reflect.StructField) string {
	n, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if n == "-" || !f.IsExported() {
		return ""
	}
	return n
}
