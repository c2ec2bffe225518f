package flow

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docSip13 is SipHash-1-3 written from docs/flow-hash.md's text alone:
// key bytes 0..7 and 8..15 as little-endian k0, k1; one round per 8-byte
// block, three at the end; the output v0^v1^v2^v3.
func docSip13(key [16]byte, msg []byte) uint64 {
	k0, k1 := binary.LittleEndian.Uint64(key[:8]), binary.LittleEndian.Uint64(key[8:])
	v := [4]uint64{k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d, k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573}
	rnd := func() {
		v[0] += v[1]
		v[1] = bits.RotateLeft64(v[1], 13) ^ v[0]
		v[0] = bits.RotateLeft64(v[0], 32)
		v[2] += v[3]
		v[3] = bits.RotateLeft64(v[3], 16) ^ v[2]
		v[0] += v[3]
		v[3] = bits.RotateLeft64(v[3], 21) ^ v[0]
		v[2] += v[1]
		v[1] = bits.RotateLeft64(v[1], 17) ^ v[2]
		v[2] = bits.RotateLeft64(v[2], 32)
	}
	b := append(append([]byte(nil), msg...), make([]byte, 8-len(msg)%8)...)
	b[len(b)-1] = byte(len(msg))
	for i := 0; i < len(b); i += 8 {
		m := binary.LittleEndian.Uint64(b[i:])
		v[3] ^= m
		rnd()
		v[0] ^= m
	}
	v[2] ^= 0xff
	rnd()
	rnd()
	rnd()
	return v[0] ^ v[1] ^ v[2] ^ v[3]
}

// docMessage builds the message from the tuple as the document's layout
// tables say, for the mode named in its vector tables.
func docMessage(proto string, src, dst netip.AddrPort, mode string) []byte {
	p := map[string]byte{"tcp": 6, "udp": 17}[proto]
	s, d := src.Addr(), dst.Addr()
	var modeB, pre byte
	sp, dp := src.Port(), dst.Port()
	switch mode {
	case "3-tuple":
		modeB, sp, dp = 1, 0, 0
	case "src-ip":
		modeB, sp, dp, p = 2, 0, 0, 0
		d = netip.IPv6Unspecified()
		if s.Is4() {
			d = netip.IPv4Unspecified()
		}
	case "src-ip-prefix":
		modeB, sp, dp, p = 3, 0, 0, 0
		n := 24
		if s.Is6() {
			n = 48
		}
		pre = byte(n)
		s = netip.PrefixFrom(s, n).Masked().Addr()
		d = netip.IPv6Unspecified()
		if s.Is4() {
			d = netip.IPv4Unspecified()
		}
	}
	fam := byte(4)
	if s.Is6() {
		fam = 6
	}
	m := append(s.AsSlice(), d.AsSlice()...)
	m = binary.BigEndian.AppendUint16(m, sp)
	m = binary.BigEndian.AppendUint16(m, dp)
	return append(m, p, fam, modeB, pre)
}

// TestFlowHashDocVectors reads every vector row of docs/flow-hash.md and
// checks, from the document alone, the message (built from the tuple by
// the layout tables), the hash (an independent SipHash-1-3) and that
// flow.Hasher computes the same under the row's mode.
func TestFlowHashDocVectors(t *testing.T) {
	f, err := os.Open("../docs/flow-hash.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([^`]+)` \\| (tcp|udp) (\\S+) → (\\S+) \\| `([0-9a-f ]+)` \\| `0x([0-9a-f]{16})` \\|$")
	var key4, key6 [16]byte
	for i := range key4 {
		key4[i] = byte(i)
	}
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n++
		var key [16]byte
		mode := "5-tuple"
		if len(m[1]) == 32 { // the first table: the key column
			kb, _ := hex.DecodeString(m[1])
			copy(key[:], kb)
		} else { // the per-mode table: IPv4 key 00..0f, IPv6 all zeros
			mode = m[1]
			key = key6
			if !strings.HasPrefix(m[3], "[") {
				key = key4
			}
		}
		src, dst := netip.MustParseAddrPort(m[3]), netip.MustParseAddrPort(m[4])
		want, _ := hex.DecodeString(strings.ReplaceAll(m[5], " ", ""))
		msg := docMessage(m[2], src, dst, mode)
		if hex.EncodeToString(msg) != hex.EncodeToString(want) {
			t.Errorf("%s %s: message from the layout %x, the document says %x", mode, sc.Text()[:40], msg, want)
		}
		wantH, _ := strconv.ParseUint(m[6], 16, 64)
		if h := docSip13(key, want); h != wantH {
			t.Errorf("%s: SipHash-1-3 of the document's message %#x, the document says %#x", mode, h, wantH)
		}
		md, err := ParseMode(mode)
		if err != nil {
			t.Fatal(err)
		}
		p4, p6 := 24, 48
		var fp4, fp6 *int
		if md == SrcIPPrefix {
			fp4, fp6 = &p4, &p6
		}
		fl, err := NewFields(md, fp4, fp6)
		if err != nil {
			t.Fatal(err)
		}
		tu, _ := TupleFrom(src.Addr(), dst.Addr(), src.Port(), dst.Port(), map[string]uint8{"tcp": 6, "udp": 17}[m[2]])
		if h := NewHasher(Key(key)).HashFields(&tu, fl); h != wantH {
			t.Errorf("%s: Hasher %#x, the document says %#x", mode, h, wantH)
		}
	}
	if n != 9 {
		t.Fatalf("%d vector rows read, want 9", n)
	}
}
