package encap

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// TestHeaderMatchesEncap: for every packet the prepared Header takes, it
// writes the same buffer as Encap, byte for byte (the whole buffer, so
// it also writes nothing Encap does not), under every configuration,
// kind, outer and inner family, TOS, DF, fragment and checksum case of
// TestEncapForward's specs and random hashes. Encap itself is checked
// field by field against gopacket there; this ties the prepared path to
// it.
func TestHeaderMatchesEncap(t *testing.T) {
	configs := []func(*Config){
		nil,
		func(c *Config) {
			c.DF = DFSet
			c.TTL = 9
			c.GUEPort = 7777
			c.GUESrcPortMin, c.GUESrcPortMax = 1000, 1009
		},
		func(c *Config) { c.DF = DFClear; c.GUEZeroChecksumV6 = true },
		func(c *Config) { c.MTU = 1280 },
	}
	rng := rand.New(rand.NewPCG(5, 19))
	specs := append([]spec{
		{name: "v4-udp-badsum", l4: "udp", payload: 40, df: true, badL4: true},
		{name: "v6-tcp-badsum", v6: true, l4: "tcp", payload: 40, badL4: true},
		{name: "v4-icmp-error", l4: "icmperr", payload: 28, df: true},
		{name: "v4-big", l4: "tcp", payload: 1400, df: true},
		{name: "v6-big", v6: true, l4: "udp", payload: 1400},
	}, forwardSpecs...)
	taken := 0
	for ci, mod := range configs {
		e := newEnc(t, mod)
		for _, s := range specs {
			frame := build(t, s)
			for _, kind := range Kinds() {
				for _, addr := range []Backend{mustBackend(t, e, backend4), mustBackend(t, e, backend6)} {
					for _, prepV6 := range []bool{false, true} {
						h := e.Prepare(kind, &addr, prepV6)
						if !h.Usable() {
							t.Fatalf("Prepare(%v, %v, v6 %v) is not usable", kind, addr.Addr(), prepV6)
						}
						for range 4 {
							hash := rng.Uint64()
							name := fmt.Sprintf("config %d/%s/%v/to %v/prepared v6 %v/%#x", ci, s.name, kind, addr.Addr(), prepV6, hash)
							want, off, n, p := load(t, frame, headroom)
							got := bytes.Clone(want)
							ws, wl, res := e.Encap(want, off, n, &p, hash, kind, &addr, nextHop, portMAC)
							if !h.Fits(kind, &p) {
								if (p.L3 == packet.L3IPv6) == prepV6 && res == Forward {
									t.Fatalf("%s: Fits refuses a packet Encap forwards", name)
								}
								continue
							}
							if res != Forward {
								t.Fatalf("%s: Fits takes a packet Encap does not forward (%v)", name, res)
							}
							gs, gl := h.Encap(got, off, n, &p, kind, hash, &nextHop, &portMAC)
							if gs != ws || gl != wl || !bytes.Equal(got, want) {
								t.Fatalf("%s: Header.Encap wrote frame %d+%d, Encap %d+%d; buffers equal: %v\n got %x\nwant %x",
									name, gs, gl, ws, wl, bytes.Equal(got, want), got[gs:gs+gl], want[ws:ws+wl])
							}
							taken++
						}
					}
				}
			}
		}
	}
	if taken == 0 {
		t.Fatal("no packet took the prepared header")
	}
}

// TestHeaderRefuses: a Header that cannot serve a packet says so and
// writes nothing.
func TestHeaderRefuses(t *testing.T) {
	e := newEnc(t, nil)
	be := mustBackend(t, e, backend4)
	if h := e.Prepare(NumKinds, &be, false); h.Usable() {
		t.Error("a bad kind is usable")
	}
	if h := e.Prepare(GRE, &Backend{}, false); h.Usable() {
		t.Error("the zero backend is usable")
	}
	if h := e.Prepare(GRE, nil, false); h.Usable() {
		t.Error("a nil backend is usable")
	}
	only4 := newEnc(t, func(c *Config) { c.SrcV6 = netip.Addr{} })
	if h := only4.Prepare(GRE, new(mustBackend(t, e, backend6)), false); h.Usable() {
		t.Error("an IPv6 backend is usable without an IPv6 source address")
	}
	var zero Header
	buf, off, n, p := load(t, build(t, spec{l4: "tcp", payload: 10, df: true}), headroom)
	orig := bytes.Clone(buf)
	if s, l := zero.Encap(buf, off, n, &p, GRE, 1, &nextHop, &portMAC); l != 0 || s != 0 || !bytes.Equal(buf, orig) {
		t.Error("the zero Header wrote a frame")
	}
	h := e.Prepare(GUE, &be, false)
	if s, l := h.Encap(buf, off, n, &p, GUE, 1, &nextHop, &portMAC); l == 0 || s == 0 {
		t.Fatal("the header refuses a packet it fits") // the positive control of the cases below
	}
	buf = bytes.Clone(orig)
	for _, c := range []struct {
		name   string
		buf    []byte
		off, n int
		kind   Kind
	}{
		{"no headroom", buf[off-h.HeaderLen()+14+1:], h.HeaderLen() - 14 - 1, n, GUE},
		{"negative offset", buf, -1, n, GUE},
		{"negative length", buf, off, -1, GUE},
		{"short buffer", buf[:off+20], off, n, GUE},
		{"frame shorter than the IP packet", buf, off, n - 1, GUE},
		{"another kind", buf, off, n, GRE},
	} {
		if s, l := h.Encap(c.buf, c.off, c.n, &p, c.kind, 1, &nextHop, &portMAC); l != 0 || s != 0 || !bytes.Equal(buf, orig) {
			t.Errorf("%s: wrote a frame", c.name)
		}
	}
	v6 := e.Prepare(GRE, &be, true)
	if v6.Fits(GRE, &p) {
		t.Error("a header prepared for IPv6 inner packets takes an IPv4 one")
	}
}
