package main

import (
	"encoding/binary"
	"flag"
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/gen"
)

// genConfig reads a scenario's fulcrum-gen flags into the generator's
// Config, as fulcrum-gen does (ipv6 share auto from the VIPs).
func genConfig(t *testing.T, args []string) (gen.Config, int) {
	t.Helper()
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	n := fs.Int("n", 0, "")
	flows := fs.Int("flows", 0, "")
	mode := fs.String("mode", "", "")
	size := fs.Int("size", 0, "")
	vips := fs.String("vips", "", "")
	seed := fs.Uint64("seed", 0, "")
	inorder := fs.Bool("inorder", false, "")
	src := fs.String("src", "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	m, err := gen.ParseMode(*mode)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := gen.ParseVIPs(*vips)
	if err != nil {
		t.Fatal(err)
	}
	var n6 int
	for _, v := range vs {
		if v.Addr().Is6() {
			n6++
		}
	}
	c := gen.Config{VIPs: vs, Mode: m, Size: *size, Flows: *flows, Seed: *seed, InOrder: *inorder, IPv6: float64(n6) / float64(len(vs)), SYNShare: gen.DefaultSYNShare}
	if *src != "" {
		c.SrcV4 = netip.MustParsePrefix(*src)
	}
	return c, *n
}

// Every scenario's pcap is what its title says: frames of the stated size
// (FCS excluded in the file), the stated family, TCP SYNs or established
// ACKs only, to the scenario's VIPs (each one used), from exactly
// Flows/workers distinct client flows; and an in-order scenario (the SYN
// flood, the 1M-flow cases) never repeats a 5-tuple within a pass.
func TestScenarioTraffic(t *testing.T) {
	for _, s := range Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			for q := range s.workers() {
				c, n := genConfig(t, s.GenArgs(q))
				if n != s.Frames {
					t.Fatalf("-n %d, want %d", n, s.Frames)
				}
				g, err := gen.New(c)
				if err != nil {
					t.Fatal(err)
				}
				vipSet := map[netip.Addr]int{}
				for _, a := range s.VIPAddrs() {
					vipSet[a] = 0
				}
				type key struct {
					src   netip.Addr
					sport uint16
				}
				seen := make(map[key]struct{}, min(n, s.Flows))
				buf := make([]byte, 0, g.MaxFrameLen())
				repeats := 0
				for i := range n {
					f, kind := g.Next(buf)
					if len(f) != s.Size-4 {
						t.Fatalf("frame %d: %d bytes, want %d", i, len(f), s.Size-4)
					}
					wantKind := gen.KindIPv4
					if s.IPv6 {
						wantKind = gen.KindIPv6
					}
					if kind != wantKind {
						t.Fatalf("frame %d: kind %v, want %v", i, kind, wantKind)
					}
					var src, dst netip.Addr
					var l4 []byte
					if s.IPv6 {
						src, dst, l4 = netip.AddrFrom16([16]byte(f[22:38])), netip.AddrFrom16([16]byte(f[38:54])), f[54:]
					} else {
						src, dst, l4 = netip.AddrFrom4([4]byte(f[26:30])), netip.AddrFrom4([4]byte(f[30:34])), f[34:]
					}
					if _, ok := vipSet[dst]; !ok {
						t.Fatalf("frame %d: to %v, not a VIP of the scenario", i, dst)
					}
					vipSet[dst]++
					flags := l4[13]
					switch s.Mode {
					case "syn":
						if flags != 0x02 {
							t.Fatalf("frame %d: flags %#x, want SYN only", i, flags)
						}
					case "established":
						if flags&0x02 != 0 || flags&0x10 == 0 {
							t.Fatalf("frame %d: flags %#x, want ACK without SYN", i, flags)
						}
					}
					k := key{src, binary.BigEndian.Uint16(l4)}
					if _, ok := seen[k]; ok {
						repeats++
					}
					seen[k] = struct{}{}
				}
				// Random draws (not in order) may miss a few flows: 50k
				// draws of 10k leave about e^-5 of them out.
				if want := s.Flows / s.workers(); len(seen) > want || (s.InOrder && len(seen) != min(n, want)) || len(seen) < want*99/100 {
					t.Errorf("queue %d: %d distinct flows, want %d", q, len(seen), want)
				}
				if s.InOrder && n <= s.Flows/s.workers() && repeats != 0 {
					t.Errorf("queue %d: %d repeated tuples in one in-order pass", q, repeats)
				}
				for a, k := range vipSet {
					if k == 0 {
						t.Errorf("VIP %v never used", a)
					}
				}
			}
		})
	}
}

// innerSumsOK accepts every packet fulcrum-gen writes (both families, each
// transport, the smallest and largest sizes) and rejects it with one bit
// flipped.
func TestInnerSumsOKOnGeneratedFrames(t *testing.T) {
	vips := []netip.AddrPort{netip.MustParseAddrPort("203.0.113.7:80"), netip.MustParseAddrPort("[2001:db8::7]:80")}
	for _, m := range []gen.Mode{gen.ModeMix, gen.ModeUDP} {
		for _, size := range []int{64, 333, 1518} {
			g, err := gen.New(gen.Config{VIPs: vips, Mode: m, Size: size, IPv6: 0.5, Flows: 50, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 0, g.MaxFrameLen())
			for i := range 200 {
				f, _ := g.Next(buf)
				ip := append([]byte(nil), f[14:]...)
				if !innerSumsOK(ip) {
					t.Fatalf("mode %v size %d frame %d: generated packet rejected", m, size, i)
				}
				ip[len(ip)-3] ^= 1
				if innerSumsOK(ip) {
					t.Fatalf("mode %v size %d frame %d: damaged packet accepted", m, size, i)
				}
			}
		}
	}
}
