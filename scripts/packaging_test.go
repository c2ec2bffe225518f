package scripts

// The operator's install and upgrade path: the package's version as make
// deb writes it, and the systemd unit's command lines as systemd runs them.

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// debVersion is the Debian version `make deb` gives the package built
// from the checkout in dir (the Makefile's DEB_VERSION, VERSION unset as
// on a developer's or CI machine).
func debVersion(t *testing.T, dir, makefile string) string {
	t.Helper()
	cmd := exec.Command("make", "-s", "--no-print-directory", "-f", makefile, "--eval", "pv: ; @echo $(DEB_VERSION)", "pv")
	cmd.Dir = dir
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "VERSION=") && !strings.HasPrefix(e, "MAKEFLAGS=") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// Each package built from a later commit must be a newer version to dpkg
// and apt, or installing it is a downgrade: apt-get install -y refuses it
// ("Packages were downgraded and -y was used without --allow-downgrades"),
// a repository of the builds never offers it, and dpkg -i says
// "downgrading". The repository has no tags, so every package is
// 0.0~git<abbreviated hash>; hashes are random, so about every second
// commit sorts below its parent (HEAD 9b3d8f9 below its parent 3203ae7:
// dpkg compares "9" with "3203" as numbers). A release candidate tag
// (v1.0.0-rc1) must sort below the release (v1.0.0), as Debian's "~" does.
// The test commits to a repository of its own with fixed dates, so the
// hashes, and the failure, are the same on every run.
func TestDebVersionGrowsWithCommits(t *testing.T) {
	r := newVersionRepo(t)
	var prev string
	for i := 0; i < 8; i++ {
		r.commit("2026-01-01T00:00:00Z") // one date: the count orders them
		v := debVersion(t, r.dir, r.mk)
		if prev != "" && !debNewer(v, prev) {
			t.Errorf("commit %d: package version %s is not newer than the previous commit's %s (an upgrade would be a downgrade)", i+1, v, prev)
		}
		prev = v
	}
	r.git(r.dir, "tag", "v1.0.0-rc1")
	rc := debVersion(t, r.dir, r.mk)
	r.commit("2026-01-01T00:00:00Z")
	r.git(r.dir, "tag", "v1.0.0")
	rel := debVersion(t, r.dir, r.mk)
	if !debNewer(rel, rc) {
		t.Errorf("tag v1.0.0 gives %s, not newer than v1.0.0-rc1's %s", rel, rc)
	}
	if !debNewer(rc, prev) {
		t.Errorf("tag v1.0.0-rc1 gives %s, not newer than the untagged commit before it, %s", rc, prev)
	}
}

// TestDebVersionGrowsInShallowClone: a CI checkout is usually shallow
// (one commit), where `git rev-list --count HEAD` is 1 at every commit;
// the builds must still be ordered (by the commit's date). Each build
// comes from a fresh --depth 1 clone of the next commit, as CI makes
// them.
func TestDebVersionGrowsInShallowClone(t *testing.T) {
	r := newVersionRepo(t)
	var prev string
	for i := 0; i < 8; i++ {
		r.commit("2026-01-01T00:0" + strconv.Itoa(i) + ":00Z") // a minute apart
		ci := filepath.Join(t.TempDir(), "ci")
		r.git("", "clone", "-q", "--depth", "1", "file://"+r.dir, ci)
		v := debVersion(t, ci, r.mk)
		if prev != "" && !debNewer(v, prev) {
			t.Errorf("commit %d, shallow clone: package version %s is not newer than the previous commit's %s (an upgrade would be a downgrade)", i+1, v, prev)
		}
		prev = v
	}
}

// versionRepo is a git repository of the test's own, whose commits have
// fixed dates, so their hashes (and a failure) are the same on every run.
type versionRepo struct {
	t   *testing.T
	dir string // the repository
	mk  string // the project's Makefile
	env []string
	n   int
}

func newVersionRepo(t *testing.T) *versionRepo {
	t.Helper()
	for _, tool := range []string{"git", "make", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	mk, err := filepath.Abs("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	r := &versionRepo{t: t, dir: t.TempDir(), mk: mk, env: append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")}
	r.git(r.dir, "init", "-q", "-b", "main")
	return r
}

// git runs git in dir ("" for the current directory).
func (r *versionRepo) git(dir string, args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, r.env
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// commit makes an empty commit dated date.
func (r *versionRepo) commit(date string) {
	r.t.Helper()
	r.n++
	cmd := exec.Command("git", "commit", "-q", "--allow-empty", "-m", "commit "+strconv.Itoa(r.n))
	cmd.Dir, cmd.Env = r.dir, append(r.env, "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git commit: %v\n%s", err, out)
	}
}

// debNewer reports whether version a is newer than b to dpkg.
func debNewer(a, b string) bool {
	return exec.Command("dpkg", "--compare-versions", a, "gt", b).Run() == nil
}

// unitLines are the command lines of key (ExecStartPre, ExecReload...) in
// packaging/fulcrum.service as make install writes it: @PREFIX@ and
// @SYSCONFDIR@ replaced.
func unitLines(t *testing.T, key, prefix, sysconfdir string) []string {
	t.Helper()
	b, err := os.ReadFile("../packaging/fulcrum.service")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("@PREFIX@", prefix, "@SYSCONFDIR@", sysconfdir).Replace(string(b))
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			lines = append(lines, v)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("the unit has no %s", key)
	}
	return lines
}

// runUnitLine runs one Exec line as systemd does (systemd.service(5),
// "Command lines"): words split at blanks, '...' and "..." quoted, "$$"
// a literal "$", a leading "-" ignoring the exit status. It returns
// what the command wrote (systemd sends both streams to the journal
// here: StandardOutput=journal) and whether systemd would count it
// failed.
func runUnitLine(t *testing.T, line string, env []string) (out string, failed bool) {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				t.Fatalf("unbalanced quote in %q", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	for i := range words {
		words[i] = strings.ReplaceAll(words[i], "$$", "$")
	}
	ignore := false
	for len(words[0]) > 0 && strings.ContainsRune("-@:+!", rune(words[0][0])) {
		ignore = ignore || words[0][0] == '-'
		words[0] = words[0][1:]
	}
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%q: %v", line, err)
	}
	return b.String(), err != nil && !ignore
}

// installTree builds fulcrum (without DPDK: check and prereq need none)
// into PREFIX/bin of a temporary tree and writes conf as
// SYSCONFDIR/fulcrum/fulcrum.toml, mode 0640 as the package ships it.
func installTree(t *testing.T, conf string) (prefix, sysconfdir string) {
	t.Helper()
	root := t.TempDir()
	prefix, sysconfdir = filepath.Join(root, "usr"), filepath.Join(root, "etc")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(prefix, "bin", "fulcrum"), "../cmd/fulcrum").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(sysconfdir, "fulcrum"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeConf(t, filepath.Join(sysconfdir, "fulcrum", "fulcrum.toml"), conf)
	return prefix, sysconfdir
}

func writeConf(t *testing.T, path, conf string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(conf), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
}

// exampleWithKey is the shipped /etc/fulcrum/fulcrum.toml with hash_key
// set to key, as an operator following its comment does.
func exampleWithKey(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile("../examples/fulcrum.toml")
	if err != nil {
		t.Fatal(err)
	}
	const shipped = `hash_key = "000102030405060708090a0b0c0d0e0f"`
	if !bytes.Contains(b, []byte(shipped)) {
		t.Fatalf("examples/fulcrum.toml lacks %s", shipped)
	}
	return strings.Replace(string(b), shipped, `hash_key = "`+key+`"`, 1)
}

// The hash key is a secret the project keeps: the conffile is 0640
// root:root (deb-test checks it), and the admin API and the metrics name
// it only by a digest (hash_key_id, "which does not reveal it"), since one
// who knows it can aim flows at a chosen backend (README, passive
// health). Yet the unit's ExecStartPre runs `fulcrum check`, which prints
// the effective configuration, hash_key included, and the unit sends its
// output to the journal on every start, where the adm and
// systemd-journal groups read it. Nothing the unit's start-up writes may
// hold the key.
func TestUnitStartKeepsHashKeyOutOfJournal(t *testing.T) {
	const key = "5ec2e75ec2e75ec2e75ec2e75ec2e7aa"
	prefix, sysconfdir := installTree(t, exampleWithKey(t, key))
	for _, line := range unitLines(t, "ExecStartPre", prefix, sysconfdir) {
		out, failed := runUnitLine(t, line, nil)
		if failed {
			t.Fatalf("%s failed on the shipped configuration:\n%s", line, out)
		}
		if strings.Contains(out, key) {
			t.Errorf("ExecStartPre=%s writes dataplane.hash_key to the journal", line)
		}
	}
}

// `systemctl reload fulcrum` (the README's way to apply an edit) reports
// what ExecReload's commands exit with; the daemon's RELOADING/READY
// carry no verdict. A file the daemon refuses (it keeps the running
// configuration) must make the reload fail, so that the operator and
// the automation that runs `systemctl reload fulcrum && ...` learn the
// edit is not in force. MAINPID is a process of the test's own.
func TestUnitReloadFailsOnRefusedFile(t *testing.T) {
	const key = "5ec2e75ec2e75ec2e75ec2e75ec2e7aa"
	good := exampleWithKey(t, key)
	prefix, sysconfdir := installTree(t, good)
	conf := filepath.Join(sysconfdir, "fulcrum", "fulcrum.toml")
	reload := func() (hupped, failed bool) {
		t.Helper()
		main := startHupChild(t)
		env := []string{"MAINPID=" + strconv.Itoa(main.Process.Pid)}
		for _, line := range unitLines(t, "ExecReload", prefix, sysconfdir) {
			if _, f := runUnitLine(t, line, env); f {
				failed = true
				break
			}
		}
		// The stand-in exits on the SIGHUP from its handler, a moment
		// after kill(1) returned: wait for that, for at most 10 s, when
		// the reload succeeded; kill it otherwise.
		exited := make(chan error, 1)
		go func() { exited <- main.Wait() }()
		var err error
		if failed {
			main.Process.Kill()
			err = <-exited
		} else {
			select {
			case err = <-exited:
			case <-time.After(10 * time.Second):
				main.Process.Kill()
				err = <-exited
			}
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == hupExit {
			hupped = true
		}
		return hupped, failed
	}
	if hupped, failed := reload(); failed || !hupped {
		t.Fatalf("valid file: reload failed %v, SIGHUP sent %v; want a reload that succeeds and signals the daemon", failed, hupped)
	}
	// An edit with a typo in the key: the daemon refuses the file.
	writeConf(t, conf, strings.Replace(good, key, key[:31]+"g", 1))
	if hupped, failed := reload(); !failed {
		t.Errorf("a file fulcrum check refuses: systemctl reload would succeed (SIGHUP sent %v) while the daemon keeps the old configuration", hupped)
	}
}

// hupChild makes TestHupChild a daemon's stand-in: it exits hupExit on
// SIGHUP. A test binary, not sleep(1): a process started with SIGHUP
// ignored (under nohup, say) passes that on through exec, and sleep would
// then never see the signal; Go's signal.Notify takes it back, as the
// daemon's does.
const (
	hupChild = "FULCRUM_TEST_HUP_CHILD"
	hupExit  = 42
)

func TestHupChild(t *testing.T) {
	if os.Getenv(hupChild) == "" {
		t.Skip("the stand-in daemon of TestUnitReloadFailsOnRefusedFile")
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	os.Stdout.WriteString("ready\n")
	select {
	case <-hup:
		os.Exit(hupExit)
	case <-time.After(5 * time.Minute):
		os.Exit(1)
	}
}

// startHupChild starts TestHupChild and returns once its handler is in.
func startHupChild(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHupChild$")
	cmd.Env = append(os.Environ(), hupChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the stand-in daemon: %q, %v", line, err)
	}
	return cmd
}

// make install (and so make deb, which stages with it) run by root under
// a hardened umask such as 027 (CIS, many sites' /etc/login.defs) must
// still install what every user reads as every user can read it: the man
// page (`man fulcrum` as an operator's own account), the host scripts
// and their docs. The configuration alone is 0640. The commands are
// faked (the build is not what is tested): make runs install only.
func TestInstallIgnoresUmask(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	bin, dest := t.TempDir(), t.TempDir()
	for _, c := range []string{"fulcrum", "fulcrumctl", "fulcrum-decap", "fulcrum-conncheck", "fulcrum-gen"} {
		writeExec(t, filepath.Join(bin, c), "#!/bin/sh\n")
	}
	cmd := exec.Command("sh", "-c", `umask 027 && exec make -s --no-print-directory -o build -o setup install BIN="$1" DESTDIR="$2" PREFIX=/usr`, "sh", bin, dest)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(p, dest)
		if rel == "/etc/fulcrum/fulcrum.toml" || rel == "" {
			return nil
		}
		want := os.FileMode(0o004)
		if fi.IsDir() {
			want = 0o005
		}
		if fi.Mode().Perm()&want != want {
			t.Errorf("%s installed with mode %04o: not readable by every user", rel, fi.Mode().Perm())
		}
		return nil
	})
}
