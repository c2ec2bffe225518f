package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// chapterTable is the result table printed in the seed chapter, section 3.4,
// for 500,000 flows drawn with random.Random(7).
const chapterTable = `N=10  modulo            load max/min 1.006/0.989  flows moved 90.01%  of which needlessly 79.96%
N=10  ring, 100 vnodes  load max/min 1.240/0.801  flows moved  8.97%  of which needlessly  0.00%
N=10  maglev M=65537    load max/min 1.005/0.996  flows moved 10.28%  of which needlessly  0.23%
N=100 modulo            load max/min 1.033/0.955  flows moved 99.01%  of which needlessly 97.99%
N=100 ring, 100 vnodes  load max/min 1.157/0.763  flows moved  0.86%  of which needlessly  0.00%
N=100 maglev M=65537    load max/min 1.033/0.966  flows moved  1.62%  of which needlessly  0.63%`

var chapterFigures = []Figures{
	{1.006, 0.989, 90.01, 79.96},
	{1.240, 0.801, 8.97, 0.00},
	{1.005, 0.996, 10.28, 0.23},
	{1.033, 0.955, 99.01, 97.99},
	{1.157, 0.763, 0.86, 0.00},
	{1.033, 0.966, 1.62, 0.63},
}

func TestCompareMatchesChapter(t *testing.T) {
	rows, err := Compare(DefaultFlows, DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(chapterFigures) {
		t.Fatalf("%d rows, want %d", len(rows), len(chapterFigures))
	}
	chapterLines := strings.Split(chapterTable, "\n")
	for i, r := range rows {
		want, got := chapterFigures[i], r.Sampled
		if math.Abs(got.LoadMax-want.LoadMax) > 0.03 || math.Abs(got.LoadMin-want.LoadMin) > 0.03 ||
			math.Abs(got.Moved-want.Moved) > 0.1 || math.Abs(got.Needless-want.Needless) > 0.1 {
			t.Errorf("sampled:\n  %s\nchapter:\n  %s", got.Line(r.N, r.Scheme), chapterLines[i])
		}
		// Same hashes, same algorithms: the line is the chapter's, byte for
		// byte, except Maglev at N = 100, whose canonical (sorted) backend
		// order differs from the chapter's list order (b10 < b2).
		if line := got.Line(r.N, r.Scheme); !(r.N == 100 && strings.HasPrefix(r.Scheme, "maglev")) && line != chapterLines[i] {
			t.Errorf("line differs from the chapter's:\n  %s\n  %s", line, chapterLines[i])
		}
	}
}

// TestExactFigures checks the exact figures against what each scheme must
// give in theory.
func TestExactFigures(t *testing.T) {
	rows, err := Compare(1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		e, n := r.Exact, float64(r.N)
		switch {
		case r.Scheme == "modulo":
			// By the Chinese remainder theorem one period of n(n-1) hashes
			// holds every pair (h%n, h%(n-1)) once; a hash stays only if
			// left[h%(n-1)] == h%n, one pair for each of the n-1 values of
			// h%(n-1). So 1/n of the hashes stay, and the removed backend's
			// 1/n all move: needless = moved - 1/n.
			if math.Abs(e.LoadMax-1) > 1e-12 || math.Abs(e.LoadMin-1) > 1e-12 {
				t.Errorf("%s N=%d: exact load %v/%v, want 1/1", r.Scheme, r.N, e.LoadMax, e.LoadMin)
			}
			if want := 100 * (1 - 1/n); math.Abs(e.Moved-want) > 1e-9 {
				t.Errorf("modulo N=%d: moved %.6f%%, want %.6f%%", r.N, e.Moved, want)
			}
			if want := 100 * (1 - 2/n); math.Abs(e.Needless-want) > 1e-9 {
				t.Errorf("modulo N=%d: needless %.6f%%, want %.6f%%", r.N, e.Needless, want)
			}
		case strings.HasPrefix(r.Scheme, "ring"):
			// Only the removed backend's arcs move; their share is at
			// least the idlest and at most the busiest backend's.
			if e.Needless != 0 {
				t.Errorf("ring N=%d: needless %v, want 0", r.N, e.Needless)
			}
			if e.Moved < e.LoadMin*100/n || e.Moved > e.LoadMax*100/n {
				t.Errorf("ring N=%d: moved %.4f%% outside [%.4f, %.4f]", r.N, e.Moved, e.LoadMin*100/n, e.LoadMax*100/n)
			}
		default: // maglev: every backend owns floor or ceil of M/N slots
			const m = 65537
			if want := math.Ceil(m/n) * n / m; math.Abs(e.LoadMax-want) > 1e-12 {
				t.Errorf("maglev N=%d: exact load max %v, want %v", r.N, e.LoadMax, want)
			}
			if want := math.Floor(m/n) * n / m; math.Abs(e.LoadMin-want) > 1e-12 {
				t.Errorf("maglev N=%d: exact load min %v, want %v", r.N, e.LoadMin, want)
			}
			if e.Needless <= 0 || e.Needless > 2 || e.Moved < e.Needless+100*math.Floor(m/n)/m {
				t.Errorf("maglev N=%d: exact moved %.4f%% needless %.4f%%", r.N, e.Moved, e.Needless)
			}
		}
	}
}

func TestWrite(t *testing.T) {
	rows, err := Compare(2000, 7)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, rows, 2000, 7); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Sampled over 2000 random flow hashes", "random.Random(7)", "Exact, over all 2^64 hashes",
		rows[0].Sampled.Line(10, "modulo"), rows[5].Exact.Line(100, "maglev M=65537")} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := Compare(0, 7); err == nil {
		t.Error("Compare(0 flows) did not fail")
	}
}
