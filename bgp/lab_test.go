package bgp

// The lab: a real BIRD 2 router and the speaker under test, each in a
// network namespace the test creates, joined by a veth pair. Nothing in
// the root namespace is touched: the veth is created inside the speaker's
// namespace with its peer end directly in the router's, and the test's
// addresses (10.200.0.0/24, fd00:200::/64) exist only on those two ends.
//
// A goroutine cannot be moved into a namespace (GoBGP dials from its own
// goroutines, on whatever OS thread), so the test re-executes its own
// binary inside the speaker's namespace (`ip netns exec`) to run just the
// one test there; the child talks to BIRD over BIRD's control socket, a
// file under t.TempDir(), which namespaces do not separate.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// labEnv carries the lab description from the parent test to its child.
const labEnv = "FULCRUM_BGP_LAB"

// Lab addressing: the speaker (LB) is .1, the router .2.
const (
	labSpeakerV4 = "10.200.0.1"
	labRouterV4  = "10.200.0.2"
	labSpeakerV6 = "fd00:200::1"
	labRouterV6  = "fd00:200::2"
)

// lab is what the child needs to know.
type lab struct {
	Dir  string // BIRD's config, log and control socket
	Sock string
}

var labSeq atomic.Int32

// inLab runs body in a lab whose router runs birdConf (a BIRD 2 config;
// the lab adds the log line). It skips when not root or when ip, bird or
// birdc is missing.
func inLab(t *testing.T, birdConf string, body func(t *testing.T, l *lab)) {
	t.Helper()
	inLabExtra(t, birdConf, nil, body)
}

// inLabExtra is inLab with extra `ip` commands run after the lab's
// addresses are set; "SP" and "RT" in them name the speaker's and the
// router's namespaces.
func inLabExtra(t *testing.T, birdConf string, extra [][]string, body func(t *testing.T, l *lab)) {
	t.Helper()
	if env := os.Getenv(labEnv); env != "" {
		var l lab
		if err := json.Unmarshal([]byte(env), &l); err != nil {
			t.Fatalf("%s: %v", labEnv, err)
		}
		body(t, &l)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("the BIRD lab needs Linux network namespaces")
	}
	if os.Geteuid() != 0 {
		t.Skip("the BIRD lab needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "bird", "birdc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the BIRD lab needs %s: apt-get install -y bird2 iproute2", tool)
		}
	}

	sweepStaleLabs()
	// Names unique per process and test, so parallel `go test` runs do
	// not clash; interfaces live inside the namespaces and need no
	// unique names.
	id := fmt.Sprintf("%s%d-%d", labPrefix, os.Getpid(), labSeq.Add(1))
	spNS, rtNS := id+"-lb", id+"-rt"
	for _, ns := range []string{spNS, rtNS} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { runQuiet("ip", "netns", "del", ns) })
	}
	run(t, "ip", "-n", spNS, "link", "add", "lb0", "type", "veth", "peer", "name", "rt0", "netns", rtNS)
	for _, c := range [][]string{
		{"-n", spNS, "addr", "add", labSpeakerV4 + "/24", "dev", "lb0"},
		{"-n", spNS, "addr", "add", labSpeakerV6 + "/64", "dev", "lb0", "nodad"},
		{"-n", rtNS, "addr", "add", labRouterV4 + "/24", "dev", "rt0"},
		{"-n", rtNS, "addr", "add", labRouterV6 + "/64", "dev", "rt0", "nodad"},
		{"-n", spNS, "link", "set", "lo", "up"},
		{"-n", rtNS, "link", "set", "lo", "up"},
		{"-n", spNS, "link", "set", "lb0", "up"},
		{"-n", rtNS, "link", "set", "rt0", "up"},
	} {
		run(t, "ip", c...)
	}
	for _, c := range extra {
		c = slices.Clone(c)
		for i, a := range c {
			c[i] = strings.NewReplacer("SP", spNS, "RT", rtNS).Replace(a)
		}
		run(t, "ip", c...)
	}

	dir := t.TempDir()
	l := &lab{Dir: dir, Sock: filepath.Join(dir, "bird.ctl")}
	conf := filepath.Join(dir, "bird.conf")
	logFile := filepath.Join(dir, "bird.log")
	full := fmt.Sprintf("log %q all;\ndebug protocols { states, events };\n%s", logFile, birdConf)
	if err := os.WriteFile(conf, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "bird.out"))
	if err != nil {
		t.Fatal(err)
	}
	bird := exec.Command("ip", "netns", "exec", rtNS, "bird", "-f", "-c", conf, "-s", l.Sock)
	bird.Stdout, bird.Stderr = out, out
	// If the test binary dies without running its cleanups (a -timeout
	// panic), the kernel kills bird; sweepStaleLabs removes the rest.
	bird.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := bird.Start(); err != nil {
		t.Fatalf("start bird: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- bird.Wait(); out.Close() }()
	t.Cleanup(func() {
		// `ip netns exec` execs bird, so this pid is bird's.
		_ = bird.Process.Kill()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			t.Errorf("bird (pid %d) did not exit after SIGKILL", bird.Process.Pid)
		}
		if t.Failed() {
			for _, f := range []string{"bird.out", "bird.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("%s:\n%s", f, b)
			}
		}
	})
	waitFor(t, 10*time.Second, "bird's control socket", func() (bool, string) {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(filepath.Join(dir, "bird.out"))
			t.Fatalf("bird exited: %v\n%s", err, b)
		default:
		}
		out, err := l.birdcErr("show", "status")
		return err == nil && strings.Contains(out, "Daemon is up"), out
	})

	env, _ := json.Marshal(l)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	child := exec.CommandContext(ctx, "ip", "netns", "exec", spNS, exe,
		"-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1", "-test.timeout=45s")
	child.Env = append(os.Environ(), labEnv+"="+string(env))
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var buf bytes.Buffer
	child.Stdout, child.Stderr = &buf, &buf
	err = child.Run()
	t.Logf("child in namespace %s:\n%s", spNS, buf.String())
	if err != nil {
		t.Fatalf("lab test failed in namespace %s: %v", spNS, err)
	}
	if !strings.Contains(buf.String(), "--- PASS: "+t.Name()) {
		t.Fatalf("lab test did not run in the child (skipped?)")
	}
}

const labPrefix = "fbgp"

// sweepStaleLabs deletes lab namespaces left by a test process that no
// longer exists (one killed before its cleanups ran). Only names this
// file makes are touched.
func sweepStaleLabs() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], labPrefix) {
			continue
		}
		pid, _, ok := strings.Cut(strings.TrimPrefix(f[0], labPrefix), "-")
		if _, err := strconv.Atoi(pid); !ok || err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); os.IsNotExist(err) {
			runQuiet("ip", "netns", "del", f[0])
		}
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func runQuiet(name string, args ...string) { _ = exec.Command(name, args...).Run() }

// birdc runs a BIRD CLI command and returns its output.
func (l *lab) birdc(t *testing.T, args ...string) string {
	t.Helper()
	out, err := l.birdcErr(args...)
	if err != nil {
		t.Fatalf("birdc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (l *lab) birdcErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "birdc", append([]string{"-s", l.Sock}, args...)...).CombinedOutput()
	return string(out), err
}

// protocolInfo returns the Info column of `show protocols NAME`, which for
// a BGP protocol is its session state ("Established", "Active", ...).
func (l *lab) protocolInfo(t *testing.T, name string) string {
	t.Helper()
	for _, line := range strings.Split(l.birdc(t, "show", "protocols", name), "\n") {
		f := strings.Fields(line)
		// name proto table state since-date since-time info
		if len(f) >= 6 && f[0] == name && f[1] == "BGP" {
			return f[len(f)-1]
		}
	}
	return ""
}

// birdRoute is one route as `show route PREFIX all` shows it.
type birdRoute struct {
	Protocol    string   // the BGP protocol it came from
	Via         string   // the gateway BIRD resolved
	NextHop     string   // BGP.next_hop
	MED         string   // BGP.med, "" if absent
	Communities []string // BGP.community, as "65000:100"
}

var (
	reRouteHead = regexp.MustCompile(`^(\S+)?\s+unicast \[(\S+) `)
	reVia       = regexp.MustCompile(`^\s+via (\S+) on `)
	reAttr      = regexp.MustCompile(`^\s+BGP\.(\w+): (.*)$`)
	reCommunity = regexp.MustCompile(`\((\d+),(\d+)\)`)
)

// routes returns the routes BIRD has for prefix, one per protocol.
func (l *lab) routes(t *testing.T, prefix string) []birdRoute {
	t.Helper()
	var out []birdRoute
	var cur *birdRoute
	text, err := l.birdcErr("show", "route", prefix, "all")
	if strings.Contains(text, "Network not found") {
		return nil
	}
	if err != nil {
		t.Fatalf("birdc show route %s all: %v\n%s", prefix, err, text)
	}
	for _, line := range strings.Split(text, "\n") {
		if m := reRouteHead.FindStringSubmatch(line); m != nil {
			if m[1] != "" && m[1] != prefix {
				cur = nil
				continue
			}
			out = append(out, birdRoute{Protocol: m[2]})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if m := reVia.FindStringSubmatch(line); m != nil {
			cur.Via = m[1]
		}
		if m := reAttr.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "next_hop":
				cur.NextHop = m[2]
			case "med":
				cur.MED = m[2]
			case "community":
				for _, c := range reCommunity.FindAllStringSubmatch(m[2], -1) {
					cur.Communities = append(cur.Communities, c[1]+":"+c[2])
				}
			}
		}
	}
	return out
}

// waitFor polls cond every 100 ms until it holds or timeout passes; then
// the test fails with what cond last reported.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen:\n%s", timeout, what, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
