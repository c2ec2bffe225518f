package packet

import (
	"bytes"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func TestQUICServerID(t *testing.T) {
	def := QUICConfig{}.WithDefaults()
	long := QUICConfig{CIDLen: 20, ServerIDLen: 8, ConfigID: 2}
	for _, tc := range []struct {
		name    string
		cfg     QUICConfig
		payload []byte
		kind    QUICHeader
		id      uint64
	}{
		{"empty", def, nil, QUICLong, 0},
		{"initial", def, []byte{0xc3, 0, 0, 0, 1, 8}, QUICLong, 0},
		{"version negotiation", def, []byte{0x80, 0, 0, 0, 0}, QUICLong, 0},
		{"short, id 0x1234", def, []byte{0x41, 0x07, 0x12, 0x34, 1, 2, 3, 4, 5}, QUICShort, 0x1234},
		{"short, payload after the cid", def, []byte{0x5f, 0x07, 0xff, 0xfe, 1, 2, 3, 4, 5, 9, 9, 9}, QUICShort, 0xfffe},
		{"length bits are not checked", def, []byte{0x41, 0x1f, 0, 7, 1, 2, 3, 4, 5}, QUICShort, 7},
		{"one octet short", def, []byte{0x41, 0x07, 0x12, 0x34, 1, 2, 3, 4}, QUICNoID, 0},
		{"first octet only", def, []byte{0x41}, QUICNoID, 0},
		{"fixed bit clear", def, []byte{0x01, 0x07, 0x12, 0x34, 1, 2, 3, 4, 5}, QUICNoID, 0},
		{"config rotation 1", def, []byte{0x41, 0x27, 0x12, 0x34, 1, 2, 3, 4, 5}, QUICNoID, 0},
		{"unroutable 0b111", def, []byte{0x41, 0xe7, 0x12, 0x34, 1, 2, 3, 4, 5}, QUICNoID, 0},
		{"8-octet id", long, append([]byte{0x40, 2<<5 | 19, 1, 2, 3, 4, 5, 6, 7, 8}, make([]byte, 11)...), QUICShort, 0x0102030405060708},
		{"8-octet id, cid cut", long, append([]byte{0x40, 2<<5 | 19, 1, 2, 3, 4, 5, 6, 7, 8}, make([]byte, 10)...), QUICNoID, 0},
	} {
		kind, id := QUICServerID(tc.payload, &tc.cfg)
		if kind != tc.kind || id != tc.id {
			t.Errorf("%s: got %d id %#x, want %d id %#x", tc.name, kind, id, tc.kind, tc.id)
		}
	}
}

// PutServerID writes what QUICServerID reads, in the draft's layout: the
// config rotation in the top 3 bits, the CID length - 1 in the low 5, the
// id big-endian after them; the rest is the caller's.
func TestPutServerID(t *testing.T) {
	c := QUICConfig{CIDLen: 12, ServerIDLen: 3, ConfigID: 2}
	cid := bytes.Repeat([]byte{0xee}, 12)
	c.PutServerID(cid, 0xabcdef)
	if want := []byte{2<<5 | 11, 0xab, 0xcd, 0xef, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee}; !bytes.Equal(cid, want) {
		t.Fatalf("cid % x, want % x", cid, want)
	}
	kind, id := QUICServerID(append([]byte{0x40}, cid...), &c)
	if kind != QUICShort || id != 0xabcdef {
		t.Errorf("read back %d %#x", kind, id)
	}
	if c.MaxServerID() != 1<<24-1 || (QUICConfig{ServerIDLen: 8}).MaxServerID() != ^uint64(0) {
		t.Errorf("MaxServerID")
	}
}

func TestQUICConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c  QUICConfig
		ok bool
	}{
		{QUICConfig{}.WithDefaults(), true},
		{QUICConfig{CIDLen: 6, ServerIDLen: 1}, true},
		{QUICConfig{CIDLen: 20, ServerIDLen: 8, ConfigID: 2}, true},
		{QUICConfig{CIDLen: 5, ServerIDLen: 1}, false}, // a 3-octet nonce
		{QUICConfig{CIDLen: 0, ServerIDLen: 1}, false},
		{QUICConfig{CIDLen: 21, ServerIDLen: 2}, false},
		{QUICConfig{CIDLen: 8, ServerIDLen: 4}, false},
		{QUICConfig{CIDLen: 20, ServerIDLen: 9}, false},
		{QUICConfig{CIDLen: 8, ServerIDLen: 0}, false},
		{QUICConfig{CIDLen: 8, ServerIDLen: 2, ConfigID: 6}, true},
		{QUICConfig{CIDLen: 8, ServerIDLen: 2, ConfigID: 7}, false},
		{QUICConfig{CIDLen: 8, ServerIDLen: 2, ConfigID: -1}, false},
	} {
		if err := tc.c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.c, err)
		}
	}
}

// UDPPayload is the datagram's payload up to the UDP length, without the
// Ethernet padding a short frame carries; nothing for TCP or fragments.
func TestUDPPayload(t *testing.T) {
	pl := []byte{0x41, 1, 2, 3}
	f := build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolUDP), udp(1, 443), gopacket.Payload(pl))
	f = append(f, 0, 0, 0, 0, 0, 0) // padding
	var p Parsed
	if r := Parse(f, &p); r != OK {
		t.Fatal(r)
	}
	if got := UDPPayload(f, &p); !bytes.Equal(got, pl) {
		t.Errorf("payload % x, want % x", got, pl)
	}
	ft := build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcp(1, 443, true, false), gopacket.Payload(pl))
	if r := Parse(ft, &p); r != OK {
		t.Fatal(r)
	}
	if got := UDPPayload(ft, &p); got != nil {
		t.Errorf("TCP: % x", got)
	}
}

// FuzzQUICServerID: any payload, any valid layout, no panic, and a short
// header's id is the octets after the first of its DCID.
func FuzzQUICServerID(f *testing.F) {
	f.Add([]byte{0x41, 0x07, 0x12, 0x34, 1, 2, 3, 4, 5}, uint8(8), uint8(2), uint8(0))
	f.Add([]byte{0xc0}, uint8(20), uint8(8), uint8(2))
	f.Fuzz(func(t *testing.T, payload []byte, cidLen, sidLen, cfgID uint8) {
		c := QUICConfig{CIDLen: int(cidLen), ServerIDLen: int(sidLen), ConfigID: int(cfgID)}
		if c.Validate() != nil {
			return
		}
		kind, id := QUICServerID(payload, &c)
		if kind != QUICShort {
			return
		}
		cid := payload[1 : 1+c.CIDLen]
		back := make([]byte, c.CIDLen)
		copy(back, cid)
		c.PutServerID(back, id)
		if !bytes.Equal(back[1:1+c.ServerIDLen], cid[1:1+c.ServerIDLen]) || int(cid[0]>>5) != c.ConfigID {
			t.Fatalf("id %#x does not match the cid % x", id, cid)
		}
	})
}

// A client's Initial: long header with the fixed bit, type 0 in version 1
// (RFC 9000 17.2.2) or type 1 in version 2 (RFC 9369 3.2), in a datagram
// of at least 1200 octets (RFC 9000 14.1).
func TestQUICClientInitial(t *testing.T) {
	pkt := func(first byte, version uint32, n int) []byte {
		b := make([]byte, n)
		b[0] = first
		b[1], b[2], b[3], b[4] = byte(version>>24), byte(version>>16), byte(version>>8), byte(version)
		return b
	}
	for _, tc := range []struct {
		name string
		p    []byte
		want bool
	}{
		{"v1 Initial", pkt(0xc3, 1, 1200), true},
		{"v1 Initial, 1199 octets", pkt(0xc3, 1, 1199), false},
		{"v1 0-RTT", pkt(0xd3, 1, 1200), false},
		{"v1 Handshake", pkt(0xe3, 1, 1200), false},
		{"v2 Initial", pkt(0xd0, 0x6b3343cf, 1252), true},
		{"v2 type 0 (its Retry is 3, 0-RTT 2, Handshake 3)", pkt(0xc0, 0x6b3343cf, 1252), false},
		{"version negotiation", pkt(0xc0, 0, 1200), false},
		{"fixed bit clear", pkt(0x80, 1, 1200), false},
		{"short header", pkt(0x40, 1, 1200), false},
		{"unknown version", pkt(0xc0, 0xff00001d, 1200), false},
		{"empty", nil, false},
	} {
		if got := QUICClientInitial(tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
