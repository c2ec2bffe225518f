package gen

import (
	"fmt"
	"io"
	"net/netip"
	"testing"
)

// BenchmarkNext measures generation speed in frames per second (the
// frames/s metric), for the sizes and modes of issue 6's scenarios.
func BenchmarkNext(b *testing.B) {
	for _, bc := range []struct {
		mode Mode
		size int
		v6   float64
		seq  bool
	}{
		{ModeSYN, 64, 0, false},
		{ModeSYN, 64, 0, true},
		{ModeEstablished, 64, 0.5, false},
		{ModeMix, 1518, 0, false},
		{ModeUDP, 1518, 1, false},
	} {
		name := fmt.Sprintf("%v/size=%d/v6=%v/seq=%v", bc.mode, bc.size, bc.v6, bc.seq)
		b.Run(name, func(b *testing.B) {
			g := mustNew(b, Config{VIPs: []netip.AddrPort{vip4, vip6}, Mode: bc.mode, Size: bc.size, IPv6: bc.v6,
				Flows: 1_000_000, Sequential: bc.seq, Malformed: 0.01, NonVIP: 0.01, Seed: 1})
			buf := make([]byte, 0, g.MaxFrameLen())
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = g.Next(buf)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}

// BenchmarkWritePcap is Next plus the pcap framing, to io.Discard.
func BenchmarkWritePcap(b *testing.B) {
	g := mustNew(b, Config{VIPs: []netip.AddrPort{vip4}, Flows: 1_000_000, Seed: 1})
	const n = 100_000
	for b.Loop() {
		if err := g.WritePcap(io.Discard, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "frames/s")
}
