//go:build dpdk

package dpdk

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRemoveRuntimeDir(t *testing.T) {
	files := func(dir string) []string {
		ents, _ := os.ReadDir(dir)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	dpdkFiles := []string{"config", "hugepage_info", "mp_socket", "mp_socket_123_abc", "fbarray_memseg-2048k-0-0", "fbarray_memzone", "dpdk_telemetry.v2"}
	mk := func(t *testing.T, dir string, names ...string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("only DPDK's files", func(t *testing.T) {
		root := t.TempDir()
		base := filepath.Join(root, "run", "dpdk")
		mk(t, filepath.Join(base, "fl"), dpdkFiles...)
		if err := removeRuntimeDir(base, filepath.Join(base, "fl")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(base, "fl")); !os.IsNotExist(err) {
			t.Errorf("runtime dir still there: %v", err)
		}
	})
	t.Run("other files stay", func(t *testing.T) {
		root := t.TempDir()
		base := filepath.Join(root, "dpdk")
		dir := filepath.Join(base, "fl")
		mk(t, dir, append([]string{"operator-notes"}, dpdkFiles...)...)
		mk(t, filepath.Join(dir, "sub"), "x")
		err := removeRuntimeDir(base, dir)
		if err == nil {
			t.Fatal("no error for a directory with files DPDK does not make")
		}
		if got := files(dir); !slices.Equal(got, []string{"operator-notes", "sub"}) {
			t.Errorf("left %v, want operator-notes and sub", got)
		}
	})
	// The prefix ".." once made the daemon RemoveAll /run.
	for _, tc := range []struct{ name, rel string }{{"dotdot", ".."}, {"base itself", "."}, {"grandchild", "fl/deeper"}, {"outside", "../../elsewhere"}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			base := filepath.Join(root, "run", "dpdk")
			mk(t, base, "config")
			mk(t, filepath.Join(base, "fl", "deeper"), "config")
			mk(t, filepath.Join(root, "elsewhere"), "config")
			mk(t, filepath.Join(root, "run"), "config")
			if err := removeRuntimeDir(base, filepath.Join(base, tc.rel)); err == nil {
				t.Errorf("no error for %q", tc.rel)
			}
			for _, d := range []string{base, filepath.Join(base, "fl", "deeper"), filepath.Join(root, "elsewhere"), filepath.Join(root, "run")} {
				if !slices.Contains(files(d), "config") {
					t.Errorf("%s lost its file", d)
				}
			}
		})
	}
	t.Run("symlink out of base", func(t *testing.T) {
		root := t.TempDir()
		base := filepath.Join(root, "dpdk")
		mk(t, base)
		mk(t, filepath.Join(root, "victim"), "config")
		os.Symlink(filepath.Join(root, "victim"), filepath.Join(base, "fl"))
		if err := removeRuntimeDir(base, filepath.Join(base, "fl")); err == nil {
			t.Error("followed a symlink out of the base")
		}
		if !slices.Contains(files(filepath.Join(root, "victim")), "config") {
			t.Error("victim lost its file")
		}
	})
}

// ealPrefixChild makes TestMain start an EAL with the file prefix it
// names, print "ready", and hold it until stdin closes.
const ealPrefixChild = "FULCRUM_DPDK_EAL_PREFIX_CHILD"

func prefixChild(prefix string) int {
	err := InitEAL([]string{"-l", "0", "--no-huge", "-m", "64", "--no-pci", "--file-prefix", prefix})
	if err != nil {
		os.Stdout.WriteString("eal error: " + err.Error() + "\n")
		return 1
	}
	os.Stdout.WriteString("ready\n")
	io.Copy(io.Discard, os.Stdin)
	dir := RuntimeDir()
	CleanupEAL()
	if err := RemoveRuntimeDir(dir); err != nil {
		os.Stdout.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

// TestSecondEALSamePrefix: a second EAL on a prefix a running one holds
// fails with DPDK's reason, exit 1, and no panic (go-dpdk's eal.Init
// launched the lcores anyway and crashed). The first one's runtime
// directory survives the second and is removed when the first stops.
func TestSecondEALSamePrefix(t *testing.T) {
	prefix := fmt.Sprintf("fl-dup-%d", os.Getpid())
	first := exec.Command(os.Args[0], "-test.run=^$")
	first.Env = append(os.Environ(), ealPrefixChild+"="+prefix)
	stdin, _ := first.StdinPipe()
	stdout, _ := first.StdoutPipe()
	first.Stderr = os.Stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("first EAL: %q %v", line, err)
	}
	second := exec.Command(os.Args[0], "-test.run=^$")
	second.Env = append(os.Environ(), ealPrefixChild+"="+prefix)
	out, err := second.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("second EAL: %v, want exit 1", err)
	}
	for _, bad := range []string{"panic", "goroutine"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("second EAL output has %q:\n%s", bad, out)
		}
	}
	if want := "Is another primary process running?"; !strings.Contains(string(out), "eal error: ") || !strings.Contains(string(out), want) {
		t.Errorf("second EAL output lacks DPDK's reason %q:\n%s", want, out)
	}
	dir := filepath.Join(RuntimeBase, prefix)
	if _, err := os.Stat(filepath.Join(dir, "config")); err != nil {
		t.Errorf("first EAL's runtime dir damaged: %v", err)
	}
	stdin.Close()
	if err := first.Wait(); err != nil {
		t.Errorf("first EAL: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after the first EAL stopped: %v", dir, err)
	}
}
