package flow

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// refSipHash is a plain, byte-at-a-time SipHash-c-d written from the paper
// (Aumasson and Bernstein, 2012), independent of the unrolled Hash. It is
// checked against the paper's published SipHash-2-4 vectors and against
// CPython's SipHash-1-3, so it can judge Hash.
func refSipHash(c, d int, k0, k1 uint64, msg []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	var block [8]byte
	n := len(msg)
	for i := 0; i+8 <= n; i += 8 {
		m := binary.LittleEndian.Uint64(msg[i:])
		v3 ^= m
		for j := 0; j < c; j++ {
			round()
		}
		v0 ^= m
	}
	rest := msg[n-n%8:]
	block = [8]byte{}
	copy(block[:], rest)
	block[7] = byte(n)
	m := binary.LittleEndian.Uint64(block[:])
	v3 ^= m
	for j := 0; j < c; j++ {
		round()
	}
	v0 ^= m
	v2 ^= 0xff
	for j := 0; j < d; j++ {
		round()
	}
	return v0 ^ v1 ^ v2 ^ v3
}

// The SipHash paper's appendix: key 00 01 .. 0f, message 00 01 .. (n-1).
func TestRefSipHash24PaperVectors(t *testing.T) {
	var key [16]byte
	for i := range key {
		key[i] = byte(i)
	}
	k0, k1 := binary.LittleEndian.Uint64(key[:8]), binary.LittleEndian.Uint64(key[8:])
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, tc := range []struct {
		n    int
		want uint64
	}{
		{0, 0x726fdb47dd0e0e31},
		{1, 0x74f839c593dc67fd},
		{15, 0xa129ca6149be45e5},
	} {
		if got := refSipHash(2, 4, k0, k1, msg[:tc.n]); got != tc.want {
			t.Errorf("SipHash-2-4 of %d bytes = %#x, want %#x", tc.n, got, tc.want)
		}
	}
}

// CPython 3.11+ hashes bytes with SipHash-1-3; PYTHONHASHSEED=0 makes its
// key all zeros. That is an independent implementation of the variant Hash
// uses.
func TestRefSipHash13AgainstCPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed (scripts/setup.sh installs it)")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var msgs [][]byte
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 40, 64} {
		m := make([]byte, n)
		for i := range m {
			m[i] = byte(rng.Uint32())
		}
		msgs = append(msgs, m)
	}
	var prog strings.Builder
	prog.WriteString("import sys\nassert sys.hash_info.algorithm == 'siphash13', sys.hash_info.algorithm\n")
	for _, m := range msgs {
		fmt.Fprintf(&prog, "print(hash(bytes.fromhex('%x')) & 0xffffffffffffffff)\n", m)
	}
	cmd := exec.Command(py, "-c", prog.String())
	cmd.Env = append(cmd.Environ(), "PYTHONHASHSEED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(msgs) {
		t.Fatalf("python3 printed %d values, want %d: %s", len(lines), len(msgs), out)
	}
	for i, m := range msgs {
		want, err := strconv.ParseUint(lines[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := refSipHash(1, 3, 0, 0, m); got != want {
			t.Errorf("SipHash-1-3(0, %x) = %#x, CPython says %#x", m, got, want)
		}
	}
}

func mustTuple(t testing.TB, src, dst string, sp, dp uint16, proto uint8) Tuple {
	tp, ok := TupleFrom(netip.MustParseAddr(src), netip.MustParseAddr(dst), sp, dp, proto)
	if !ok {
		t.Fatalf("bad tuple %s %s", src, dst)
	}
	return tp
}

// Hash must equal SipHash-1-3 over Message for every tuple and key.
func TestHashMatchesSpecification(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		var k Key
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		var tp Tuple
		if i%2 == 0 {
			var s, d [4]byte
			binary.BigEndian.PutUint32(s[:], rng.Uint32())
			binary.BigEndian.PutUint32(d[:], rng.Uint32())
			tp.SetV4(s, d)
		} else {
			for j := range tp.Src {
				tp.Src[j], tp.Dst[j] = byte(rng.Uint32()), byte(rng.Uint32())
			}
			tp.V6 = true
		}
		tp.SrcPort, tp.DstPort, tp.Proto = uint16(rng.Uint32()), uint16(rng.Uint32()), uint8(rng.Uint32())
		h := NewHasher(k)
		msg := tp.Message(nil)
		want := refSipHash(1, 3, h.k0, h.k1, msg)
		if got := h.Hash(&tp); got != want {
			t.Fatalf("Hash(%v, key %v) = %#x, SipHash-1-3 over %x = %#x", tp, k, got, msg, want)
		}
	}
}

// The fleet contract: these vectors are published in docs/flow-hash.md.
// Each was checked against the reference above (which is checked against
// the SipHash paper and CPython); an implementation on any platform must
// reproduce them.
var contractVectors = []struct {
	key          string
	src, dst     string
	sport, dport uint16
	proto        uint8
	message      string
	hash         uint64
}{
	{"000102030405060708090a0b0c0d0e0f", "198.51.100.10", "203.0.113.7", 40000, 80, 6,
		"c633640acb0071079c40005006040000", 0xa6229e1ccbb76862},
	{"000102030405060708090a0b0c0d0e0f", "198.51.100.10", "203.0.113.7", 40000, 80, 17,
		"c633640acb0071079c40005011040000", 0x04c287ab705cfe0f},
	{"00000000000000000000000000000000", "2001:db8::1", "2001:db8:ffff::7", 443, 12345, 6,
		"20010db800000000000000000000000120010db8ffff0000000000000000000701bb303906060000", 0x7a0c5be154234b5e},
}

func TestContractVectors(t *testing.T) {
	for i, v := range contractVectors {
		k, err := ParseKey(v.key)
		if err != nil {
			t.Fatal(err)
		}
		tp := mustTuple(t, v.src, v.dst, v.sport, v.dport, v.proto)
		msg := fmt.Sprintf("%x", tp.Message(nil))
		h := NewHasher(k)
		ref := refSipHash(1, 3, h.k0, h.k1, tp.Message(nil))
		got := h.Hash(&tp)
		t.Logf("vector %d: key %s tuple %v message %s hash %#016x", i, v.key, tp, msg, got)
		if msg != v.message {
			t.Errorf("vector %d: message %s, want %s", i, msg, v.message)
		}
		if got != ref || got != v.hash {
			t.Errorf("vector %d: Hash %#016x, reference %#016x, published %#016x", i, got, ref, v.hash)
		}
	}
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"000102030405060708090a0b0c0d0e0f", true},
		{"000102030405060708090A0B0C0D0E0F", true},
		{"0001", false},
		{"zz0102030405060708090a0b0c0d0e0f", false},
		{"", false},
	} {
		k, err := ParseKey(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseKey(%q) err = %v, want ok=%v", tc.in, err, tc.ok)
		}
		if err == nil && !strings.EqualFold(k.String(), tc.in) {
			t.Errorf("ParseKey(%q).String() = %s", tc.in, k)
		}
	}
}

func TestHashAllocatesNothing(t *testing.T) {
	h := NewHasher(Key{1})
	tp := mustTuple(t, "2001:db8::1", "2001:db8::2", 1, 2, 6)
	var sink uint64
	if n := testing.AllocsPerRun(1000, func() { sink += h.Hash(&tp) }); n != 0 {
		t.Fatalf("Hash allocates %v times per call", n)
	}
}

func BenchmarkHash(b *testing.B) {
	h := NewHasher(Key{1, 2, 3})
	for _, tc := range []struct {
		name string
		tp   Tuple
	}{
		{"v4", mustTuple(b, "198.51.100.10", "203.0.113.7", 40000, 80, 6)},
		{"v6", mustTuple(b, "2001:db8::1", "2001:db8:ffff::7", 443, 12345, 6)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tp := tc.tp
			var sink uint64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				tp.SrcPort = uint16(i)
				sink += h.Hash(&tp)
			}
			_ = sink
		})
	}
}

// TestKeyID: a key's ID is 16 hex digits, the same for the same key,
// different for keys one bit apart, and no part of the key's hex.
func TestKeyID(t *testing.T) {
	k, err := ParseKey("00112233445566778899aabbccddeeff")
	if err != nil {
		t.Fatal(err)
	}
	k2 := k
	k2[15] ^= 1
	id := k.ID()
	if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Fatalf("ID %q, want 16 hex digits", id)
	}
	if id != k.ID() || id == k2.ID() {
		t.Errorf("IDs %q, %q, %q: want one key's two alike and the other's different", id, k.ID(), k2.ID())
	}
	if strings.Contains(k.String(), id) {
		t.Errorf("ID %q is in the key %s", id, k)
	}
}
