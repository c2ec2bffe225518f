package maglev

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestHashVectors(t *testing.T) {
	// Values from the chapter's h() in Python (testdata/reference.py):
	//   python3 -c 'from reference import h; print(h("b0", 1))'
	tests := []struct {
		name string
		seed uint64
		want uint64
	}{
		{"b0", 1, 4475046726443927886},
		{"b0", 2, 7003387233452950022},
		{"10.0.0.1:80", 1, 1286515463624980600},
		{"", 0, 18433233567000305410},
		{"b9#99", 3, 11015802602508632513},
	}
	for _, tc := range tests {
		if got := Hash(tc.name, tc.seed); got != tc.want {
			t.Errorf("Hash(%q, %d) = %d, want %d", tc.name, tc.seed, got, tc.want)
		}
	}
}

func TestIsPrime(t *testing.T) {
	const n = 200000
	composite := make([]bool, n)
	for i := 2; i < n; i++ {
		if composite[i] {
			continue
		}
		for j := i * i; j < n; j += i {
			composite[j] = true
		}
	}
	for i := range n {
		if want := i >= 2 && !composite[i]; IsPrime(uint64(i)) != want {
			t.Fatalf("IsPrime(%d) = %v, sieve says %v", i, !want, want)
		}
	}
	for _, tc := range []struct {
		n    uint64
		want bool
	}{
		{65537, true}, {655373, true}, {MaxSize, true}, {5000087, true},
		{4294967291, true},                       // largest prime below 2^32
		{4294967295, false}, {4294967297, false}, // 2^32-1 = 3·5·17·257·65537; 2^32+1 = 641·6700417
		{65537 * 65539, false}, {4294967291 * 3, false},
	} {
		if got := IsPrime(tc.n); got != tc.want {
			t.Errorf("IsPrime(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestShuffledInputIdentical(t *testing.T) {
	base := names("10.1.0.", 50, func(i int) uint32 { return uint32(i%5) + 1 })
	base[7].Weight = 0
	want, err := Build(base, DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 5 {
		s := slices.Clone(base)
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		got, err := Build(s, DefaultSize)
		if err != nil {
			t.Fatal(err)
		}
		// Every field, including the slot array's bytes and the backend order.
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffle %d: table differs from the unshuffled build", i)
		}
	}
	if !slices.IsSortedFunc(want.Backends(), func(a, b Backend) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("Backends() not in key byte order: %v", want.Backends())
	}
}

func TestWeights(t *testing.T) {
	// Two backends, weights 1 and 2: each within one slot of its exact share.
	for _, m := range []uint64{7, 101, 1009, DefaultSize, 655373} {
		tab, err := Build([]Backend{{"light", 1}, {"heavy", 2}}, m)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range tab.Backends() {
			exact := float64(m) * float64(b.Weight) / 3
			if d := math.Abs(float64(tab.Count(i)) - exact); d > 1 {
				t.Errorf("M=%d %s: %d slots, exact share %.2f", m, b.Key, tab.Count(i), exact)
			}
		}
	}

	tests := []struct {
		name    string
		weights []uint32
		m       uint64
	}{
		{"1,2", []uint32{1, 2}, DefaultSize},
		{"1,2,3", []uint32{1, 2, 3}, DefaultSize},
		{"half 1 half 2", []uint32{1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}, DefaultSize},
		{"1,3,5,7,100", []uint32{1, 3, 5, 7, 100}, DefaultSize},
		{"10 and ten 1s", []uint32{10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1009},
		{"slow start 1 among 100s", []uint32{100, 100, 100, 1, 100, 100}, DefaultSize},
		{"1000,1", []uint32{1000, 1}, DefaultSize},
		{"large weights", []uint32{math.MaxUint32, math.MaxUint32 / 2, 1 << 20}, 655373},
		{"zeros drain", []uint32{0, 3, 0, 1, 2}, 101},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bs := names("k", len(tc.weights), func(i int) uint32 { return tc.weights[i] })
			tab, err := Build(bs, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			var sum float64
			for _, w := range tc.weights {
				sum += float64(w)
			}
			n := float64(len(tc.weights))
			total := 0
			for i, b := range tab.Backends() {
				c := tab.Count(i)
				total += c
				if b.Weight == 0 {
					if c != 0 {
						t.Errorf("%s: weight 0 owns %d slots", b.Key, c)
					}
					continue
				}
				// Each backend takes floor(I·w/wmax)+1 turns in I rounds,
				// plus at most one in the unfinished last round, so it is
				// ahead of its exact share by at most 2 slots and behind by
				// at most what the others' rounding took: 2·N·w/Σw.
				share := float64(b.Weight) / sum
				exact := float64(tc.m) * share
				if d := float64(c) - exact; d > 2 || d < -2*n*share {
					t.Errorf("%s weight %d: %d slots, exact share %.2f", b.Key, b.Weight, c, exact)
				}
			}
			if total != int(tc.m) {
				t.Errorf("counts sum to %d, want %d", total, tc.m)
			}
			counted := make([]int, tab.Len())
			for s := range tab.Size() {
				counted[tab.Slot(s)]++
			}
			if !slices.Equal(counted, tab.Counts()) {
				t.Errorf("Counts() = %v, slots say %v", tab.Counts(), counted)
			}
		})
	}

	// Many backends of weights 1 and 2: the mean share of weight 2 is twice
	// that of weight 1.
	bs := names("m", 200, func(i int) uint32 { return uint32(i%2) + 1 })
	tab, err := Build(bs, DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	var by [3]int
	for i, b := range tab.Backends() {
		by[b.Weight] += tab.Count(i)
	}
	if r := float64(by[2]) / float64(by[1]); math.Abs(r-2) > 0.01 {
		t.Errorf("weight 2 / weight 1 slots = %d/%d = %.4f, want 2", by[2], by[1], r)
	}

	// Only ratios matter: scaling every weight gives the same table.
	a, _ := Build([]Backend{{"x", 1}, {"y", 2}, {"z", 5}}, 1009)
	b, _ := Build([]Backend{{"x", 7}, {"y", 14}, {"z", 35}}, 1009)
	if !slices.Equal(a.slots16, b.slots16) {
		t.Error("weights 1,2,5 and 7,14,35 give different tables")
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		backends []Backend
		m        uint64
		want     error
		mention  string // the error must name the thing at fault
	}{
		{"no backends", nil, DefaultSize, ErrNoBackends, "no backends"},
		{"size not prime", []Backend{{"a", 1}}, 65536, ErrSizeNotPrime, "65536"},
		{"size 0", []Backend{{"a", 1}}, 0, ErrSizeNotPrime, "size 0"},
		{"size 1", []Backend{{"a", 1}}, 1, ErrSizeNotPrime, "size 1"},
		{"size too large", []Backend{{"a", 1}}, 4294967291, ErrSizeTooLarge, "4294967291"},
		{"M = N", names("b", 7, equal), 7, ErrTooManyBackends, "7 backends"},
		{"M < N", names("b", 12, equal), 11, ErrTooManyBackends, "12 backends"},
		{"duplicate key", []Backend{{"a", 1}, {"10.0.0.1", 1}, {"a", 2}}, 7, ErrDuplicateKey, `"a"`},
		{"empty key", []Backend{{"a", 1}, {"", 3}}, 7, ErrEmptyKey, "backends[1]"},
		{"all weights zero", []Backend{{"a", 0}, {"b", 0}}, 7, ErrAllWeightsZero, "2 backend(s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Build(tc.backends, tc.m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Build error = %v, want %v", err, tc.want)
			}
			if tab != nil {
				t.Error("Build returned a table with an error")
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
	a, _ := Build([]Backend{{"a", 1}}, 7)
	b, _ := Build([]Backend{{"a", 1}}, 11)
	if _, err := Diff(a, b); !errors.Is(err, ErrSizeMismatch) {
		t.Errorf("Diff of sizes 7 and 11: %v, want ErrSizeMismatch", err)
	}
}

// hashEdges are the hashes where a reciprocal modulo goes wrong if it is
// going to: around 0, around multiples of M, around the top of the range.
func hashEdges(m uint64) []uint64 {
	hs := []uint64{0, 1, m - 1, m, m + 1, 2*m - 1, 2 * m, math.MaxUint64, math.MaxUint64 - 1,
		math.MaxUint64 / 2, math.MaxUint64 - math.MaxUint64%m, math.MaxUint64 - math.MaxUint64%m - 1}
	for _, q := range []uint64{3, 1 << 20, math.MaxUint64/m - 1, math.MaxUint64 / m} {
		hs = append(hs, q*m-1, q*m, q*m+1)
	}
	return hs
}

func TestIndexEqualsModulo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, m := range []uint64{2, 3, 7, 1009, DefaultSize, 655373, MaxSize} {
		tab := &Table{size: m, red: newReducer(m)}
		hs := hashEdges(m)
		for range 100000 {
			hs = append(hs, rng.Uint64())
		}
		for _, h := range hs {
			if got := tab.index(h); got != h%m {
				t.Fatalf("M=%d: index(%d) = %d, want %d", m, h, got, h%m)
			}
		}
	}
}

func TestLookupMatchesSlot(t *testing.T) {
	for _, n := range []int{3, 70000} { // 2-byte and 4-byte slot arrays
		m := uint64(MaxSize)
		if n < 10 {
			m = DefaultSize
		}
		tab, err := Build(names("n", n, equal), m)
		if err != nil {
			t.Fatal(err)
		}
		if (tab.slots16 == nil) != (n > 1<<16) {
			t.Errorf("N=%d: slots16 set = %v", n, tab.slots16 != nil)
		}
		for _, h := range append(hashEdges(m), 12345678901234567) {
			if got, want := tab.Lookup(h), tab.Slot(int(h%m)); got != want {
				t.Errorf("N=%d Lookup(%d) = %d, Slot(%d) = %d", n, h, got, h%m, want)
			}
		}
		if n > 1<<16 {
			// Every backend of the 4-byte table owns about M/N slots.
			for i, c := range tab.Counts() {
				if c < int(m)/n || c > int(m)/n+1 {
					t.Fatalf("backend %d owns %d slots, want %d or %d", i, c, m/uint64(n), m/uint64(n)+1)
				}
			}
		}
	}
}

func TestLookupAllocs(t *testing.T) {
	tab, err := Build(names("a", 10, equal), DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	var sink int
	if n := testing.AllocsPerRun(100, func() { sink += tab.Lookup(uint64(sink) * 0x9e3779b97f4a7c15) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}

func TestAccessorsCopy(t *testing.T) {
	tab, _ := Build([]Backend{{"b", 1}, {"a", 2}}, 7)
	bs, cs := tab.Backends(), tab.Counts()
	bs[0].Key, cs[0] = "mutated", -1
	if tab.Backend(0).Key != "a" || tab.Count(0) == -1 {
		t.Error("Backends/Counts expose the table's own slices")
	}
	if tab.Size() != 7 || tab.Len() != 2 {
		t.Errorf("Size, Len = %d, %d, want 7, 2", tab.Size(), tab.Len())
	}
}

func ExampleBuild() {
	tab, err := Build([]Backend{{Key: "10.0.0.2:80", Weight: 1}, {Key: "10.0.0.1:80", Weight: 2}}, DefaultSize)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, b := range tab.Backends() {
		fmt.Printf("%s weight %d: %d slots\n", b.Key, b.Weight, tab.Count(i))
	}
	_, err = Build([]Backend{{Key: "10.0.0.1:80", Weight: 1}}, 65536)
	fmt.Println(err)
	// Output:
	// 10.0.0.1:80 weight 2: 43691 slots
	// 10.0.0.2:80 weight 1: 21846 slots
	// maglev: table size 65536: not prime
}

// TestSchedulersAgree checks that the heap scheduler, used when weights are
// very uneven, takes exactly the turns of the round loop.
func TestSchedulersAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 40 {
		n := 1 + rng.IntN(60)
		m := []uint64{101, 1009, 10007}[i%3]
		bs := names("s", n, func(int) uint32 {
			if rng.IntN(4) == 0 {
				return uint32(rng.IntN(1000))
			}
			return uint32(rng.IntN(5))
		})
		bs[0].Weight = max(bs[0].Weight, 1)
		canon := sortedByKey(bs)
		var wmax uint32
		for _, b := range canon {
			wmax = max(wmax, b.Weight)
		}
		a, b := make([]uint16, m), make([]uint16, m)
		ta, tb := makeTurns(canon, m), makeTurns(canon, m)
		fillRounds(a, ta, uint32(m), uint64(wmax))
		fillHeap(b, tb, uint32(m), uint64(wmax))
		if !slices.Equal(a, b) || !reflect.DeepEqual(ta, tb) {
			t.Fatalf("set %d (N=%d M=%d): heap and round schedulers differ", i, n, m)
		}
	}
}

// inverse must give x·inverse(x) ≡ 1 (mod m) for every x of small primes
// and for a spread of x up to the largest prime table size.
func TestInverse(t *testing.T) {
	for _, m := range []uint32{2, 3, 7, 13, 251, 65537} {
		for x := uint32(1); x < m; x++ {
			if got := uint64(x) * uint64(inverse(x, m)) % uint64(m); got != 1 {
				t.Fatalf("m=%d x=%d: x·inverse(x) mod m = %d", m, x, got)
			}
		}
	}
	const big = 4999999 // a prime near MaxSize
	if !IsPrime(big) {
		t.Fatal("4999999 is not prime")
	}
	for x := uint32(1); x < big; x += 9973 {
		for _, y := range []uint32{x, big - x} {
			if inv := inverse(y, big); inv >= big || uint64(y)*uint64(inv)%big != 1 {
				t.Fatalf("m=%d x=%d: inverse %d", big, y, inv)
			}
		}
	}
}

// sortByKey must order keys exactly as strings.Compare does: shared
// prefixes, keys that are prefixes of others, zero bytes (which tie with
// the head's zero padding), heads that tie and differ later, bytes ≥ 0x80.
func TestSortByKey(t *testing.T) {
	fixed := [][]string{
		{"b"},
		{"b", "a"},
		{"a\x00", "a", "a\x00\x00", "a\x01", "a\xff"},
		{"10.0.0.10", "10.0.0.9", "10.0.0.100", "10.0.0.1", "10.0.0.1:80"},
		{"prefix-12345678-b", "prefix-12345678-a", "prefix-12345678", "prefix-1234567"},
		{"x\x80", "x\x7f", "xy", "x"},
	}
	rng := rand.New(rand.NewPCG(5, 7))
	alphabet := []byte{0, 1, '0', '1', '9', 'a', 0x7f, 0x80, 0xff}
	for range 300 {
		n := 1 + rng.IntN(60)
		prefix := strings.Repeat("p", rng.IntN(4))
		seen := map[string]bool{}
		var keys []string
		for len(keys) < n {
			b := []byte(prefix)
			for range rng.IntN(14) {
				b = append(b, alphabet[rng.IntN(len(alphabet))])
			}
			if k := string(b); k != "" && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		fixed = append(fixed, keys)
	}
	for c, keys := range fixed {
		bs := make([]Backend, len(keys))
		for i, k := range keys {
			bs[i] = Backend{Key: k, Weight: uint32(i)}
		}
		want := slices.Clone(bs)
		slices.SortFunc(want, func(a, b Backend) int { return strings.Compare(a.Key, b.Key) })
		if got := sortByKey(bs); !slices.Equal(got, want) {
			t.Fatalf("case %d: sortByKey(%q) = %v, want %v", c, keys, got, want)
		}
	}
}
