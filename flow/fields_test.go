package flow

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// refFieldsMessage builds the message of docs/flow-hash.md for a mode from
// netip values, independently of Masked and MessageFields: the fields the
// mode ignores are written as zeros, the source prefix is cut by
// netip.Prefix.Masked, and the last two bytes are the mode and prefix.
func refFieldsMessage(src, dst netip.Addr, sport, dport uint16, proto uint8, mode Mode, p4, p6 int) []byte {
	var msg []byte
	plen := 0
	if mode == SrcIPPrefix {
		plen = p4
		if src.Is6() {
			plen = p6
		}
		src = netip.PrefixFrom(src, plen).Masked().Addr()
	}
	msg = append(msg, src.AsSlice()...)
	if mode == SrcIP || mode == SrcIPPrefix {
		msg = append(msg, make([]byte, len(dst.AsSlice()))...)
		proto = 0
	} else {
		msg = append(msg, dst.AsSlice()...)
	}
	if mode == FiveTuple {
		msg = binary.BigEndian.AppendUint16(msg, sport)
		msg = binary.BigEndian.AppendUint16(msg, dport)
	} else {
		msg = append(msg, 0, 0, 0, 0)
	}
	fam := byte(4)
	if src.Is6() {
		fam = 6
	}
	return append(msg, proto, fam, byte(mode), byte(plen))
}

// HashFields must equal SipHash-1-3 over the independently built message
// for every mode, prefix, tuple and key, and MessageFields must be that
// message.
func TestHashFieldsMatchesSpecification(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 20000; i++ {
		var k Key
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		var s16, d16 [16]byte
		for j := range s16 {
			s16[j], d16[j] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		src, dst := netip.AddrFrom16(s16), netip.AddrFrom16(d16)
		if i%2 == 0 {
			src = netip.AddrFrom4([4]byte(s16[:4]))
			dst = netip.AddrFrom4([4]byte(d16[:4]))
		}
		sp, dp, proto := uint16(rng.Uint32()), uint16(rng.Uint32()), uint8(rng.Uint32())
		mode := Mode(rng.IntN(int(numModes)))
		p4, p6 := 1+rng.IntN(MaxPrefix4), 1+rng.IntN(MaxPrefix6)
		f := Fields{Mode: mode}
		if mode == SrcIPPrefix {
			f.Prefix4, f.Prefix6 = uint8(p4), uint8(p6)
		}
		tp := mustTuple(t, src.String(), dst.String(), sp, dp, proto)
		want := refFieldsMessage(src, dst, sp, dp, proto, mode, p4, p6)
		if got := tp.MessageFields(nil, f); string(got) != string(want) {
			t.Fatalf("MessageFields(%v, %v) = %x, want %x", tp, f, got, want)
		}
		h := NewHasher(k)
		if got, ref := h.HashFields(&tp, f), refSipHash(1, 3, h.k0, h.k1, want); got != ref {
			t.Fatalf("HashFields(%v, %v, key %v) = %#x, SipHash-1-3 over %x = %#x", tp, f, k, got, want, ref)
		}
	}
}

// The 5-tuple is today's hash, byte for byte: the default costs the fleet
// no flag day.
func TestFiveTupleFieldsAreTheHash(t *testing.T) {
	h := NewHasher(Key{7})
	for _, v := range contractVectors {
		tp := mustTuple(t, v.src, v.dst, v.sport, v.dport, v.proto)
		if got, want := tp.MessageFields(nil, Fields{}), tp.Message(nil); string(got) != string(want) {
			t.Errorf("%v: 5-tuple message %x, Message %x", tp, got, want)
		}
		if got, want := h.HashFields(&tp, Fields{}), h.Hash(&tp); got != want {
			t.Errorf("%v: 5-tuple hash %#x, Hash %#x", tp, got, want)
		}
	}
}

// What each mode promises, stated on tuples: which changes keep the hash.
func TestHashFieldsAffinity(t *testing.T) {
	h := NewHasher(Key{1, 2, 3})
	base := mustTuple(t, "198.51.100.10", "203.0.113.7", 40000, 80, 6)
	port := mustTuple(t, "198.51.100.10", "203.0.113.7", 40001, 80, 6)
	dport := mustTuple(t, "198.51.100.10", "203.0.113.7", 40000, 443, 6)
	dst := mustTuple(t, "198.51.100.10", "203.0.113.8", 40000, 80, 6)
	udp := mustTuple(t, "198.51.100.10", "203.0.113.7", 40000, 80, 17)
	same24 := mustTuple(t, "198.51.100.200", "203.0.113.7", 5, 80, 6)
	other24 := mustTuple(t, "198.51.101.10", "203.0.113.7", 40000, 80, 6)
	v6a := mustTuple(t, "2001:db8:1:2::1", "2001:db8:ffff::7", 1, 443, 6)
	v6b := mustTuple(t, "2001:db8:1:ff::9", "2001:db8:ffff::7", 2, 443, 6)
	v6c := mustTuple(t, "2001:db8:2::1", "2001:db8:ffff::7", 1, 443, 6)
	pfx := Fields{Mode: SrcIPPrefix, Prefix4: 24, Prefix6: 48}
	for _, tc := range []struct {
		f    Fields
		a, b Tuple
		same bool
	}{
		{Fields{}, base, port, false},
		{Fields{Mode: ThreeTuple}, base, port, true},
		{Fields{Mode: ThreeTuple}, base, dport, true},
		{Fields{Mode: ThreeTuple}, base, dst, false},
		{Fields{Mode: ThreeTuple}, base, udp, false},
		{Fields{Mode: SrcIP}, base, dst, true},
		{Fields{Mode: SrcIP}, base, udp, true},
		{Fields{Mode: SrcIP}, base, same24, false},
		{pfx, base, same24, true},
		{pfx, base, other24, false},
		{pfx, v6a, v6b, true},
		{pfx, v6a, v6c, false},
	} {
		ha, hb := h.HashFields(&tc.a, tc.f), h.HashFields(&tc.b, tc.f)
		if (ha == hb) != tc.same {
			t.Errorf("%v: %v -> %#x, %v -> %#x: want same=%v", tc.f, tc.a, ha, tc.b, hb, tc.same)
		}
	}
	// The mode byte keeps the modes apart where the masked fields agree:
	// a 3-tuple flow without ports is not the 5-tuple flow without ports.
	np := mustTuple(t, "198.51.100.10", "203.0.113.7", 0, 0, 6)
	if h.HashFields(&np, Fields{}) == h.HashFields(&np, Fields{Mode: ThreeTuple}) {
		t.Error("5-tuple and 3-tuple hash a portless tuple alike")
	}
}

// The fleet contract under each mode: published in docs/flow-hash.md. The
// messages are written out by hand from the layout; the hashes are the
// reference SipHash's over those bytes (the zero-key ones also CPython's,
// TestFieldsVectorsAgainstCPython).
var fieldsVectors = []struct {
	key          string
	src, dst     string
	sport, dport uint16
	proto        uint8
	f            Fields
	message      string
	hash         uint64
}{
	{"000102030405060708090a0b0c0d0e0f", "198.51.100.10", "203.0.113.7", 40000, 80, 6, Fields{Mode: ThreeTuple},
		"c633640acb00710700000000" + "06" + "04" + "01" + "00", 0x789fa43a418ab523},
	{"000102030405060708090a0b0c0d0e0f", "198.51.100.10", "203.0.113.7", 40000, 80, 6, Fields{Mode: SrcIP},
		"c633640a0000000000000000" + "00" + "04" + "02" + "00", 0x59886a801f9296fa},
	{"000102030405060708090a0b0c0d0e0f", "198.51.100.10", "203.0.113.7", 40000, 80, 6, Fields{Mode: SrcIPPrefix, Prefix4: 24, Prefix6: 48},
		"c63364000000000000000000" + "00" + "04" + "03" + "18", 0x52a43ed0123af4aa},
	{"00000000000000000000000000000000", "2001:db8::1", "2001:db8:ffff::7", 443, 12345, 6, Fields{Mode: ThreeTuple},
		"20010db8000000000000000000000001" + "20010db8ffff00000000000000000007" + "00000000" + "06" + "06" + "01" + "00", 0xc7542d56a3b4ab35},
	{"00000000000000000000000000000000", "2001:db8::1", "2001:db8:ffff::7", 443, 12345, 6, Fields{Mode: SrcIP},
		"20010db8000000000000000000000001" + "00000000000000000000000000000000" + "00000000" + "00" + "06" + "02" + "00", 0x20fe6336df7fa048},
	{"00000000000000000000000000000000", "2001:db8:0:1234::1", "2001:db8:ffff::7", 443, 12345, 6, Fields{Mode: SrcIPPrefix, Prefix4: 24, Prefix6: 48},
		"20010db8000000000000000000000000" + "00000000000000000000000000000000" + "00000000" + "00" + "06" + "03" + "30", 0x683d77a1923a4bdd},
}

func TestFieldsContractVectors(t *testing.T) {
	for i, v := range fieldsVectors {
		k, err := ParseKey(v.key)
		if err != nil {
			t.Fatal(err)
		}
		want, err := hex.DecodeString(v.message)
		if err != nil {
			t.Fatal(err)
		}
		tp := mustTuple(t, v.src, v.dst, v.sport, v.dport, v.proto)
		msg := tp.MessageFields(nil, v.f)
		h := NewHasher(k)
		ref := refSipHash(1, 3, h.k0, h.k1, want)
		got := h.HashFields(&tp, v.f)
		t.Logf("vector %d: key %s tuple %v %v message %x hash %#016x", i, v.key, tp, v.f, msg, ref)
		if string(msg) != string(want) {
			t.Errorf("vector %d: message %x, want %s", i, msg, v.message)
		}
		if got != ref || got != v.hash {
			t.Errorf("vector %d: HashFields %#016x, reference %#016x, published %#016x", i, got, ref, v.hash)
		}
	}
}

// The zero-key vectors, hashed by CPython (SipHash-1-3 with
// PYTHONHASHSEED=0) from the published message bytes.
func TestFieldsVectorsAgainstCPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed (scripts/setup.sh installs it)")
	}
	var prog strings.Builder
	prog.WriteString("import sys\nassert sys.hash_info.algorithm == 'siphash13', sys.hash_info.algorithm\n")
	var idx []int
	for i, v := range fieldsVectors {
		if v.key == strings.Repeat("0", 32) {
			fmt.Fprintf(&prog, "print(hash(bytes.fromhex('%s')) & 0xffffffffffffffff)\n", v.message)
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		t.Fatal("no zero-key vector")
	}
	cmd := exec.Command(py, "-c", prog.String())
	cmd.Env = append(cmd.Environ(), "PYTHONHASHSEED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(idx) {
		t.Fatalf("python3 printed %d values, want %d: %s", len(lines), len(idx), out)
	}
	for j, i := range idx {
		want, err := strconv.ParseUint(lines[j], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if fieldsVectors[i].hash != want {
			t.Errorf("vector %d: published %#016x, CPython %#016x", i, fieldsVectors[i].hash, want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
		ok   bool
	}{
		{"5-tuple", FiveTuple, true},
		{"3-tuple", ThreeTuple, true},
		{"src-ip", SrcIP, true},
		{"src-ip-prefix", SrcIPPrefix, true},
		{"", 0, false},
		{"5tuple", 0, false},
		{"SRC-IP", 0, false},
	} {
		var m Mode
		err := m.UnmarshalText([]byte(tc.in))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrMode)) {
			t.Errorf("UnmarshalText(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok {
			if m != tc.want {
				t.Errorf("UnmarshalText(%q) = %v, want %v", tc.in, m, tc.want)
			}
			if b, _ := m.MarshalText(); string(b) != tc.in {
				t.Errorf("MarshalText(%v) = %q, want %q", m, b, tc.in)
			}
		}
	}
	if err := (Fields{Mode: numModes}).Validate(); !errors.Is(err, ErrMode) {
		t.Errorf("Validate of an unknown mode: %v", err)
	}
}

func TestNewFields(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		m       Mode
		p4, p6  *int
		want    Fields
		wantErr error
	}{
		{FiveTuple, nil, nil, Fields{}, nil},
		{ThreeTuple, nil, nil, Fields{Mode: ThreeTuple}, nil},
		{SrcIP, nil, nil, Fields{Mode: SrcIP}, nil},
		{SrcIPPrefix, nil, nil, Fields{SrcIPPrefix, DefaultPrefix4, DefaultPrefix6}, nil},
		{SrcIPPrefix, n(20), nil, Fields{SrcIPPrefix, 20, DefaultPrefix6}, nil},
		{SrcIPPrefix, n(32), n(128), Fields{SrcIPPrefix, 32, 128}, nil},
		{SrcIPPrefix, n(1), n(1), Fields{SrcIPPrefix, 1, 1}, nil},
		{SrcIPPrefix, n(0), nil, Fields{}, ErrPrefix4},
		{SrcIPPrefix, n(33), nil, Fields{}, ErrPrefix4},
		{SrcIPPrefix, n(-1), nil, Fields{}, ErrPrefix4},
		{SrcIPPrefix, n(280), nil, Fields{}, ErrPrefix4}, // not 280 mod 256
		{SrcIPPrefix, nil, n(129), Fields{}, ErrPrefix6},
		{SrcIPPrefix, nil, n(0), Fields{}, ErrPrefix6},
		{FiveTuple, n(24), nil, Fields{}, ErrPrefix4},
		{ThreeTuple, nil, n(48), Fields{}, ErrPrefix6},
		{SrcIP, n(24), n(48), Fields{}, ErrPrefix4},
	} {
		got, err := NewFields(tc.m, tc.p4, tc.p6)
		if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("NewFields(%v, %v, %v) err = %v, want %v", tc.m, tc.p4, tc.p6, err, tc.wantErr)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("NewFields(%v) = %+v, want %+v", tc.m, got, tc.want)
		}
	}
	for _, f := range []Fields{{Mode: ThreeTuple, Prefix4: 24}, {Mode: SrcIPPrefix, Prefix4: 33, Prefix6: 48}, {Mode: SrcIPPrefix, Prefix4: 24}} {
		if f.Validate() == nil {
			t.Errorf("Validate(%+v) accepted it", f)
		}
	}
}

func TestHashFieldsAllocatesNothing(t *testing.T) {
	h := NewHasher(Key{1})
	tp := mustTuple(t, "2001:db8::1", "2001:db8::2", 1, 2, 6)
	f := Fields{Mode: SrcIPPrefix, Prefix4: 24, Prefix6: 56}
	var sink uint64
	if n := testing.AllocsPerRun(1000, func() { sink += h.HashFields(&tp, f) }); n != 0 {
		t.Fatalf("HashFields allocates %v times per call", n)
	}
}

func BenchmarkHashFields(b *testing.B) {
	h := NewHasher(Key{1, 2, 3})
	for _, f := range []Fields{{}, {Mode: ThreeTuple}, {Mode: SrcIP}, {Mode: SrcIPPrefix, Prefix4: 24, Prefix6: 48}} {
		for _, tc := range []struct {
			name string
			tp   Tuple
		}{
			{"v4", mustTuple(b, "198.51.100.10", "203.0.113.7", 40000, 80, 6)},
			{"v6", mustTuple(b, "2001:db8::1", "2001:db8:ffff::7", 443, 12345, 6)},
		} {
			b.Run(f.Mode.String()+"/"+tc.name, func(b *testing.B) {
				tp := tc.tp
				var sink uint64
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					tp.SrcPort = uint16(i)
					sink += h.HashFields(&tp, f)
				}
				_ = sink
			})
		}
	}
}
