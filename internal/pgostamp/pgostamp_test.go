package pgostamp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	profile = "../../cmd/fulcrum/default.pgo"
	stamp   = "../../cmd/fulcrum/default.pgo.stamp"
	root    = "../.."
)

// TestProfileMatchesSource fails when a hot function of the build profile
// was edited after the profile was written: the profile then no longer
// drives that function's inlining (package doc). The fix is `make pgo`,
// which writes a new profile and stamp. FULCRUM_PGO_STAMP=write writes
// the stamp of the current profile and sources (scripts/pgo.sh does).
func TestProfileMatchesSource(t *testing.T) {
	got, err := Sum(profile, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 10 {
		t.Fatalf("%d hot functions of this module in %s: not the forwarding loop's profile", len(got), profile)
	}
	for _, f := range got {
		if f.Hash == "gone" {
			t.Errorf("%s: no longer in %s", f.Name, f.File)
		}
	}
	if t.Failed() {
		return // a stamp naming a function that is gone is never written
	}
	if os.Getenv("FULCRUM_PGO_STAMP") == "write" {
		if err := os.WriteFile(stamp, Format(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d functions", stamp, len(got))
		return
	}
	text, err := os.ReadFile(stamp)
	if err != nil {
		t.Fatalf("%v: run make pgo", err)
	}
	want, err := Parse(text)
	if err != nil {
		t.Fatalf("%s: %v", stamp, err)
	}
	if ch := Changed(want, got); len(ch) > 0 {
		t.Errorf("the build profile cmd/fulcrum/default.pgo is stale: %d of its %d hot functions changed since it was written, so the daemon loses their profile-guided inlining (docs/benchmarks.md, round 21): run make pgo (4 min, needs what make bench needs) and commit default.pgo and default.pgo.stamp:\n  %s",
			len(ch), len(got), strings.Join(ch, "\n  "))
	}
}

// An edit inside a stamped function, a comment included, changes its
// hash; an edit outside every stamped function changes none.
func TestSumSeesAnEdit(t *testing.T) {
	before, err := Sum(profile, root)
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the module's sources that the profile names, one of
	// them edited.
	dir := t.TempDir()
	files := map[string]bool{}
	for _, f := range before {
		files[f.File] = true
	}
	var victim Func
	for _, f := range before {
		if strings.HasSuffix(f.Name, "fuse") {
			victim = f
		}
	}
	if victim.Name == "" {
		t.Fatalf("no fuse among the hot functions: %v", before)
	}
	for rel := range files {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if rel == victim.File {
			// A comment at the end of the file: outside every function.
			src = append(src, "\n// an edit outside every function\n"...)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	same, err := Sum(profile, dir)
	if err != nil {
		t.Fatal(err)
	}
	if ch := Changed(before, same); len(ch) > 0 {
		t.Errorf("an edit outside every function changed %v", ch)
	}
	path := filepath.Join(dir, victim.File)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := victim.Name[strings.LastIndex(victim.Name, ".")+1:]
	i := strings.Index(string(src), ") "+name+"(")
	if i < 0 {
		t.Fatalf("%s: no declaration of %s", victim.File, name)
	}
	j := strings.Index(string(src[i:]), "{\n")
	if j < 0 {
		t.Fatalf("%s: no body of %s", victim.File, name)
	}
	at := i + j + 2
	edited := append(append(append([]byte{}, src[:at]...), "\t// a comment moves every line below it\n"...), src[at:]...)
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := Sum(profile, dir)
	if err != nil {
		t.Fatal(err)
	}
	ch := Changed(before, after)
	if len(ch) != 1 || !strings.HasPrefix(ch[0], victim.Name+" ") {
		t.Errorf("a comment inside %s: changed %v, want that function alone", victim.Name, ch)
	}
}

func TestSplit(t *testing.T) {
	for name, want := range map[string][2]string{
		Module + "dataplane.(*Worker).fuse":                {"dataplane", "Worker.fuse"},
		Module + "dataplane.(*Engine).Run.func1":           {"dataplane", "Engine.Run"},
		Module + "maglev.fillRounds[go.shape.uint16]":      {"maglev", "fillRounds"},
		Module + "flow.Hasher.Hash":                        {"flow", "Hasher.Hash"},
		Module + "internal/prefetch.Lines":                 {"internal/prefetch", "Lines"},
		Module + "conntrack.(*Table).candidates":           {"conntrack", "Table.candidates"},
		Module + "dataplane.fastBurst.func2":               {"dataplane", "fastBurst"},
		Module + "maglev.(*filler[go.shape.uint16]).claim": {"maglev", "filler.claim"},
	} {
		dir, key, ok := split(name)
		if !ok || dir != want[0] || key != want[1] {
			t.Errorf("split(%q) = %q, %q, %v; want %q, %q", name, dir, key, ok, want[0], want[1])
		}
	}
	if _, _, ok := split("runtime.mallocgc"); ok {
		t.Error("a runtime function split as the module's")
	}
}
