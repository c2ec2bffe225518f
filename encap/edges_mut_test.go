package encap

import (
	"encoding/binary"
	"testing"
)

// Edge cases that no other test of the package pinned down: a mutation
// audit changed each line they guard (a comparison, a condition, a
// constant) and every other test still passed.

// gueV6Sum checks the outer UDP checksum of a GUE-over-IPv6 frame at
// buf[start:start+length].
func gueV6Sum(buf []byte, start, length int) (field, sum uint16) {
	seg := buf[start+54 : start+length]
	return binary.BigEndian.Uint16(seg[6:]), refSum(pseudo6(lbSrc6.AsSlice(), backend6.AsSlice(), len(seg), 17), seg)
}

// The first fragment of a TCP segment: its checksum covers the whole
// datagram, not the fragment, so the outer GUE checksum over IPv6 must be
// summed from the bytes (the backend reassembles and drops nothing).
func TestEdgeGUEv6InnerFragment(t *testing.T) {
	e := newEnc(t, nil)
	be := mustBackend(t, e, backend6)
	frame := build(t, spec{l4: "tcp", frag: true, badL4: true, payload: 64})
	buf, off, n, p := load(t, frame, headroom)
	start, length, res := e.Encap(buf, off, n, &p, 0x1234_5678_9abc_def0, GUE, &be, nextHop, portMAC)
	if res != Forward {
		t.Fatalf("Encap = %v", res)
	}
	if f, s := gueV6Sum(buf, start, length); s != 0xffff {
		t.Errorf("Encap: outer UDP checksum %#04x does not verify (sum %#04x)", f, s)
	}
	buf, off, n, p = load(t, frame, headroom)
	h := e.Prepare(GUE, &be, false)
	start, length = h.Encap(buf, off, n, &p, GUE, 0x1234_5678_9abc_def0, &nextHop, &portMAC)
	if f, s := gueV6Sum(buf, start, length); length == 0 || s != 0xffff {
		t.Errorf("Header.Encap: outer UDP checksum %#04x does not verify (sum %#04x)", f, s)
	}
}

// A GUE-over-IPv6 checksum that computes to 0 is sent as 0xffff (RFC 768;
// 0 means none, which IPv6 forbids): some value of an inner payload word
// makes it 0, and every value must give a checksum that verifies.
func TestEdgeGUEv6ChecksumNeverZero(t *testing.T) {
	e := newEnc(t, nil)
	be := mustBackend(t, e, backend6)
	frame := build(t, spec{l4: "udp0", payload: 32})
	buf, off, n, p := load(t, frame, headroom)
	h := e.Prepare(GUE, &be, false)
	word := off + n - 2 // the inner UDP payload's last word
	var ones int
	for w := range 1 << 16 {
		binary.BigEndian.PutUint16(buf[word:], uint16(w))
		start, length, res := e.Encap(buf, off, n, &p, 0x42, GUE, &be, nextHop, portMAC)
		if res != Forward {
			t.Fatalf("Encap = %v", res)
		}
		f, s := gueV6Sum(buf, start, length)
		if f == 0 || s != 0xffff {
			t.Fatalf("Encap, word %#04x: outer UDP checksum %#04x (sum %#04x)", w, f, s)
		}
		if f == 0xffff {
			ones++
		}
		start, length = h.Encap(buf, off, n, &p, GUE, 0x42, &nextHop, &portMAC)
		f, s = gueV6Sum(buf, start, length)
		if length == 0 || f == 0 || s != 0xffff {
			t.Fatalf("Header.Encap, word %#04x: outer UDP checksum %#04x (sum %#04x)", w, f, s)
		}
	}
	if ones == 0 {
		t.Fatal("no payload word made the checksum 0xffff: the case is not exercised")
	}
}

// The prepared header never sends flow label 0 (the hash's bits 44-63 all
// 0): like Encap, it sends 1.
func TestEdgeHeaderFlowLabelNeverZero(t *testing.T) {
	e := newEnc(t, nil)
	be := mustBackend(t, e, backend6)
	frame := build(t, spec{l4: "tcp", payload: 10})
	buf, off, n, p := load(t, frame, headroom)
	h := e.Prepare(GRE, &be, false)
	start, length := h.Encap(buf, off, n, &p, GRE, 0, &nextHop, &portMAC)
	if length == 0 {
		t.Fatal("Header.Encap refused")
	}
	if label := binary.BigEndian.Uint32(buf[start+14:]) & 0xfffff; label != 1 {
		t.Fatalf("flow label %#x for hash 0, want 1", label)
	}
}

// A packet that fills the MTU exactly fits, over either family.
func TestEdgeFitsAtMTU(t *testing.T) {
	e := newEnc(t, nil)
	b4, b6 := mustBackend(t, e, backend4), mustBackend(t, e, backend6)
	for _, k := range []Kind{GRE, IPIP, GUE} {
		if !e.Fits(k, &b4, e.mtu-Overhead(k, false)) || e.Fits(k, &b4, e.mtu-Overhead(k, false)+1) {
			t.Errorf("%v over IPv4: Fits wrong at the MTU's edge", k)
		}
		if !e.Fits(k, &b6, e.mtu-Overhead(k, true)) || e.Fits(k, &b6, e.mtu-Overhead(k, true)+1) {
			t.Errorf("%v over IPv6: Fits wrong at the MTU's edge", k)
		}
	}
}
