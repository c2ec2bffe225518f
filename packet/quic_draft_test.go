package packet

import "testing"

// docs/quic.md: "the IETF's QUIC-LB draft (draft-ietf-quic-load-balancers)
// standardises the layout. Fulcrum follows the draft's plaintext
// algorithm", and "the draft reserves 0b11". Since draft-17 the draft's
// first octet is Config Rotation (3 bits, 0..6; 0b111 unroutable) and the
// CID length - 1 (5 bits) (draft-21 "First CID octet", its YANG
// config-id range "0..6"). Fulcrum reads 2 bits of config rotation: a
// server that writes the draft's first octet for config 1 (0b001_00111)
// is never routed under quic_config_id = 1, and under quic_config_id = 0
// its config-1 CIDs are read with config 0's server ids (in a rotation,
// another server's).
func TestQUICFirstOctetIsTheDraftsLayout(t *testing.T) {
	cid := func(first byte) []byte { // short header, draft layout, server id 2
		return []byte{0x41, first, 0x00, 0x02, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xff, 0xff}
	}
	const len7 = 8 - 1
	for _, tc := range []struct {
		name   string
		config int
		first  byte
		kind   QUICHeader
	}{
		{"config 0 under config 0", 0, 0<<5 | len7, QUICShort},
		{"config 1 under config 1", 1, 1<<5 | len7, QUICShort},
		{"config 2 under config 2", 2, 2<<5 | len7, QUICShort},
		{"config 1 under config 0: another configuration", 0, 1<<5 | len7, QUICNoID},
		{"config 2 under config 1: another configuration", 1, 2<<5 | len7, QUICNoID},
		{"0b111: unroutable", 0, 7<<5 | len7, QUICNoID},
	} {
		c := QUICConfig{ConfigID: tc.config}.WithDefaults()
		if kind, id := QUICServerID(cid(tc.first), &c); kind != tc.kind || kind == QUICShort && id != 2 {
			t.Errorf("%s: first octet %#02x: got kind %d id %d, want kind %d (id 2 if routed)", tc.name, tc.first, kind, id, tc.kind)
		}
	}
}
