package encap

import (
	"bytes"
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// TestEncapBadInput: inconsistent buffers, offsets, backends and kinds
// give a drop reason, never a panic, and leave the buffer alone.
func TestEncapBadInput(t *testing.T) {
	e := newEnc(t, nil)
	only4 := newEnc(t, func(c *Config) { c.SrcV6 = netip.Addr{} })
	b4 := mustBackend(t, e, backend4)
	b6 := mustBackend(t, e, backend6)
	frame := build(t, spec{l4: "tcp", payload: 100, df: true})

	type args struct {
		e      *Encapsulator
		buf    []byte
		off, n int
		p      *packet.Parsed
		kind   Kind
		be     *Backend
	}
	for _, tc := range []struct {
		name string
		mod  func(a *args)
		want Result
	}{
		{"ok", func(a *args) {}, Forward},
		{"nil-parsed", func(a *args) { a.p = nil }, DropBadPacket},
		{"negative-off", func(a *args) { a.off = -1 }, DropBadPacket},
		{"negative-n", func(a *args) { a.n = -1 }, DropBadPacket},
		{"off-past-buf", func(a *args) { a.off = len(a.buf) + 1 }, DropBadPacket},
		{"n-past-buf", func(a *args) { a.n = len(a.buf) - a.off + 1 }, DropBadPacket},
		{"off+n-overflows", func(a *args) { a.off, a.n = math.MaxInt, math.MaxInt }, DropBadPacket},
		{"n-cuts-ip", func(a *args) { a.n = int(a.p.L3Off) + int(a.p.IPLen) - 1 }, DropBadPacket},
		{"empty-buf", func(a *args) { a.buf, a.off, a.n = nil, 0, 0 }, DropBadPacket},
		{"l3off-zero", func(a *args) { a.p.L3Off = 0 }, DropBadPacket},
		{"l3off-short", func(a *args) { a.p.L3Off = 13 }, DropBadPacket},
		{"l3off-past-n", func(a *args) { a.p.L3Off = 60000 }, DropBadPacket},
		{"iplen-past-n", func(a *args) { a.p.IPLen = 60000 }, DropBadPacket},
		{"iplen-short", func(a *args) { a.p.IPLen = 19 }, DropBadPacket},
		{"not-ip", func(a *args) { a.p.L3 = packet.L3Other }, DropBadPacket},
		{"l3-says-v6", func(a *args) { a.p.L3 = packet.L3IPv6 }, DropBadPacket},
		{"l3-unknown", func(a *args) { a.p.L3 = 7 }, DropBadPacket},
		{"bad-kind", func(a *args) { a.kind = NumKinds }, DropBadKind},
		{"nil-backend", func(a *args) { a.be = nil }, DropBadBackend},
		{"zero-backend", func(a *args) { a.be = &Backend{} }, DropBadBackend},
		{"v6-backend-no-src6", func(a *args) { a.e, a.be = only4, &b6 }, DropBadBackend},
		{"no-headroom", func(a *args) { a.off = 0; copy(a.buf, frame) }, DropNoHeadroom},
		{"headroom-one-short", func(a *args) { a.off = 23; copy(a.buf[23:], frame) }, DropNoHeadroom},
		{"headroom-exact", func(a *args) { a.off = 24; copy(a.buf[24:], frame) }, Forward},
		{"icmp-no-headroom", func(a *args) { a.off = 27; a.p.IPLen = 1490; a.n = 1504; copy(a.buf[27:], frame) }, DropNoHeadroom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf, off, n, p := load(t, frame, headroom)
			buf = append(buf, make([]byte, 1500)...) // room for the fake IPLen case
			a := args{e: e, buf: buf, off: off, n: n, p: &p, kind: GRE, be: &b4}
			tc.mod(&a)
			before := append([]byte(nil), a.buf...)
			start, length, res := a.e.Encap(a.buf, a.off, a.n, a.p, 5, a.kind, a.be, nextHop, portMAC)
			if res != tc.want {
				t.Fatalf("Encap = %v, want %v", res, tc.want)
			}
			if res.Drop() {
				if start != 0 || length != 0 {
					t.Errorf("drop returned start %d length %d", start, length)
				}
				if !bytes.Equal(a.buf, before) {
					t.Errorf("buffer changed on a drop")
				}
			} else if start < 0 || start+length > len(a.buf) {
				t.Errorf("output [%d:%d] outside the buffer (%d)", start, start+length, len(a.buf))
			}
		})
	}
}

// TestConfig checks defaults and that every bad field is named.
func TestConfig(t *testing.T) {
	e, err := New(Config{SrcV4: lbSrc4})
	if err != nil {
		t.Fatal(err)
	}
	c := e.Config()
	if c.TTL != 64 || c.MTU != 1500 || c.DF != DFInherit || c.GUEPort != 6080 || c.GUESrcPortMin != 49152 || c.GUESrcPortMax != 65535 {
		t.Errorf("defaults: %+v", c)
	}
	if e2, err := New(Config{SrcV4: netip.MustParseAddr("::ffff:192.0.2.1")}); err != nil || e2.Config().SrcV4 != lbSrc4 {
		t.Errorf("IPv4-mapped SrcV4: %v", err)
	}

	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "SrcV4 and SrcV6 both unset"},
		{Config{SrcV4: lbSrc6}, "SrcV4 2001:db8:1::1: not an IPv4"},
		{Config{SrcV6: lbSrc4}, "SrcV6 192.0.2.1: not an IPv6"},
		{Config{SrcV6: netip.MustParseAddr("::ffff:192.0.2.1")}, "SrcV6 ::ffff:192.0.2.1: not an IPv6"},
		{Config{SrcV4: netip.MustParseAddr("224.0.0.1")}, "SrcV4 224.0.0.1: not a unicast"},
		{Config{SrcV4: netip.MustParseAddr("0.0.0.0")}, "SrcV4 0.0.0.0: not a unicast"},
		{Config{SrcV6: netip.MustParseAddr("::")}, "SrcV6 ::: not a unicast"},
		{Config{SrcV6: netip.MustParseAddr("fe80::1%eth0")}, "SrcV6 fe80::1%eth0: zoned"},
		{Config{SrcV4: lbSrc4, MTU: 575}, "mtu: 575 is outside 576..65535"},
		{Config{SrcV4: lbSrc4, MTU: 65536}, "mtu: 65536"},
		{Config{SrcV4: lbSrc4, MTU: -1}, "mtu: -1"},
		{Config{SrcV4: lbSrc4, DF: 3}, "df: 3 is not one of"},
		{Config{SrcV4: lbSrc4, GUESrcPortMax: 100}, "GUESrcPortMin 0"},
		{Config{SrcV4: lbSrc4, GUESrcPortMin: 2000, GUESrcPortMax: 1000}, "GUESrcPortMin 2000 > GUESrcPortMax 1000"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want an ErrConfig naming %q", tc.cfg, err, tc.want)
		}
	}
}

func TestBackend(t *testing.T) {
	e := newEnc(t, nil)
	only6 := newEnc(t, func(c *Config) { c.SrcV4 = netip.Addr{} })
	b, err := e.Backend(netip.MustParseAddr("::ffff:10.0.0.5"))
	if err != nil || b.IsV6() || b.Addr() != backend4 {
		t.Errorf("mapped backend: %v %v %v", b.Addr(), b.IsV6(), err)
	}
	if b6 := mustBackend(t, e, backend6); !b6.IsV6() || b6.Addr() != backend6 {
		t.Errorf("v6 backend: %v", b6.Addr())
	}
	if (Backend{}).Addr().IsValid() {
		t.Errorf("zero Backend has an address")
	}
	for _, tc := range []struct {
		e    *Encapsulator
		a    netip.Addr
		want string
	}{
		{e, netip.Addr{}, "invalid address"},
		{e, netip.MustParseAddr("0.0.0.0"), "not a unicast"},
		{e, netip.MustParseAddr("255.255.255.255"), "not a unicast"},
		{e, netip.MustParseAddr("127.0.0.1"), "not a unicast"},
		{e, netip.MustParseAddr("ff02::1"), "not a unicast"},
		{only6, backend4, "10.0.0.5: IPv4 backend but SrcV4 is not configured"},
		{newEnc(t, func(c *Config) { c.SrcV6 = netip.Addr{} }), backend6, "SrcV6 is not configured"},
	} {
		_, err := tc.e.Backend(tc.a)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrConfig) {
			t.Errorf("Backend(%v) = %v, want an ErrConfig naming %q", tc.a, err, tc.want)
		}
	}
}

func TestKindAndDFNames(t *testing.T) {
	for _, k := range Kinds() {
		if got, err := ParseKind(k.String()); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if GRE != 0 {
		t.Errorf("the zero Kind must be GRE, the default")
	}
	if _, err := ParseKind("vxlan"); err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"vxlan"`) {
		t.Errorf("ParseKind(vxlan) = %v", err)
	}
	for _, k := range Kinds() {
		if _, err := ParseKind("vxlan"); err == nil || !strings.Contains(err.Error(), k.String()) {
			t.Errorf("ParseKind(vxlan) does not list %v: %v", k, err)
		}
	}
	for _, k := range Kinds() {
		if Overhead(k, false) < ipv4Len || Overhead(k, true) != Overhead(k, false)+ipv6Len-ipv4Len {
			t.Errorf("Overhead(%v) = %d/%d", k, Overhead(k, false), Overhead(k, true))
		}
	}
	if Kind(7).String() != "kind(7)" {
		t.Errorf("Kind(7) = %q", Kind(7).String())
	}
	for _, d := range []DF{DFInherit, DFSet, DFClear} {
		if got, err := ParseDF(d.String()); err != nil || got != d {
			t.Errorf("ParseDF(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := ParseDF("maybe"); err == nil || !errors.Is(err, ErrConfig) {
		t.Errorf("ParseDF(maybe) = %v", err)
	}
	seen := map[string]bool{}
	for r := Result(0); r < NumResults; r++ {
		s := r.String()
		if seen[s] || strings.HasPrefix(s, "result(") {
			t.Errorf("Result %d: name %q missing or repeated", r, s)
		}
		seen[s] = true
		if r.Drop() != strings.HasPrefix(s, "drop-") {
			t.Errorf("%v.Drop() = %v", r, r.Drop())
		}
	}
}

// TestSumBytes checks the fast checksum loop against the naive one at every
// length and alignment that its tail handling distinguishes.
func TestSumBytes(t *testing.T) {
	b := make([]byte, 200)
	for i := range b {
		b[i] = byte(i*37 + 11)
	}
	b[50], b[51] = 0xff, 0xff
	for start := 0; start < 8; start++ {
		for end := start; end <= len(b); end++ {
			got := fold(sumBytes(b[start:end]))
			want := refSum(b[start:end])
			// 0x0000 and 0xffff are both zero in ones' complement.
			if got != want && !(got|want == 0xffff && got&want == 0) {
				t.Fatalf("sumBytes(b[%d:%d]) = %#04x, want %#04x", start, end, got, want)
			}
		}
	}
	all := bytes.Repeat([]byte{0xff}, 4096)
	if got := fold(sumBytes(all)); got != 0xffff {
		t.Errorf("all-ones sum %#04x", got)
	}
}

// TestEncapAllocs: the per-packet path allocates nothing, on every path.
func TestEncapAllocs(t *testing.T) {
	e := newEnc(t, nil)
	b4 := mustBackend(t, e, backend4)
	b6 := mustBackend(t, e, backend6)
	for _, tc := range []struct {
		name string
		s    spec
		kind Kind
		be   *Backend
	}{
		{"gre-v4", spec{l4: "tcp", payload: 100, df: true}, GRE, &b4},
		{"gue-v6", spec{l4: "tcp", payload: 100, df: true}, GUE, &b6},
		{"gue-v6-fullsum", spec{l4: "udp0", payload: 1000, df: true}, GUE, &b6},
		{"icmp-v4", spec{l4: "tcp", payload: 1480, df: true}, GRE, &b4},
		{"icmp-v6", spec{v6: true, l4: "tcp", payload: 1480}, IPIP, &b6},
		{"drop", spec{l4: "tcp", payload: 1480}, IPIP, &b6},
	} {
		buf, off, n, p := load(t, build(t, tc.s), headroom)
		allocs := testing.AllocsPerRun(1000, func() {
			e.Encap(buf, off, n, &p, 12345, tc.kind, tc.be, nextHop, portMAC)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Encap, want 0", tc.name, allocs)
		}
	}
}

// Kind and DF read and write their config names as text, which is how
// package config decodes and prints them.
func TestKindAndDFText(t *testing.T) {
	for _, k := range Kinds() {
		b, _ := k.MarshalText()
		var got Kind
		if err := got.UnmarshalText(b); err != nil || got != k || string(b) != k.String() {
			t.Errorf("%v: text %q read back as %v, %v", k, b, got, err)
		}
	}
	for d := DF(0); d < numDF; d++ {
		b, _ := d.MarshalText()
		var got DF
		if err := got.UnmarshalText(b); err != nil || got != d || string(b) != d.String() {
			t.Errorf("%v: text %q read back as %v, %v", d, b, got, err)
		}
	}
	var k Kind
	var d DF
	if err := k.UnmarshalText([]byte("vxlan")); !errors.Is(err, ErrConfig) {
		t.Errorf("kind vxlan: %v", err)
	}
	if err := d.UnmarshalText([]byte("maybe")); !errors.Is(err, ErrConfig) {
		t.Errorf("df maybe: %v", err)
	}
}
