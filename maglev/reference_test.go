package maglev

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// referenceTable runs the chapter's Python loop (testdata/reference.py) over
// backends in the order given and returns the backend name of every slot.
// Results are cached per argument list: several tests compare against the
// same tables and the script takes a few seconds at M = 65537.
func referenceTable(t *testing.T, m uint64, backends []Backend) []string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed (scripts/setup.sh installs it): cannot run the chapter's reference loop")
	}
	args := []string{"testdata/reference.py", strconv.FormatUint(m, 10)}
	for _, b := range backends {
		args = append(args, b.Key+":"+strconv.FormatUint(uint64(b.Weight), 10))
	}
	key := strings.Join(args, " ")
	refMu.Lock()
	defer refMu.Unlock()
	if got, ok := refCache[key]; ok {
		return got
	}
	var stderr bytes.Buffer
	cmd := exec.Command(py, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 testdata/reference.py: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if uint64(len(lines)) != m {
		t.Fatalf("reference.py printed %d slots, want %d", len(lines), m)
	}
	refCache[key] = lines
	return lines
}

var (
	refMu    sync.Mutex
	refCache = map[string][]string{}
)

func sortedByKey(bs []Backend) []Backend {
	s := slices.Clone(bs)
	slices.SortFunc(s, func(a, b Backend) int { return strings.Compare(a.Key, b.Key) })
	return s
}

func names(prefix string, n int, weight func(i int) uint32) []Backend {
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Key: fmt.Sprintf("%s%d", prefix, i), Weight: weight(i)}
	}
	return bs
}

func equal(int) uint32 { return 1 }

// mixedOrder is 37 backends whose input order is neither sorted nor the
// order the builder uses: the builder must sort them, the reference script
// gets them sorted.
func mixedOrder() []Backend {
	bs := make([]Backend, 0, 37)
	for i := range 37 {
		j := (i * 17) % 37 // a permutation of 0..36
		switch j % 3 {
		case 0:
			bs = append(bs, Backend{Key: fmt.Sprintf("10.0.%d.%d:443", j, 200-j), Weight: 1})
		case 1:
			bs = append(bs, Backend{Key: fmt.Sprintf("[2001:db8::%x]:80", j*97), Weight: 1})
		default:
			bs = append(bs, Backend{Key: fmt.Sprintf("web-%02d.example", 36-j), Weight: 1})
		}
	}
	return bs
}

// TestReferenceTables compares Build with the chapter's Python loop slot for
// slot, over every slot of the table.
func TestReferenceTables(t *testing.T) {
	shuffled := names("b", 10, equal)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	tests := []struct {
		name     string
		backends []Backend
		m        uint64
	}{
		{"N=3 M=7", []Backend{{"c", 1}, {"a", 1}, {"b", 1}}, 7},
		{"N=2 M=3", []Backend{{"y", 1}, {"x", 1}}, 3},
		{"N=10 M=65537", names("b", 10, equal), DefaultSize},
		{"N=10 M=65537 shuffled input", shuffled, DefaultSize},
		{"N=37 mixed names M=65537", mixedOrder(), DefaultSize},
		{"N=100 M=65537", names("b", 100, equal), DefaultSize},
		{"N=100 equal weight 5 M=1009", names("s", 100, func(int) uint32 { return 5 }), 1009},
		// Weighted: reference.py transcribes Envoy's rule in exact fractions.
		{"weights 1..5 M=65537", names("w", 5, func(i int) uint32 { return uint32(5 - i) }), DefaultSize},
		{"weights with zeros M=1009", names("z", 20, func(i int) uint32 { return uint32(i % 4) }), 1009},
		{"weights 3,7,100 M=10007", []Backend{{"p", 100}, {"q", 3}, {"r", 7}}, 10007},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Build(tc.backends, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			want := referenceTable(t, tc.m, sortedByKey(tc.backends))
			bad := 0
			for s, w := range want {
				if got := tab.Backend(tab.Slot(s)).Key; got != w {
					if bad < 5 {
						t.Errorf("slot %d: %q, reference %q", s, got, w)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d slots differ from the reference", bad, tc.m)
			}
		})
	}
}

// TestMinimalDisruption removes one backend of 100 and checks that only its
// slots move plus the few needless moves the reference loop also makes.
func TestMinimalDisruption(t *testing.T) {
	all := names("b", 100, equal)
	gone := all[50]
	left := slices.Delete(slices.Clone(all), 50, 51)
	before, err := Build(all, DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	after, err := Build(left, DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Diff(before, after)
	if err != nil {
		t.Fatal(err)
	}

	// Independent expectation: diff the reference script's two tables.
	refBefore := referenceTable(t, DefaultSize, sortedByKey(all))
	refAfter := referenceTable(t, DefaultSize, sortedByKey(left))
	var want Delta
	want.Size = DefaultSize
	goneSlots := 0
	for s := range refBefore {
		if refBefore[s] == gone.Key {
			goneSlots++
		}
		if refBefore[s] != refAfter[s] {
			want.Changed++
			if refBefore[s] != gone.Key {
				want.Needless++
			}
		}
	}
	if d != want {
		t.Errorf("Diff = %+v, reference tables give %+v", d, want)
	}
	if d.Changed-d.Needless != goneSlots {
		t.Errorf("forced moves %d, want the departed backend's %d slots", d.Changed-d.Needless, goneSlots)
	}
	if frac := float64(d.Needless) / DefaultSize; frac <= 0 || frac >= 0.02 {
		t.Errorf("needless moves %d = %.2f%% of slots, want between 0 and 2%%", d.Needless, 100*frac)
	}

	// Draining (weight 0) moves exactly the same slots as removal.
	drained := slices.Clone(all)
	drained[50].Weight = 0
	dt, err := Build(drained, DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	if dd, _ := Diff(before, dt); dd != d {
		t.Errorf("drain Diff = %+v, removal Diff = %+v", dd, d)
	}
}
