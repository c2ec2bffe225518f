package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// TestChanceIPv6AtMinimumMTU: an IPv6 VIP tunnelled with GUE to
// IPv6 backends, with a second chance, at dataplane.mtu 1332: the least
// package config accepts for it (1280 + 52) and the value its error
// message tells an operator to set. A flow whose slot moved, mid
// connection, is given a second chance (20 bytes, sticky for the
// flow's life). Its client, told 1280 by a Packet Too Big, sends
// 1280-byte packets, which fit the tunnel without the field: each is
// answered with another Packet Too Big quoting 1280, which the client
// cannot go below, so every full-size packet of the flow is lost for
// good. The packet should go without the field (as an IPv4 packet
// without DF does).
func TestChanceIPv6AtMinimumMTU(t *testing.T) {
	const vip6 = "2001:db8:ffff::50"
	const client6 = "2001:db8:aaaa::9"
	r := newRig(t, testConfig)
	mtu := 1280 + encap.Overhead(encap.GUE, true)
	enc, err := encap.New(encap.Config{SrcV4: r.cfg.Dataplane.LBIPv4.Addr, SrcV6: r.cfg.Dataplane.LBIPv6.Addr, MTU: mtu})
	if err != nil {
		t.Fatal(err)
	}
	specs := func(n int) []VIPSpec {
		v := VIPSpec{Key: flow.VIPKey{Addr: netip.MustParseAddr(vip6), Port: 80, Proto: 6}, Name: "sc6", Addr: netip.MustParseAddr(vip6),
			Port: 80, Proto: 6, Encap: encap.GUE, TableSize: maglev.DefaultSize, SecondChance: chanceWindow}
		for i := 1; i <= n; i++ {
			v.Backends = append(v.Backends, BackendSpec{Name: fmt.Sprintf("be%d", i), Addr: netip.MustParseAddr(fmt.Sprintf("2001:db8:9::%d", i)), Config: 1, Eff: Effective{Weight: 1}})
		}
		return []VIPSpec{v}
	}
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	s0, err := NewServicesAt(nil, enc, nh, specs(3), t0)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := NewServicesAt(s0, enc, nh, specs(4), t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(s1)

	// A client port whose slot moved when be4 joined.
	h := flow.NewHasher(r.key)
	t3, t4 := chanceTable(t, 3), chanceTable(t, 4)
	var port uint16
	for p := uint16(20000); ; p++ {
		tp, _ := flow.TupleFrom(netip.MustParseAddr(client6), netip.MustParseAddr(vip6), p, 80, 6)
		hs := h.Hash(&tp)
		if t3.Backend(t3.Lookup(hs)).Key != t4.Backend(t4.Lookup(hs)).Key {
			port = p
			break
		}
	}
	// Mid connection: the flow is given its second chance.
	if _, v := r.run(frame(t, client6, vip6, port, 80, layers.IPProtocolTCP, "A", 10, false)); v[0] != Tx {
		t.Fatalf("small ACK: verdict %v", v[0])
	}
	if r.w.c.SecondChance != 1 {
		t.Fatalf("SecondChance %d, want 1: the flow carries no second chance", r.w.c.SecondChance)
	}
	// A 1280-byte packet (IPv6 minimum MTU), which fits the tunnel
	// without the field (1280 + 52 = mtu).
	big := frame(t, client6, vip6, port, 80, layers.IPProtocolTCP, "AP", 1280-40-20, false)
	if n := len(ipPacket(big)); n != 1280 {
		t.Fatalf("IPv6 packet %d bytes", n)
	}
	for k := range 3 {
		out, v := r.run(big)
		if v[0] == Tx && out[0][12] == 0x86 && out[0][13] == 0xdd && out[0][20] == 58 && out[0][54] == 2 {
			t.Fatalf("1280-byte packet %d: answered with Packet Too Big, MTU %d (the client cannot go below 1280); want it forwarded to the backend",
				k, binary.BigEndian.Uint32(out[0][58:62]))
		}
		if v[0] != Tx {
			t.Fatalf("1280-byte packet %d: verdict %v, want Tx to the backend", k, v[0])
		}
		dst, inner, _ := decodeTunnel(t, out[0])
		if !dst.Is6() || len(inner) < 1280 {
			t.Fatalf("1280-byte packet %d: to %v with %d bytes", k, dst, len(inner))
		}
	}
}
