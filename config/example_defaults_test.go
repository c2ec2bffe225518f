package config

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// examples/fulcrum.toml says it states "every option, with its default"
// (README "Configuration" says the same). TestFullExampleStatesEveryKey
// checks the keys and TestFullExampleStatesTheDefaults a few values; this
// one checks every written value: taking out a key's line (so the key
// takes its real default) must leave the parsed configuration as it was.
// The keys whose values are the example's own (addresses, names, the
// required keys, the [vip.health] override) are listed in exampleOwn.
var exampleOwn = map[string]bool{
	"eal.vdevs":              true, // the example's device
	"dataplane.port":         true, // required
	"dataplane.lb_ipv4":      true, // required
	"dataplane.lb_ipv6":      true,
	"dataplane.gateway_ipv4": true,
	"dataplane.gateway_ipv6": true,
	"dataplane.hash_key":     true, // required
	"vip.name":               true,
	"vip.address":            true, // required
	"vip.port":               true, // required
	"vip.health.kind":        true, // the override the example shows
	"vip.health.path":        true,
	"vip.backend.name":       true,
	"vip.backend.address":    true, // required
	// [bgp], which the example shows commented out with example values
	"bgp.asn":               true, // required
	"bgp.router_id":         true, // required
	"bgp.communities":       true,
	"bgp.med":               true, // "unset: none" (0 would send a MED of 0)
	"bgp.neighbor.address":  true, // required
	"bgp.neighbor.peer_asn": true, // required
	"bgp.vip.prefix":        true,
	"bgp.vip.communities":   true,
	"bgp.vip.med":           true,
}

// exampleOwnLine: lines whose key has its default elsewhere in the file.
var exampleOwnLine = map[string]bool{
	"weight = 2":         true, // the second backend's
	"quic = true":        true, // uncommented by TestFullExampleCommentedDefaults
	"quic_id = 1":        true,
	"quic_id = 2":        true,
	"protocol = \"udp\"": true,
}

func TestFullExampleWritesTheDefaults(t *testing.T) {
	data, err := os.ReadFile("../examples/fulcrum.toml")
	if err != nil {
		t.Fatal(err)
	}
	checkExampleDefaults(t, string(data), 60)
}

// The keys the example shows commented out: [bgp] and its tables, which
// the file leaves off, and the QUIC keys of a [[vip]]. Written (the
// [bgp] section uncommented as a whole, the QUIC keys with quic = true),
// their values too must be the defaults.
func TestFullExampleCommentedDefaults(t *testing.T) {
	data, err := os.ReadFile("../examples/fulcrum.toml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inBGP := false
	for _, l := range strings.Split(string(data), "\n") {
		tl := strings.TrimSpace(l)
		switch {
		case tl == "# [bgp]":
			inBGP = true
		case strings.HasPrefix(tl, "[[vip]]"):
			inBGP = false
		}
		if inBGP && tl != "#" {
			l = strings.TrimPrefix(strings.TrimPrefix(tl, "#"), " ")
		}
		for _, k := range []string{"quic", "quic_cid_len", "quic_server_id_len", "quic_config_id", "second_chance"} {
			if strings.HasPrefix(tl, "# "+k+" ") {
				l = strings.TrimPrefix(tl, "# ")
			}
		}
		if strings.HasPrefix(tl, "# quic_id ") {
			l = "quic_id = 1"
		}
		if strings.HasPrefix(l, "quic = false") {
			l = "quic = true"
		}
		out = append(out, l)
	}
	text := strings.Join(out, "\n")
	// quic needs a UDP VIP, each backend a quic_id.
	text = strings.Replace(text, `protocol = "tcp"`, `protocol = "udp"`, 1)
	text = strings.Replace(text, "  weight = 2", "  weight = 2\n  quic_id = 2", 1)
	if !strings.Contains(text, "\n[bgp]\n") || !strings.Contains(text, "\nquic_cid_len = ") {
		t.Fatalf("uncommenting failed:\n%s", text)
	}
	checkExampleDefaults(t, text, 80)
}

func checkExampleDefaults(t *testing.T, text string, atLeast int) {
	t.Helper()
	data := []byte(text)
	full, err := Parse(data, "fulcrum.toml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	section := ""
	checked := 0
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if m := exampleHeader.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		m := exampleKey.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key := m[1]
		if section != "" {
			key = section + "." + key
		}
		value, _, _ := strings.Cut(line, "#")
		if exampleOwn[key] || exampleOwnLine[strings.TrimSpace(value)] {
			continue
		}
		without := strings.Join(append(append([]string{}, lines[:i]...), lines[i+1:]...), "\n")
		got, err := Parse([]byte(without), "fulcrum.toml")
		if err != nil {
			t.Errorf("line %d (%s) left out: %v", i+1, key, err)
			continue
		}
		checked++
		if d := configDiff(reflect.ValueOf(*full), reflect.ValueOf(*got), ""); d != "" {
			t.Errorf("examples/fulcrum.toml:%d: %s is not the default: %s", i+1, strings.TrimSpace(raw), d)
		}
	}
	if checked < atLeast {
		t.Errorf("checked only %d keys", checked)
	}
}

// configDiff names the first field where a and b differ ("" if none),
// skipping File and Warnings (the file's name and its warnings).
func configDiff(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			f := a.Type().Field(i)
			if f.Name == "File" || f.Name == "Warnings" {
				continue
			}
			if !f.IsExported() {
				continue
			}
			if d := configDiff(a.Field(i), b.Field(i), path+"."+f.Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path + ": one unset"
			}
			return ""
		}
		return configDiff(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() != b.Len() {
			return path + ": lengths differ"
		}
		for i := 0; i < a.Len(); i++ {
			if d := configDiff(a.Index(i), b.Index(i), path+"["+strconv.Itoa(i)+"]"); d != "" {
				return d
			}
		}
		return ""
	}
	if a.CanInterface() && !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return path + ": " + fmt.Sprint(a.Interface()) + " written, " + fmt.Sprint(b.Interface()) + " by default"
	}
	return ""
}
