package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fulcrum run --cpu-profile FILE with a configuration that is refused
// (missing, or invalid) exits 2 like any bad configuration, and must not
// leave FILE behind: the profile refuses an existing file, so the
// operator's next run, with the configuration fixed and the same command
// line, would exit 2 on "file exists" instead of starting.
func TestRunRefusedConfigLeavesNoCPUProfile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[dataplane]\nport = \"x\"\n[[vip]]\naddress = \"203.0.113.7\"\ntable_size = 100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []string{filepath.Join(dir, "missing.toml"), bad} {
		prof := filepath.Join(dir, filepath.Base(cfg)+".pprof")
		code, _, errs := runCmd("run", "-c", cfg, "--cpu-profile", prof)
		if strings.Contains(errs, "built without DPDK") {
			t.Skip("run needs the dpdk build tag")
		}
		if code != 2 {
			t.Errorf("run -c %s: exit %d, want 2", cfg, code)
		}
		if _, err := os.Stat(prof); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("run -c %s refused its configuration but left the CPU profile %s (stat: %v); a rerun would be refused with 'file exists'", filepath.Base(cfg), prof, err)
		}
	}
}

// errWriter fails every write, as a closed stdout (>&-) or a full disk
// (>/dev/full) does.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) {
	return 0, errors.New("write /dev/stdout: no space left on device")
}

// fulcrum check > effective.toml on a full disk (or with stdout closed)
// printed nothing and exited 0: a script that saves the effective
// configuration keeps an empty file and no error.
func TestCheckUnwritableStdoutFails(t *testing.T) {
	var errb strings.Builder
	code := run([]string{"check", "-c", "../../examples/pcap.toml"}, errWriter{}, &errb)
	if code == 0 {
		t.Errorf("check with stdout failing: exit 0, nothing written; want non-zero (stderr %q)", errb.String())
	}
}

// fulcrum version takes no argument or flag: "fulcrum version --json" or
// "fulcrum version -c f" printed the version with exit 0, the flag
// dropped, where check and prereq refuse what they do not take.
func TestVersionRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"version", "extra"}, {"version", "--bogus"}, {"--version", "-c", "x.toml"}} {
		code, out, errs := runCmd(args...)
		if code != 2 || !strings.Contains(errs, args[1]) {
			t.Errorf("fulcrum %q: exit %d, stdout %q, stderr %q; want exit 2 naming %q", args, code, out, errs, args[1])
		}
	}
	if code, out, _ := runCmd("version"); code != 0 || !strings.HasPrefix(out, "fulcrum ") {
		t.Errorf("fulcrum version: exit %d, %q", code, out)
	}
}
