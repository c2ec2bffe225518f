// Package configtest writes the TOML configurations tests parse. Every
// fixture of the control plane's, the admin API's and the dataplane's
// tests starts from the same [dataplane] (a ring port, the LB's address,
// the examples' fleet key) and the same "web" VIP; a Builder writes them
// and whatever a test adds, in the layout the files are written in, so a
// fixture says only what it is about.
package configtest

import (
	"fmt"
	"strings"
)

// HashKey is the fleet key of every fixture (and of the examples).
const HashKey = "000102030405060708090a0b0c0d0e0f"

// Web is the address of the "web" VIP that Web writes, port 80.
const Web = "203.0.113.7"

// Builder writes a configuration section by section.
type Builder struct{ b strings.Builder }

// New starts an empty configuration.
func New() *Builder { return &Builder{} }

// Section writes [name] with its key lines ("capacity = 4096").
func (b *Builder) Section(name string, keys ...string) *Builder {
	fmt.Fprintf(&b.b, "\n[%s]\n", name)
	b.lines("", keys)
	return b
}

// Dataplane writes the fixtures' [dataplane]: port net_ring0, lb_ipv4
// 192.0.2.10, then keys, then hash_key.
func (b *Builder) Dataplane(keys ...string) *Builder {
	return b.Section("dataplane", append(append([]string{`port = "net_ring0"`, `lb_ipv4 = "192.0.2.10"`}, keys...), `hash_key = "`+HashKey+`"`)...)
}

// VIP writes a [[vip]] named name at addr:port, then its key lines.
func (b *Builder) VIP(name, addr string, port int, keys ...string) *Builder {
	return b.Section("[vip]", append([]string{fmt.Sprintf("name = %q", name), fmt.Sprintf("address = %q", addr), fmt.Sprintf("port = %d", port)}, keys...)...)
}

// Sub writes a table below the last one, indented: header is written as
// given ("[vip.health]", "[[bgp.neighbor]]").
func (b *Builder) Sub(header string, keys ...string) *Builder {
	fmt.Fprintf(&b.b, "  %s\n", header)
	b.lines("  ", keys)
	return b
}

// Backend writes a [[vip.backend]] of the last VIP.
func (b *Builder) Backend(name, addr string, keys ...string) *Builder {
	return b.Sub("[[vip.backend]]", append([]string{fmt.Sprintf("name = %q", name), fmt.Sprintf("address = %q", addr)}, keys...)...)
}

// Web writes the fixtures' "web" VIP, Web:80/tcp, with n backends be1..beN
// at 10.0.1.1..N, then the keys of the VIP (before its backends).
func (b *Builder) Web(n int, keys ...string) *Builder {
	b.VIP("web", Web, 80, keys...)
	for i := 1; i <= n; i++ {
		b.Backend(fmt.Sprintf("be%d", i), fmt.Sprintf("10.0.1.%d", i))
	}
	return b
}

// String is the configuration written so far.
func (b *Builder) String() string { return b.b.String() }

func (b *Builder) lines(indent string, keys []string) {
	for _, k := range keys {
		b.b.WriteString(indent + k + "\n")
	}
}
