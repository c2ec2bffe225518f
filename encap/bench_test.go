package encap

import (
	"net/netip"
	"testing"
)

// Each benchmark encapsulates one frame in place, over and over: Encap only
// rewrites the headroom, so every iteration does the full work.
func benchEncap(b *testing.B, s spec, kind Kind, backend netip.Addr, mod func(*Config)) {
	e := newEnc(b, mod)
	be := mustBackend(b, e, backend)
	buf, off, n, p := load(b, build(b, s), headroom)
	_, _, want := e.Encap(buf, off, n, &p, 0x0123456789abcdef, kind, &be, nextHop, portMAC)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, res := e.Encap(buf, off, n, &p, uint64(i), kind, &be, nextHop, portMAC); res != want {
			b.Fatal(res)
		}
	}
}

var (
	small   = spec{l4: "tcp", payload: 6, df: true} // a 60-byte frame (64 on the wire with the FCS)
	small6  = spec{v6: true, l4: "tcp", payload: 0}
	large   = spec{l4: "tcp", payload: 1400, df: true}
	large0  = spec{l4: "udp0", payload: 1400, df: true} // UDP without checksum: the per-byte fallback
	tooBig4 = spec{l4: "tcp", payload: 1460, df: true}
	tooBig6 = spec{v6: true, l4: "tcp", payload: 1440}
)

func BenchmarkEncapGREv4(b *testing.B)       { benchEncap(b, small, GRE, backend4, nil) }
func BenchmarkEncapGREv6(b *testing.B)       { benchEncap(b, small, GRE, backend6, nil) }
func BenchmarkEncapIPIPv4(b *testing.B)      { benchEncap(b, small, IPIP, backend4, nil) }
func BenchmarkEncapIP6IP6(b *testing.B)      { benchEncap(b, small6, IPIP, backend6, nil) }
func BenchmarkEncapGUEv4(b *testing.B)       { benchEncap(b, small, GUE, backend4, nil) }
func BenchmarkEncapGUEv6(b *testing.B)       { benchEncap(b, small, GUE, backend6, nil) }
func BenchmarkEncapGUEv6Large(b *testing.B)  { benchEncap(b, large, GUE, backend6, nil) }
func BenchmarkEncapGUEv6NoCsum(b *testing.B) { benchEncap(b, large0, GUE, backend6, nil) }
func BenchmarkEncapGUEv6ZeroCsum(b *testing.B) {
	benchEncap(b, large0, GUE, backend6, func(c *Config) { c.GUEZeroChecksumV6 = true })
}
func BenchmarkICMPFragNeeded(b *testing.B)     { benchEncap(b, tooBig4, GRE, backend4, nil) }
func BenchmarkICMPv6PacketTooBig(b *testing.B) { benchEncap(b, tooBig6, GRE, backend6, nil) }

// BenchmarkHeaderEncap is the prepared-header path (Header.Encap) on a
// 60-byte frame, per outer family and kind: what the fused path pays per
// packet.
func BenchmarkHeaderEncap(b *testing.B) {
	for _, c := range []struct {
		name    string
		kind    Kind
		backend netip.Addr
	}{{"GREv4", GRE, backend4}, {"IPIPv4", IPIP, backend4}, {"GUEv4", GUE, backend4}, {"GREv6", GRE, backend6}, {"GUEv6", GUE, backend6}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnc(b, nil)
			be := mustBackend(b, e, c.backend)
			h := e.Prepare(c.kind, &be, false)
			buf, off, n, p := load(b, build(b, small), headroom)
			if !h.Fits(c.kind, &p) {
				b.Fatal("the header does not fit")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, l := h.Encap(buf, off, n, &p, c.kind, uint64(i), &nextHop, &portMAC); l == 0 {
					b.Fatal("refused")
				}
			}
		})
	}
}
