package quiclb

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// Every CID the generator issues has the layout's length, the layout's
// first octet and the server id where the LB reads it, and CIDs differ.
func TestGeneratorWritesTheServerID(t *testing.T) {
	for _, tc := range []struct {
		layout packet.QUICConfig
		id     uint64
	}{
		{packet.QUICConfig{}, 2},
		{packet.QUICConfig{CIDLen: 20, ServerIDLen: 8, ConfigID: 1}, 1<<64 - 1},
		{packet.QUICConfig{CIDLen: 6, ServerIDLen: 1, ConfigID: 2}, 255},
	} {
		g, err := NewGenerator(tc.layout, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for range 100 {
			c, err := g.GenerateConnectionID()
			if err != nil {
				t.Fatal(err)
			}
			b := c.Bytes()
			if len(b) != g.ConnectionIDLen() || len(b) != g.Layout.CIDLen {
				t.Fatalf("%+v: CID of %d octets", g.Layout, len(b))
			}
			if want := byte(g.Layout.ConfigID)<<5 | byte(g.Layout.CIDLen-1); b[0] != want {
				t.Errorf("%+v: first octet %#x, want %#x", g.Layout, b[0], want)
			}
			kind, id := packet.QUICServerID(append([]byte{0x40}, b...), &g.Layout)
			if kind != packet.QUICShort || id != tc.id {
				t.Fatalf("%+v: read back %d id %d, want %d", g.Layout, kind, id, tc.id)
			}
			seen[string(b)] = true
		}
		if len(seen) < 99 {
			t.Errorf("%+v: %d distinct CIDs of 100", g.Layout, len(seen))
		}
	}
	if _, err := NewGenerator(packet.QUICConfig{}, 1<<16); err == nil {
		t.Error("server id 65536 accepted for 2 octets")
	}
	if _, err := NewGenerator(packet.QUICConfig{CIDLen: 4}, 1); err == nil {
		t.Error("a 4-octet CID accepted")
	}
}
