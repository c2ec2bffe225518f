package config

import (
	"encoding"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// examples/fulcrum.toml states every key with its default (README
// "Configuration"). TestFullExampleStatesTheDefaults compares a few
// values, so a key left out of the file (dataplane.second_chance was)
// passed it: this test compares the keys themselves. Every toml tag of
// Config, the packages' sections included, must appear in the file as
// "key = ...", written or commented out ("# key = ..." for the keys
// whose default is "unset"), under its section's header, written or
// commented out too. [vip.health] overrides [health] and the file shows
// only two of its keys: its keys count as stated when [health] states
// them.
func TestFullExampleStatesEveryKey(t *testing.T) {
	data, err := os.ReadFile("../examples/fulcrum.toml")
	if err != nil {
		t.Fatal(err)
	}
	stated := exampleKeys(string(data))
	var missing []string
	for _, k := range configKeys(reflect.TypeFor[Config](), "") {
		look := k
		if rest, ok := strings.CutPrefix(k, "vip.health."); ok {
			look = "health." + rest
		}
		if !stated[look] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("examples/fulcrum.toml does not state these keys: %s", strings.Join(missing, ", "))
	}
	// The walk itself: it must find the keys of the packages' sections
	// and of the embedded structs.
	all := strings.Join(configKeys(reflect.TypeFor[Config](), ""), " ")
	for _, k := range []string{"dataplane.second_chance", "dataplane.mtu", "dataplane.punt.other", "conntrack.udp",
		"health.flap_backoff", "bgp.neighbor.hold_time", "bgp.vip.med", "vip.quic_cid_len", "vip.draws", "vip.second_chance", "vip.backend.quic_id"} {
		if !strings.Contains(" "+all+" ", " "+k+" ") {
			t.Errorf("configKeys missed %s: %s", k, all)
		}
	}
}

var (
	exampleHeader = regexp.MustCompile(`^#?\s*\[\[?\s*([a-z0-9_.]+)\s*\]\]?`)
	exampleKey    = regexp.MustCompile(`^#?\s*([a-z0-9_]+)\s*=`)
)

// exampleKeys is the set of dotted keys the file writes or shows
// commented out.
func exampleKeys(text string) map[string]bool {
	keys := map[string]bool{}
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if m := exampleHeader.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		if m := exampleKey.FindStringSubmatch(line); m != nil {
			k := m[1]
			if section != "" {
				k = section + "." + k
			}
			keys[k] = true
		}
	}
	return keys
}

// configKeys lists the dotted TOML keys of the struct type t: the tagged
// fields, the fields of embedded untagged structs as the decoder flattens
// them, and the keys of nested tables and arrays of tables.
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	textual := reflect.TypeFor[encoding.TextUnmarshaler]()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		table := ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Duration]() && !reflect.PointerTo(ft).Implements(textual)
		if f.Anonymous && tag == "" && table {
			keys = append(keys, configKeys(ft, prefix)...)
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if table {
			keys = append(keys, configKeys(ft, prefix+tag+".")...)
			continue
		}
		keys = append(keys, prefix+tag)
	}
	return keys
}
