package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/encap"
)

// TestDFMatrixAtMTU: every tunnel kind and family pair, under each
// dataplane.df mode, with the default-like rig at mtu 1500: a packet whose
// outer packet is exactly mtu goes out with the documented DF bit; one
// byte more gets the too-big answer (inner IPv4 with DF, inner IPv6) or is
// dropped (inner IPv4 without DF), with the MTU less the overhead.
func TestDFMatrixAtMTU(t *testing.T) {
	toml := configtest.New().
		Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Section("conntrack", "capacity = 4096").
		VIP("g4", "203.0.113.21", 80, `encap = "gre"`).Backend("b", "10.0.5.1").
		VIP("i4", "203.0.113.22", 80, `encap = "ipip"`).Backend("b", "10.0.5.2").
		VIP("u4", "203.0.113.23", 80, `encap = "gue"`).Backend("b", "10.0.5.3").
		VIP("g46", "203.0.113.24", 80, `encap = "gre"`).Backend("b", "2001:db8:5::4").
		VIP("u64", "2001:db8:ffff::21", 80, `encap = "gue"`).Backend("b", "10.0.5.5").
		VIP("i66", "2001:db8:ffff::22", 80, `encap = "ipip"`).Backend("b", "2001:db8:5::6").
		VIP("u66", "2001:db8:ffff::23", 80, `encap = "gue"`).Backend("b", "2001:db8:5::7").
		VIP("g64", "2001:db8:ffff::24", 80, `encap = "gre"`).Backend("b", "10.0.5.8").
		String()
	type vipc struct {
		addr    string
		kind    encap.Kind
		outerV6 bool
	}
	vips := []vipc{
		{"203.0.113.21", encap.GRE, false}, {"203.0.113.22", encap.IPIP, false}, {"203.0.113.23", encap.GUE, false},
		{"203.0.113.24", encap.GRE, true}, {"2001:db8:ffff::21", encap.GUE, false}, {"2001:db8:ffff::22", encap.IPIP, true},
		{"2001:db8:ffff::23", encap.GUE, true}, {"2001:db8:ffff::24", encap.GRE, false},
	}
	for _, mode := range []encap.DF{encap.DFInherit, encap.DFSet, encap.DFClear} {
		for _, fused := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/fused=%v", mode, fused), func(t *testing.T) {
				r := newRig(t, toml)
				r.w.generalOnly = !fused
				var err error
				r.enc, err = encap.New(encap.Config{SrcV4: r.cfg.Dataplane.LBIPv4.Addr, SrcV6: r.cfg.Dataplane.LBIPv6.Addr, MTU: 1500, DF: mode})
				if err != nil {
					t.Fatal(err)
				}
				r.publish(nil)
				sport := uint16(20000)
				for _, vc := range vips {
					innerV6 := netip.MustParseAddr(vc.addr).Is6()
					client, ipHdr := "198.51.100.30", 20
					if innerV6 {
						client, ipHdr = "2001:db8:c::30", 40
					}
					ovh := encap.Overhead(vc.kind, vc.outerV6)
					for _, df := range []bool{true, false} {
						if innerV6 && !df {
							continue
						}
						for _, extra := range []int{0, 1} {
							sport++
							ipLen := 1500 - ovh + extra
							f := frame(t, client, vc.addr, sport, 80, layers.IPProtocolTCP, "A", ipLen-ipHdr-20, df)
							tooNoDF0 := r.w.c.Encap[encap.DropTooBigNoDF]
							r.now += 1000
							out, v := r.run(f)
							name := fmt.Sprintf("%s %v outerV6=%v df=%v len=%d", vc.addr, vc.kind, vc.outerV6, df, ipLen)
							if extra == 0 {
								if v[0] != Tx || len(out[0]) != 14+1500 {
									t.Errorf("%s: verdict %v, frame %d bytes, want a 1514-byte tunnel frame", name, v[0], len(out[0]))
									continue
								}
								o := out[0][14:]
								if vc.outerV6 {
									if o[0]>>4 != 6 {
										t.Errorf("%s: outer not IPv6", name)
									}
									continue
								}
								gotDF := o[6]&0x40 != 0
								wantDF := mode == encap.DFSet || mode == encap.DFInherit && (innerV6 || df)
								if gotDF != wantDF {
									t.Errorf("%s: outer DF %v, want %v", name, gotDF, wantDF)
								}
								continue
							}
							if !innerV6 && !df {
								if v[0] != Drop || r.w.c.Encap[encap.DropTooBigNoDF] != tooNoDF0+1 {
									t.Errorf("%s: verdict %v, want drop-too-big-no-df", name, v[0])
								}
								continue
							}
							if v[0] != Tx {
								t.Errorf("%s: verdict %v, want a too-big reply", name, v[0])
								continue
							}
							rep := out[0]
							var mtu int
							if innerV6 {
								if rep[12] != 0x86 || rep[14+6] != 58 || rep[54] != 2 {
									t.Errorf("%s: not a packet-too-big: %x", name, rep[:60])
									continue
								}
								mtu = int(binary.BigEndian.Uint32(rep[58:62]))
								if want := max(1500-ovh, 1280); mtu != want {
									t.Errorf("%s: MTU %d, want %d", name, mtu, want)
								}
							} else {
								if rep[12] != 0x08 || rep[14+9] != 1 || rep[34] != 3 || rep[35] != 4 {
									t.Errorf("%s: not a frag-needed: %x", name, rep[:40])
									continue
								}
								mtu = int(binary.BigEndian.Uint16(rep[40:42]))
								if mtu != 1500-ovh {
									t.Errorf("%s: MTU %d, want %d", name, mtu, 1500-ovh)
								}
							}
						}
					}
				}
			})
		}
	}
}
