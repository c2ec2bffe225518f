package decap

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"
)

// TestStripChance reads the second chance from packets built with
// gopacket and by hand from docs/second-chance.md: a GRE key holding an
// IPv4 address (with and without the GRE checksum before it), Fulcrum's GUE
// private data block naming an IPv4 or IPv6 backend, and no chance from a
// plain tunnel or from another private block. Malformed fields are refused.
func TestStripChance(t *testing.T) {
	in4, in6 := innerSYN(t, false), innerSYN(t, true)
	chance4 := netip.MustParseAddr("192.0.2.22")
	chance6 := netip.MustParseAddr("2001:db8:1::22")
	block := func(fam byte, a netip.Addr) []byte { return cat([]byte{0x53, 0x43, fam, 0}, a.AsSlice()) }
	gueWith := func(outerV6 bool, priv, inner []byte) []byte {
		return udpWith(t, outerV6, DefaultGUEPort, cat([]byte{byte(len(priv) / 4), byte(ipipProto(inner)), 0, 0}, priv, inner))
	}
	for _, c := range []struct {
		name   string
		pkt    []byte
		inner  []byte
		chance netip.Addr
		err    error
	}{
		{"gre no key", gre(t, false, in4), in4, netip.Addr{}, nil},
		{"gre key", greWith(t, false, &layers.GRE{KeyPresent: true, Key: 0xc0000216, Protocol: layers.EthernetTypeIPv4}, in4), in4, chance4, nil},
		{"gre6 key inner v6", greWith(t, true, &layers.GRE{KeyPresent: true, Key: 0xc0000216, Protocol: layers.EthernetTypeIPv6}, in6), in6, chance4, nil},
		{"gre checksum and key", greWith(t, false, &layers.GRE{ChecksumPresent: true, KeyPresent: true, Key: 0xc0000216, Protocol: layers.EthernetTypeIPv4}, in4), in4, chance4, nil},
		{"gre key 0.0.0.0", greWith(t, false, &layers.GRE{KeyPresent: true, Key: 0, Protocol: layers.EthernetTypeIPv4}, in4), nil, netip.Addr{}, ErrSecondChance},
		{"gre key 127.0.0.1", greWith(t, false, &layers.GRE{KeyPresent: true, Key: 0x7f000001, Protocol: layers.EthernetTypeIPv4}, in4), nil, netip.Addr{}, ErrSecondChance},
		{"gre key multicast", greWith(t, false, &layers.GRE{KeyPresent: true, Key: 0xe0000001, Protocol: layers.EthernetTypeIPv4}, in4), nil, netip.Addr{}, ErrSecondChance},
		{"gre key and sequence", greWith(t, false, &layers.GRE{KeyPresent: true, SeqPresent: true, Key: 0xc0000216, Protocol: layers.EthernetTypeIPv4}, in4), nil, netip.Addr{}, ErrGREFlags},
		{"gue plain", gue(t, false, in4), in4, netip.Addr{}, nil},
		{"gue chance v4", gueWith(false, block(4, chance4), in4), in4, chance4, nil},
		{"gue chance v6 over v6", gueWith(true, block(6, chance6), in6), in6, chance6, nil},
		{"gue chance v6 over v4", gueWith(false, block(6, chance6), in4), in4, chance6, nil},
		{"gue other private data", gueWith(false, []byte{0x12, 0x34, 4, 0, 192, 0, 2, 22}, in4), in4, netip.Addr{}, nil},
		{"gue chance bad family", gueWith(false, block(5, chance4), in4), nil, netip.Addr{}, ErrSecondChance},
		{"gue chance v6 cut short", gueWith(false, block(6, chance6)[:8], in4), nil, netip.Addr{}, ErrSecondChance},
		{"gue chance loopback", gueWith(false, block(4, netip.MustParseAddr("127.0.0.1")), in4), nil, netip.Addr{}, ErrSecondChance},
		{"gue chance v4-mapped", gueWith(false, block(6, netip.MustParseAddr("::ffff:192.0.2.22")), in4), nil, netip.Addr{}, ErrSecondChance},
	} {
		t.Run(c.name, func(t *testing.T) {
			inner, _, ch, err := StripChance(c.pkt)
			if err != c.err || ch != c.chance || !bytes.Equal(inner, c.inner) {
				t.Fatalf("StripChance: chance %v err %v inner %x; want %v %v %x", ch, err, inner, c.chance, c.err, c.inner)
			}
			// The other entry points agree: the payload after the outer
			// header (raw IPv6 socket), the GUE header on (UDP socket).
			hl := outerLen(c.pkt)
			if c.pkt[9] == 17 || c.pkt[0]>>4 == 6 && c.pkt[6] == 17 {
				inner, _, ch, err = std.StripGUEChance(c.pkt[hl+8:])
			} else {
				inner, _, ch, err = std.StripPayloadChance(47, c.pkt[hl:])
			}
			if err != c.err || ch != c.chance || !bytes.Equal(inner, c.inner) {
				t.Fatalf("payload entry point: chance %v err %v; want %v %v", ch, err, c.chance, c.err)
			}
			// Strip itself checks the field the same way.
			if _, _, err := Strip(c.pkt); err != c.err {
				t.Fatalf("Strip: err %v, want %v", err, c.err)
			}
		})
	}
}
