package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A CI checkout is usually shallow (GitHub Actions' checkout fetches one
// commit by default): README says untagged builds are versioned
// 0.0~git<commits>.<hash> "so a later build is a newer package", but in a
// clone of depth 1 `git rev-list --count HEAD` is 1 at every commit, and
// the builds are ordered by their hash alone again. Each build here comes
// from a fresh --depth 1 clone of the next commit, as CI makes them.
func TestDebVersionGrowsInShallowClone(t *testing.T) {
	for _, tool := range []string{"git", "make", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	mk, err := filepath.Abs("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	git(src, "init", "-q", "-b", "main")
	newer := func(a, b string) bool {
		return exec.Command("dpkg", "--compare-versions", a, "gt", b).Run() == nil
	}
	var prev string
	for i := 0; i < 8; i++ {
		// Fixed dates, a minute apart: the same hashes on every run.
		d := "2026-01-01T00:0" + strconv.Itoa(i) + ":00Z"
		cmd := exec.Command("git", "commit", "-q", "--allow-empty", "-m", "commit "+string(rune('a'+i)))
		cmd.Dir, cmd.Env = src, append(env, "GIT_AUTHOR_DATE="+d, "GIT_COMMITTER_DATE="+d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git commit: %v\n%s", err, out)
		}
		ci := filepath.Join(base, "ci"+strconv.Itoa(i))
		git(base, "clone", "-q", "--depth", "1", "file://"+src, ci)
		v := debVersion(t, ci, mk)
		if prev != "" && !newer(v, prev) {
			t.Errorf("commit %d, shallow clone: package version %s is not newer than the previous commit's %s (an upgrade would be a downgrade)", i+1, v, prev)
		}
		prev = v
	}
}
