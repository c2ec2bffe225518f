//go:build dpdk && lab

// Package lab runs the Fulcrum lab (scripts/lab/lab.sh: a client, a bird2
// router doing ECMP, two Fulcrum instances and four backends, each in a
// network namespace of its own) and checks the fleet's behaviour with real
// clients and real failures, with numbers. The tests run in order and
// share one lab; each leaves it as it found it.
package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

const (
	vip    = "203.0.113.7"
	labDir = "/tmp/fulcrum-lab"
)

var script string

func TestMain(m *testing.M) {
	if spec := os.Getenv(captureEnv); spec != "" {
		// A child started with `ip netns exec` to capture in a namespace.
		os.Exit(captureChild(spec))
	}
	if spec := os.Getenv(spoofEnv); spec != "" {
		// A child started with `ip netns exec` to send spoofed SYNs.
		os.Exit(spoofChild(spec))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Println("lab: skipped, needs root (network namespaces, DPDK)")
		return 0
	}
	for _, tool := range []string{"bird", "birdc", "curl", "wrk", "ethtool", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			// As root the lab can run: a missing tool is a failure, not a skip.
			fmt.Printf("lab: FAIL: %s is not installed (scripts/setup.sh installs it)\n", tool)
			return 1
		}
	}
	// One lab at a time on this machine: the namespaces, the lab
	// directory and the DPDK prefixes have fixed names. A second run (from
	// another clone or worktree) waits here for the first to finish.
	lock, err := os.OpenFile("/tmp/fulcrum-lab.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		fmt.Println("lab: lock:", err)
		return 1
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		fmt.Println("lab: lock:", err)
		return 1
	}
	// Every lab.sh this run starts acts under the lock held here.
	os.Setenv("FULCRUM_LAB_LOCKED", "1")
	wd, _ := os.Getwd()
	script = filepath.Join(wd, "lab.sh")
	labDown := func() {
		down := exec.Command(script, "down")
		down.Stdout, down.Stderr = os.Stdout, os.Stderr
		down.Run()
	}
	// Stopped by SIGINT or SIGTERM (Ctrl-C, a cancelled CI job), the run
	// tears the lab down before it exits (deferred calls do not run then),
	// and a `lab.sh up` still running is stopped first: in a process
	// group of its own, which also ends with this process however it ends
	// (Pdeathsig: SIGKILL, go test's "ran too long"), so that no up goes
	// on building a lab without the lock.
	up := exec.Command(script, "up")
	up.Stdout, up.Stderr = os.Stdout, os.Stderr
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Printf("lab: %v: tearing the lab down\n", s)
		if up.Process != nil {
			syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
		}
		labDown()
		os.Exit(1)
	}()
	defer labDown()
	runtime.LockOSThread() // Pdeathsig follows the thread that started up
	err = up.Run()
	runtime.UnlockOSThread()
	if err != nil {
		fmt.Println("lab: up failed:", err)
		return 1
	}
	return m.Run()
}

func ns(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", name}, args...)...)
}

func must(t *testing.T, c *exec.Cmd) string {
	t.Helper()
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", c.Args, err, out)
	}
	return string(out)
}

func lab(t *testing.T, args ...string) {
	t.Helper()
	must(t, exec.Command(script, args...))
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// poll calls cond every 200 ms until it holds (true) or timeout has
// passed (false).
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	return true
}

func ctl(t *testing.T, lb int, args ...string) []byte {
	t.Helper()
	c := exec.Command(filepath.Join(labDir, "bin", "fulcrumctl"), append([]string{"--addr", fmt.Sprintf("unix:%s/lb%d.sock", labDir, lb), "--json"}, args...)...)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("fulcrumctl %v on lb%d: %v", args, lb, err)
	}
	return out
}

func status(t *testing.T, lb int) api.Status {
	t.Helper()
	var s api.Status
	if err := json.Unmarshal(ctl(t, lb, "status"), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func backends(t *testing.T, lb int) map[string]api.Backend {
	t.Helper()
	var v api.VIP
	if err := json.Unmarshal(ctl(t, lb, "backends", "web"), &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]api.Backend{}
	for _, b := range v.Backends {
		out[b.Name] = b
	}
	return out
}

// routeHops is the number of next hops the router has for the VIP.
func routeHops() int {
	out, _ := ns("fl-router", "ip", "route", "show", vip).Output()
	s := string(out)
	if n := strings.Count(s, "nexthop"); n > 0 {
		return n
	}
	if strings.Contains(s, "via") {
		return 1
	}
	return 0
}

func waitHops(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d next hops for the VIP at the router", n), 60*time.Second, func() bool { return routeHops() == n })
}

// curlMany makes n requests, each on a new connection, and counts the
// backends that answered and the failures.
func curlMany(t *testing.T, n int) (map[string]int, int) {
	t.Helper()
	args := []string{"curl", "-s", "-m", "5", "-H", "Connection: close", "-o", "/dev/null", "-w", "RESULT %{http_code} %header{x-backend}\n"}
	for i := 0; i < n; i++ {
		args = append(args, "http://"+vip+"/")
	}
	out, _ := ns("fl-client", args...).Output()
	per := map[string]int{}
	ok := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "RESULT" && f[1] == "200" {
			per[f[2]]++
			ok++
		}
	}
	return per, n - ok
}

// conncheck runs fulcrum-conncheck in the client namespace; wait returns
// its report.
type conncheck struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	file string // -report
}

type report struct {
	Connections int            `json:"connections"`
	DialErrors  int            `json:"dial_errors"`
	Broken      []brk          `json:"broken"`
	Switched    int            `json:"switched"`
	PerBackend  map[string]int `json:"per_backend"`
	Alive       int            `json:"alive"`
	Stalled     int            `json:"stalled"` // open, no exchange for 1 s
	// The longest time a connection went without an exchange, and which.
	LongestStallMS   int64 `json:"longest_stall_ms"`
	LongestStallConn int   `json:"longest_stall_conn"`
}

type brk struct {
	Backend string `json:"backend"`
	Err     string `json:"err"`
}

func startConncheck(t *testing.T, n int, d time.Duration) *conncheck {
	t.Helper()
	return startConncheckWith(t, n, d, 10*time.Second, "")
}

// startConncheckWith also sets the checker's -timeout (an exchange that
// makes no progress for that long breaks its connection) and its -report
// file (a temporary one if reportFile is ""), which settle polls. It
// returns once the checker reports its n connections open.
func startConncheckWith(t *testing.T, n int, d, timeout time.Duration, reportFile string) *conncheck {
	t.Helper()
	if reportFile == "" {
		reportFile = filepath.Join(t.TempDir(), "conncheck.json")
	}
	os.Remove(reportFile) // a report in the file is this checker's
	c := &conncheck{file: reportFile, cmd: ns("fl-client", filepath.Join(labDir, "bin", "fulcrum-conncheck"), "-target", vip+":80",
		"-n", fmt.Sprint(n), "-interval", "100ms", "-timeout", timeout.String(), "-duration", d.String(), "-report", reportFile)}
	c.cmd.Stdout = &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() }) // gone before its report's directory is removed
	// The checker spreads its SYNs 1 ms apart and writes its report every
	// second; a connection that failed to open never will.
	var r report
	const within = 30 * time.Second
	if !poll(within, func() bool {
		if q, ok := c.progress(time.Time{}); ok {
			r = q
		}
		return r.Connections+r.DialErrors >= n
	}) || r.Connections < n {
		t.Fatalf("conncheck: %d of %d connections open (%d failed to open) after up to %v", r.Connections, n, r.DialErrors, within)
	}
	return c
}

// progress is the checker's latest report in its -report file, if one was
// written after since.
func (c *conncheck) progress(since time.Time) (report, bool) {
	var r report
	fi, err := os.Stat(c.file)
	if err != nil || !fi.ModTime().After(since) {
		return r, false
	}
	b, err := os.ReadFile(c.file)
	if err != nil || json.Unmarshal(b, &r) != nil {
		return r, false
	}
	return r, true
}

// settle polls the checker's report file until a report written after
// since shows no stalled connection: every connection still open has
// exchanged again since the disturbance (one that moved to another backend
// has been reset by it, and counts as broken). It returns that report.
func (c *conncheck) settle(t *testing.T, since time.Time, timeout time.Duration) report {
	t.Helper()
	var r report
	waitFor(t, "every held connection exchanging again (conncheck: 0 stalled)", timeout, func() bool {
		var ok bool
		r, ok = c.progress(since)
		return ok && r.Stalled == 0
	})
	return r
}

// stop ends the checker early (SIGINT) and returns its final report.
func (c *conncheck) stop(t *testing.T) report {
	t.Helper()
	c.cmd.Process.Signal(os.Interrupt)
	return c.wait(t)
}

func (c *conncheck) wait(t *testing.T) report {
	t.Helper()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("conncheck: %v", err)
	}
	var r report
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
		t.Fatalf("conncheck report: %v\n%s", err, c.out.String())
	}
	return r
}

// 1. 1,000 requests all succeed, spread over every backend, through both LBs.
func TestRequestsSpreadOverBackendsAndLBs(t *testing.T) {
	before := [3]uint64{0, forwarded(t, 1), forwarded(t, 2)}
	per, failed := curlMany(t, 1000)
	if failed != 0 {
		t.Fatalf("%d of 1000 requests failed", failed)
	}
	t.Logf("responses per backend: %v", per)
	if len(per) != 4 {
		t.Fatalf("backends answering: %v, want 4", per)
	}
	for b, n := range per {
		if n < 250*3/4 || n > 250*5/4 {
			t.Errorf("%s answered %d of 1000: outside 250 ±25%%", b, n)
		}
	}
	d1, d2 := forwarded(t, 1)-before[1], forwarded(t, 2)-before[2]
	t.Logf("packets forwarded: lb1 %d, lb2 %d", d1, d2)
	if d1 == 0 || d2 == 0 {
		t.Errorf("an LB carried no flows: lb1 %d lb2 %d", d1, d2)
	}
}

func forwarded(t *testing.T, lb int) uint64 { return status(t, lb).Total.Forwarded }

// 2. DSR: no reply from a backend reaches an LB; the client gets its
// answers from the VIP.
func TestDirectServerReturn(t *testing.T) {
	var caps []*capture
	for _, lb := range []string{"fl-lb1", "fl-lb2"} {
		caps = append(caps, startCapture(t, lb, "wire0"))
	}
	for _, c := range caps {
		c.ready(t)
	}
	per, failed := curlMany(t, 200)
	if failed != 0 || len(per) == 0 {
		t.Fatalf("requests failed: %d", failed)
	}
	from1, to1 := caps[0].count(t)
	from2, to2 := caps[1].count(t)
	t.Logf("frames from the VIP on lb1/lb2's wire: %d/%d; to the VIP: %d/%d", from1, from2, to1, to2)
	if from1+from2 != 0 {
		t.Errorf("%d packets from the VIP (backend replies) reached an LB's wire", from1+from2)
	}
	// The control: the same captures saw the requests (a SYN at least per
	// request) arrive for the VIP, so a 0 above means something.
	if to1+to2 < 200 {
		t.Errorf("the captures saw %d+%d frames to the VIP for 200 requests: they did not capture the LBs' traffic", to1, to2)
	}
}

// captureEnv asks the test binary, re-run inside a namespace, to capture.
const captureEnv = "FULCRUM_LAB_CAPTURE"

// capture is a captureChild counting IPv4 frames from the VIP and to the
// VIP on an interface inside a namespace: the test binary re-runs itself
// there with ip netns exec, so no thread of this process ever changes
// namespace. It prints a line once its socket is bound, and captures until
// its stdin closes; then it prints the two counts.
type capture struct {
	netns string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startCapture(t *testing.T, netns, ifname string) *capture {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{netns: netns, cmd: ns(netns, self, "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), captureEnv+"="+ifname)
	c.cmd.Stderr = os.Stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReader(stdout)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	return c
}

// ready returns once the capture's socket is bound (at most 30 s).
func (c *capture) ready(t *testing.T) {
	t.Helper()
	line := make(chan string, 1)
	go func() { s, _ := c.out.ReadString('\n'); line <- s }()
	const within = 30 * time.Second
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "ready" {
			t.Fatalf("capture in %s: %q before it was ready", c.netns, s)
		}
	case <-time.After(within):
		t.Fatalf("capture in %s: not ready after %v", c.netns, within)
	}
}

// count stops the capture and returns how many IPv4 frames it counted
// from the VIP and to the VIP.
func (c *capture) count(t *testing.T) (from, to int) {
	t.Helper()
	c.stdin.Close()
	out, _ := io.ReadAll(c.out)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("capture in %s: %v", c.netns, err)
	}
	if _, err := fmt.Sscan(string(out), &from, &to); err != nil {
		t.Fatalf("capture in %s: %q", c.netns, out)
	}
	return from, to
}

func captureChild(ifname string) int {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	fmt.Println("ready")
	var stopped atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stopped.Store(true) }()
	buf := make([]byte, 2048)
	want := netip.MustParseAddr(vip).As4()
	from, to := 0, 0
	for !stopped.Load() {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || m < 34 || buf[12] != 0x08 || buf[13] != 0x00 {
			continue
		}
		if [4]byte(buf[26:30]) == want {
			from++
		}
		if [4]byte(buf[30:34]) == want {
			to++
		}
	}
	fmt.Println(from, to)
	return 0
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// 8. Two instances with the same backends listed in different orders build
// the same table, slot for slot.
func TestInstancesBuildIdenticalTables(t *testing.T) {
	var t1, t2 api.Table
	json.Unmarshal(ctl(t, 1, "table", "web"), &t1)
	json.Unmarshal(ctl(t, 2, "table", "web"), &t2)
	if len(t1.Slots) != 65537 || len(t2.Slots) != 65537 {
		t.Fatalf("table sizes %d and %d", len(t1.Slots), len(t2.Slots))
	}
	diff := 0
	for i := range t1.Slots {
		if t1.Slots[i] != t2.Slots[i] {
			diff++
		}
	}
	if diff != 0 || t1.Digest != t2.Digest {
		t.Errorf("%d slots differ (digests %s / %s)", diff, t1.Digest, t2.Digest)
	}
	cfg1, _ := os.ReadFile(filepath.Join(labDir, "lb1.toml"))
	cfg2, _ := os.ReadFile(filepath.Join(labDir, "lb2.toml"))
	if bytes.Equal(cfg1, cfg2) {
		t.Error("the two configurations are identical: the test proves nothing")
	}
}

// 7. A backend drained with fulcrumctl: its connections keep working, it
// takes no new ones, and it shows 0 flows once they are closed. It runs
// before the tests that kill and restart LBs: a flow that ECMP moves to
// another LB leaves its entry behind on the first one until it times out,
// and such stale entries would count as flows here.
func TestDrainWithFulcrumctl(t *testing.T) {
	cc := startConncheck(t, 100, 5*time.Second)
	for lb := 1; lb <= 2; lb++ {
		ctl(t, lb, "drain", "web", "be1")
	}
	// Undrain at the end and wait for its slow start to finish: while it
	// ramps, a flow that ECMP moves to the other LB may find a different
	// table there (see README, "Slow start and the fleet").
	t.Cleanup(func() {
		for lb := 1; lb <= 2; lb++ {
			ctl(t, lb, "undrain", "web", "be1")
		}
		for lb := 1; lb <= 2; lb++ {
			waitFor(t, fmt.Sprintf("be1 at full weight on lb%d", lb), 30*time.Second, func() bool {
				b := backends(t, lb)["be1"]
				return !b.Drained && !b.SlowStart && b.TableSlots > 0
			})
		}
	})
	per, failed := curlMany(t, 200)
	if failed != 0 || per["be1"] != 0 {
		t.Errorf("while drained: %d failed, be1 took %d new connections", failed, per["be1"])
	}
	flows := backends(t, 1)["be1"].ActiveFlows + backends(t, 2)["be1"].ActiveFlows
	r := cc.wait(t)
	t.Logf("be1 held %d connections, %d flows while drained; broken %d", r.PerBackend["be1"], flows, len(r.Broken))
	if len(r.Broken) != 0 || r.PerBackend["be1"] == 0 || flows == 0 {
		t.Errorf("drain: broken %d, be1 connections %d, flows %d", len(r.Broken), r.PerBackend["be1"], flows)
	}
	// The last connections' entries close with their FINs, and a
	// half-closed one stops counting 10 s after its client's last ACK.
	if !poll(20*time.Second, func() bool {
		return backends(t, 1)["be1"].ActiveFlows+backends(t, 2)["be1"].ActiveFlows == 0
	}) {
		for lb := 1; lb <= 2; lb++ {
			t.Logf("lb%d: be1 flows %d; its entries: %s", lb, backends(t, lb)["be1"].ActiveFlows, ctl(t, lb, "conns", "--vip", "web", "--backend", "be1", "--limit", "20"))
		}
		t.Fatal("be1 not at 0 flows within 20 s of its connections closing")
	}
}

// 6. A backend added by a config reload: it gets new flows after its slow
// start, and no established connection breaks.
func TestBackendAddedByReload(t *testing.T) {
	marker := filepath.Join(labDir, "removed-be4")
	reload := func() {
		for lb := 1; lb <= 2; lb++ {
			conf := must(t, exec.Command(script, "lb-conf", fmt.Sprint(lb)))
			os.WriteFile(filepath.Join(labDir, fmt.Sprintf("lb%d.toml", lb)), []byte(conf), 0o644)
			ctl(t, lb, "reload")
		}
	}
	os.WriteFile(marker, nil, 0o644)
	t.Cleanup(func() { os.Remove(marker) })
	reload() // be4 out
	if _, ok := backends(t, 1)["be4"]; ok {
		t.Fatal("be4 still configured after the reload")
	}
	moved0 := status(t, 1).Total.Moved + status(t, 2).Total.Moved
	cc := startConncheck(t, 150, 6*time.Second)
	os.Remove(marker)
	reload() // be4 back in
	waitFor(t, "be4 in the tables at full weight", 30*time.Second, func() bool {
		b := backends(t, 1)["be4"]
		return b.Health == "up" && b.TableSlots > 0 && !b.SlowStart
	})
	r := cc.wait(t)
	moved := status(t, 1).Total.Moved + status(t, 2).Total.Moved - moved0
	t.Logf("connections %d, broken %d, switched %d; flows the LBs re-selected meanwhile: %d", r.Connections, len(r.Broken), r.Switched, moved)
	if len(r.Broken) != 0 || r.Switched != 0 {
		t.Errorf("adding be4 broke %d connections (%v), switched %d", len(r.Broken), r.Broken, r.Switched)
	}
	per, failed := curlMany(t, 400)
	t.Logf("after adding be4: %v", per)
	if failed != 0 || per["be4"] == 0 {
		t.Errorf("be4 takes no new flows: %v, failed %d", per, failed)
	}
}

// 9. Passive health: be3 stops accepting connections on its service port
// (the kernel refuses them) while its health endpoint still answers 200.
// The active checks cannot see it; the LBs see its handshakes fail and
// eject it as an outlier, then take it back after its backoff.
func TestPassiveEjectionOfABackendThatStopsAccepting(t *testing.T) {
	refusingBackendIsEjected(t, "3")
}

// refusingBackendIsEjected makes backend be<n> refuse connections on its
// service port under client load and checks that both LBs eject it by
// their passive checks alone: it shows outlier while its active check still
// says up (its health endpoint keeps answering 200, so no active check can
// take it out), and it gets no new flows. It takes it back at the end.
func refusingBackendIsEjected(t *testing.T, n string) {
	t.Helper()
	be := "be" + n
	lab(t, "signal-backend", n, "USR2") // refuse
	refusing := true
	t.Cleanup(func() {
		if refusing {
			exec.Command(script, "signal-backend", n, "USR2").Run()
		}
	})
	_, failed := curlMany(t, 200)
	t.Logf("while %s refuses: %d of 200 requests failed", be, failed)
	for lb := 1; lb <= 2; lb++ {
		// The state checked is the one the poll saw ejected: a second
		// look can land after a 2 s ejection has run out (CI saw that).
		var b api.Backend
		waitFor(t, fmt.Sprintf("%s ejected on lb%d", be, lb), 20*time.Second, func() bool {
			if b = backends(t, lb)[be]; b.Outlier {
				return true
			}
			curlMany(t, 40) // keep the handshake signal coming
			return false
		})
		t.Logf("lb%d: %s health %q, outlier, reason %q", lb, be, b.Health, b.Reason)
		if b.Health != "up" || b.TableSlots != 0 {
			t.Errorf("lb%d: %s %+v: want its active check still up and no table slots", lb, be, b)
		}
	}
	// No request fails while both LBs eject it. The first ejection lasts
	// 2 s, which a slow shared host can use up between lb1's ejection and
	// here; a batch sent after one LB took it back proves nothing, so the
	// batch counts only when it is ejected on both before and after it
	// (requests that fail meanwhile eject it again, for longer).
	ejected := func() bool { return backends(t, 1)[be].Outlier && backends(t, 2)[be].Outlier }
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ejected on both LBs for the length of 200 requests within 60 s", be)
		}
		if !ejected() {
			curlMany(t, 40) // keep the handshake signal coming
			continue
		}
		per, failed := curlMany(t, 200)
		if !ejected() {
			t.Logf("an ejection of %s ran out during the batch (%d failed): again", be, failed)
			continue
		}
		if failed != 0 || per[be] != 0 {
			t.Errorf("after the ejection: %d failed, %s answered %d", failed, be, per[be])
		}
		break
	}
	lab(t, "signal-backend", n, "USR2") // accept again
	refusing = false
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("%s back at full weight on lb%d after its backoff", be, lb), 30*time.Second, func() bool {
			b := backends(t, lb)[be]
			return !b.Outlier && b.TableSlots > 0 && !b.SlowStart
		})
	}
}

// 3. An LB killed (SIGKILL) under 200 long-lived connections: the router
// withdraws it when the BGP session dies, the other instance carries its
// flows to the same backends, no connection breaks.
func TestLBKilledNoConnectionBreaks(t *testing.T) {
	// Broken means reset, or no progress for 30 s (as in check 12): a
	// segment the client retransmits just before the router withdraws lb1
	// (BGP hold 3 s) is next retransmitted 6.4 s later by TCP's backoff,
	// so a healthy connection may stall for over 10 s and then go on. The
	// checker runs until every connection has exchanged again after the
	// withdrawal (a connection still in its backoff at a fixed end would
	// count neither broken nor alive).
	fleetSettled(t, 30*time.Second)
	cc := startConncheckWith(t, 200, 90*time.Second, 30*time.Second, filepath.Join(t.TempDir(), "conncheck.json"))
	// Both LBs' connection entries just before the kill, for stallSnapshot.
	var before [3]api.Conns
	for lb := 1; lb <= 2; lb++ {
		json.Unmarshal(ctl(t, lb, "conns", "--limit", "100000"), &before[lb])
	}
	start := time.Now()
	lab(t, "stop-lb", "1", "KILL")
	t.Cleanup(func() {
		if routeHops() < 2 {
			exec.Command(script, "start-lb", "1").Run()
		}
	})
	waitHops(t, 1)
	withdrawn := time.Now()
	t.Logf("router withdrew lb1 %v after the kill", withdrawn.Sub(start).Round(100*time.Millisecond))
	// A connection still stalled 12 s after the withdrawal has missed the
	// retransmissions lb2 should have carried: what the client, lb2 and the
	// backends saw then goes into the log, for a failure to be explained.
	snapped := false
	waitFor(t, "every held connection exchanging again (conncheck: 0 stalled)", 40*time.Second, func() bool {
		r, ok := cc.progress(withdrawn.Add(time.Second))
		if ok && r.Stalled > 0 && !snapped && time.Since(withdrawn) > 12*time.Second {
			snapped = true
			t.Logf("%d connections still stalled %v after the withdrawal:", r.Stalled, time.Since(withdrawn).Round(100*time.Millisecond))
			stallSnapshot(t, before[1:])
		}
		return ok && r.Stalled == 0
	})
	t.Logf("every connection exchanging again %v after the kill", time.Since(start).Round(100*time.Millisecond))
	r := cc.stop(t)
	t.Logf("connections %d, broken %d, switched backend %d, alive %d, per backend %v; longest stall %d ms (connection %d)",
		r.Connections, len(r.Broken), r.Switched, r.Alive, r.PerBackend, r.LongestStallMS, r.LongestStallConn)
	if r.Connections != 200 || len(r.Broken) != 0 || r.Switched != 0 || r.Alive != 200 {
		t.Errorf("after killing lb1: %d connections, %d broken (%v), %d switched, %d alive", r.Connections, len(r.Broken), r.Broken, r.Switched, r.Alive)
	}
	lab(t, "start-lb", "1")
	waitHops(t, 2)
}

// stallSnapshot logs, for a failure to be explained, the client's TCP
// sockets of the VIP with data unacknowledged or retransmitted, every
// socket of their ports on the backends (TIME_WAIT included), lb2's
// connection entries of those ports, its backends and counters, the
// router's route and the backends' decapsulator counters.
func stallSnapshot(t *testing.T, before []api.Conns) {
	t.Helper()
	out, _ := ns("fl-client", "ss", "-tnio", "state", "established", "dst", vip).CombinedOutput()
	lines := strings.Split(string(out), "\n")
	var ports []string
	for i := 1; i+1 < len(lines); i += 2 {
		info := lines[i+1]
		if !strings.Contains(info, "unacked:") && !strings.Contains(info, "backoff:") {
			continue
		}
		t.Logf("client: %s | %s", strings.Join(strings.Fields(lines[i]), " "), strings.TrimSpace(info))
		if f := strings.Fields(lines[i]); len(f) >= 4 {
			if _, port, ok := strings.Cut(f[2], ":"); ok {
				ports = append(ports, port)
			}
		}
	}
	var now api.Conns
	if len(ports) > 0 {
		json.Unmarshal(ctl(t, 2, "conns", "--limit", "100000"), &now)
	}
	for _, port := range ports[:min(len(ports), 5)] {
		for b := 1; b <= 4; b++ {
			o, _ := ns(fmt.Sprintf("fl-be%d", b), "ss", "-tanio", "dport", "= :"+port).CombinedOutput()
			if f := strings.SplitN(strings.TrimSpace(string(o)), "\n", 2); len(f) == 2 {
				t.Logf("be%d, client port %s: %s", b, port, strings.Join(strings.Fields(f[1]), " "))
			}
		}
		for _, c := range now.Conns {
			if strings.HasSuffix(c.Client, ":"+port) {
				t.Logf("lb2 entry now: %+v", c)
			}
		}
		for i, b := range before {
			for _, c := range b.Conns {
				if strings.HasSuffix(c.Client, ":"+port) {
					t.Logf("lb%d entry before the kill: %+v", i+1, c)
				}
			}
		}
	}
	t.Logf("lb2 backends: %s", ctl(t, 2, "backends", "web"))
	t.Logf("lb2 status: %s", ctl(t, 2, "status"))
	t.Logf("router: %s", must(t, ns("fl-router", "ip", "route", "show", vip)))
	for b := 1; b <= 4; b++ {
		line, err := decapCounters(b)
		if err != nil {
			line = err.Error()
		}
		t.Logf("be%d decap: %s", b, line)
	}
	for lb := 1; lb <= 2; lb++ { // lb1's too: killed, its file is what it said last
		log, _ := os.ReadFile(filepath.Join(labDir, fmt.Sprintf("lb%d.log", lb)))
		ll := strings.Split(strings.TrimSpace(string(log)), "\n")
		t.Logf("lb%d log, last lines:\n%s", lb, strings.Join(ll[max(0, len(ll)-30):], "\n"))
	}
}

// fleetSettled waits until both LBs use the same table for web, with every
// backend up and at full weight (no slow start, ejection or down verdict
// on either): a test of what ECMP moving flows between the instances does
// starts from a fleet whose instances agree. While their tables differ (a
// ramp begun at other times, a verdict one instance gave alone, as a
// host-wide burst of check timeouts leaves behind) a moved flow may reach
// another backend: README, "Slow start and the fleet".
func fleetSettled(t *testing.T, timeout time.Duration) {
	t.Helper()
	var last string
	if !poll(timeout, func() bool {
		var tb [3]api.Table
		last = ""
		for lb := 1; lb <= 2; lb++ {
			json.Unmarshal(ctl(t, lb, "table", "web"), &tb[lb])
			for name, b := range backends(t, lb) {
				if b.Health != "up" || b.Down || b.Outlier || b.SlowStart || b.Drained {
					last += fmt.Sprintf(" lb%d %s: %s down=%v outlier=%v slow_start=%v drained=%v;", lb, name, b.Health, b.Down, b.Outlier, b.SlowStart, b.Drained)
				}
			}
		}
		if tb[1].Digest != tb[2].Digest {
			last += fmt.Sprintf(" table digests %s / %s", tb[1].Digest, tb[2].Digest)
		}
		return last == ""
	}) {
		t.Fatalf("the LBs did not agree within %v:%s", timeout, last)
	}
}

// 4. A rolling restart of every LB with SIGTERM under wrk load: no
// request fails (each withdraws its VIPs, drains, stops, comes back).
func TestRollingRestartUnderLoad(t *testing.T) {
	// wrk runs until both LBs are back and carrying its requests again
	// (the 3 minutes are a bound), so the load covers the whole restart;
	// SIGINT makes it stop and print its summary.
	wrk := ns("fl-client", "wrk", "-t", "2", "-c", "32", "-d", "3m", "--timeout", "5s", "http://"+vip+"/")
	var out bytes.Buffer
	wrk.Stdout, wrk.Stderr = &out, &out
	if err := wrk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wrk.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- wrk.Wait() }()
	start := time.Now()
	carrying := func(what string) {
		before := [3]uint64{0, forwarded(t, 1), forwarded(t, 2)}
		waitFor(t, what+" (100 packets forwarded by each LB)", 20*time.Second, func() bool {
			return forwarded(t, 1) >= before[1]+100 && forwarded(t, 2) >= before[2]+100
		})
	}
	carrying("wrk's requests going through both LBs")
	for _, lb := range []string{"1", "2"} {
		lab(t, "stop-lb", lb, "TERM")
		lab(t, "start-lb", lb)
		waitHops(t, 2)
		t.Logf("lb%s restarted %v after wrk started", lb, time.Since(start).Round(100*time.Millisecond))
	}
	carrying("wrk's requests going through both restarted LBs")
	select {
	case err := <-done:
		t.Fatalf("wrk ended before the rolling restart did (err %v)\n%s", err, out.String())
	default:
	}
	wrk.Process.Signal(os.Interrupt)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wrk: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("wrk did not stop within 30 s of SIGINT\n%s", out.String())
	}
	s := out.String()
	t.Logf("wrk:\n%s", s)
	if strings.Contains(s, "Socket errors") || strings.Contains(s, "Non-2xx") {
		t.Errorf("requests failed during the rolling restart")
	}
	if !strings.Contains(s, "requests in") {
		t.Errorf("wrk made no requests")
	}
}

// 5. A backend killed: its connections break, the others' do not, and the
// health checks take it out of both tables.
func TestBackendKilledOnlyItsConnectionsBreak(t *testing.T) {
	// The checker runs until every connection still open has exchanged
	// again after both LBs took be2 out (the 2 min are a bound).
	cc := startConncheck(t, 200, 2*time.Minute)
	// Every connection has had its first exchange, so each break is
	// counted against the backend it had.
	waitFor(t, "a first exchange on each of the 200 connections (conncheck per_backend)", 10*time.Second, func() bool {
		r, ok := cc.progress(time.Time{})
		n := 0
		for _, v := range r.PerBackend {
			n += v
		}
		return ok && n == r.Connections
	})
	killed := time.Now()
	lab(t, "stop-backend", "2", "KILL")
	t.Cleanup(func() { exec.Command(script, "start-backend", "2").Run() })
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("be2 down on lb%d", lb), 10*time.Second, func() bool { return backends(t, lb)["be2"].Health == "down" })
	}
	down := time.Now()
	cc.settle(t, down.Add(time.Second), 30*time.Second)
	t.Logf("be2 down on both LBs %v after the kill; every connection still open exchanging again %v after that", down.Sub(killed).Round(100*time.Millisecond), time.Since(down).Round(100*time.Millisecond))
	r := cc.stop(t)
	other := 0
	for _, b := range r.Broken {
		if b.Backend != "be2" {
			other++
		}
	}
	t.Logf("connections %d; on be2 %d; broken %d, of which on other backends %d; alive at the end %d", r.Connections, r.PerBackend["be2"], len(r.Broken), other, r.Alive)
	if other != 0 || len(r.Broken) != r.PerBackend["be2"] || r.PerBackend["be2"] == 0 {
		t.Errorf("broken %d (other backends %d), be2 had %d", len(r.Broken), other, r.PerBackend["be2"])
	}
	// Every connection of the other backends still exchanged at the end:
	// none was lost without being counted broken.
	if r.Alive != r.Connections-len(r.Broken) {
		t.Errorf("alive at the end %d, want %d (connections %d, broken %d)", r.Alive, r.Connections-len(r.Broken), r.Connections, len(r.Broken))
	}
	per, failed := curlMany(t, 200)
	if failed != 0 || per["be2"] != 0 {
		t.Errorf("after be2 died: %d failed, be2 answered %d", failed, per["be2"])
	}
	lab(t, "start-backend", "2")
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("be2 up on lb%d", lb), 30*time.Second, func() bool { b := backends(t, lb)["be2"]; return b.Health == "up" && !b.SlowStart })
	}
}

// The hardening round's checks (BRIEF, "Connections"): the most disruptive
// of all, so they run last. Each holds connections through the VIP and
// counts the broken ones; each leaves the lab as it found it.

// spoofNet is where the spoofed SYNs come from: RFC 6598 shared address
// space, routed nowhere in the lab. The router blackholes it while the
// spoofer runs, so the backends' SYN-ACKs vanish as they would for a blind
// spoofer (and no ICMP error about them comes back to the VIP).
const spoofNet = "100.64.0.0/10"

// spoofEnv asks the test binary, re-run inside a namespace, to send SYNs
// from forged sources: "RATE,DURATION,VIP:PORT".
const spoofEnv = "FULCRUM_LAB_SPOOF"

// spoofer is a running spoofChild.
type spoofer struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done
}

// startSpoofer sends rate SYNs a second for d from random sources in
// spoofNet to the VIP's port 80, from the client namespace, through the
// router: the test binary re-runs itself there (ip netns exec), so no
// thread of this process changes namespace.
func startSpoofer(t *testing.T, rate int, d time.Duration) *spoofer {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &spoofer{cmd: ns("fl-client", self, "-test.run=^$"), done: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s,%s:80", spoofEnv, rate, d, vip))
	s.cmd.Stdout = &s.out
	s.cmd.Stderr = &s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill() })
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	return s
}

// sent waits for the spoofer to finish and returns how many SYNs it sent.
func (s *spoofer) sent(t *testing.T) int {
	t.Helper()
	<-s.done
	if s.err != nil {
		t.Fatalf("spoofer: %v\n%s", s.err, s.out.String())
	}
	var n int
	if _, err := fmt.Sscan(s.out.String(), &n); err != nil {
		t.Fatalf("spoofer: %q", s.out.String())
	}
	return n
}

// spoofChild sends the SYNs through a raw IPv4 socket (IP_HDRINCL), paced
// by a ticker and bounded by the duration; it prints the count sent.
func spoofChild(spec string) int {
	var rate int
	var d time.Duration
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "%s=%q: want RATE,DURATION,ADDR:PORT\n", spoofEnv, spec)
		return 2
	}
	rate, err1 := strconv.Atoi(parts[0])
	d, err2 := time.ParseDuration(parts[1])
	dst, err3 := netip.ParseAddrPort(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || rate < 1 || rate > 10000 || d > 5*time.Minute || !dst.Addr().Is4() {
		fmt.Fprintf(os.Stderr, "%s=%q: want RATE (1..10000),DURATION (<= 5m),IPv4:PORT\n", spoofEnv, spec)
		return 2
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		fmt.Fprintln(os.Stderr, "raw socket:", err)
		return 1
	}
	defer unix.Close(fd)
	base := netip.MustParsePrefix(spoofNet).Addr().As4()
	to := &unix.SockaddrInet4{Addr: dst.Addr().As4()}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	sent := 0
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		// A random host in 100.64.0.0/10: the low 22 bits.
		r := rand.Uint32() & (1<<22 - 1)
		src := base
		src[1] |= byte(r >> 16)
		src[2], src[3] = byte(r>>8), byte(r)
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment,
			SrcIP: net.IP(src[:]), DstIP: net.IP(to.Addr[:])}
		tcp := &layers.TCP{SrcPort: layers.TCPPort(1024 + rand.IntN(64511)), DstPort: layers.TCPPort(dst.Port()),
			Seq: rand.Uint32(), SYN: true, Window: 64240}
		tcp.SetNetworkLayerForChecksum(ip)
		if err := gopacket.SerializeLayers(buf, opts, ip, tcp); err != nil {
			fmt.Fprintln(os.Stderr, "build SYN:", err)
			return 1
		}
		if err := unix.Sendto(fd, buf.Bytes(), 0, to); err != nil {
			fmt.Fprintln(os.Stderr, "send SYN:", err)
			return 1
		}
		sent++
	}
	fmt.Println(sent)
	return 0
}

// badBackends lists, for both LBs, every backend that is not fully in
// service by health: down by its active checks, marked down (its flows
// moved) or ejected as an outlier.
func badBackends(t *testing.T) []string {
	t.Helper()
	var bad []string
	for lb := 1; lb <= 2; lb++ {
		for name, b := range backends(t, lb) {
			if b.Health != "up" || b.Down || b.Outlier {
				bad = append(bad, fmt.Sprintf("lb%d/%s(health=%s down=%v outlier=%v)", lb, name, b.Health, b.Down, b.Outlier))
			}
		}
	}
	return bad
}

// vipCounters sums, over both LBs and every backend, the passive ejections
// so far and the new flows.
func vipCounters(t *testing.T) (ejections int, newFlows uint64) {
	t.Helper()
	for lb := 1; lb <= 2; lb++ {
		for _, b := range backends(t, lb) {
			ejections += b.Ejections
			newFlows += b.NewFlows
		}
	}
	return
}

// 10. Spoofed SYNs: 100 a second for 30 s from random sources in
// 100.64.0.0/10 while 200 connections are held: no backend is ejected or
// goes down on either LB, no connection breaks. A blind spoofer's
// handshakes never complete, spread over every backend by the same hash as
// real flows (BRIEF, "Passive health under a blind spoofer"). Then the
// positive control: a backend that really refuses connections under real
// client load is still ejected, by the passive checks (check 9's
// assertions, right after the spoofer's failures).
func TestSpoofedSYNsEjectNoBackend(t *testing.T) {
	must(t, ns("fl-router", "ip", "route", "replace", "blackhole", spoofNet))
	t.Cleanup(func() { ns("fl-router", "ip", "route", "del", "blackhole", spoofNet).Run() })
	ej0, flows0 := vipCounters(t)
	cc := startConncheck(t, 200, 34*time.Second)
	sp := startSpoofer(t, 100, 30*time.Second)
	seen := map[string]bool{} // every not-in-service state observed meanwhile
	polls := 0
	for running := true; running; {
		select {
		case <-sp.done:
			running = false
		case <-time.After(500 * time.Millisecond):
		}
		for _, b := range badBackends(t) {
			seen[b] = true
		}
		polls++
	}
	sent := sp.sent(t)
	r := cc.wait(t)
	ej1, flows1 := vipCounters(t)
	t.Logf("spoofed SYNs sent %d, new flows at the LBs %d; connections held %d, broken %d, switched %d, alive %d; passive ejections %d; backends seen out of service in %d polls: %v",
		sent, flows1-flows0, r.Connections, len(r.Broken), r.Switched, r.Alive, ej1-ej0, polls, keys(seen))
	// The harness: the SYNs must have reached the LBs as new flows, or
	// the check proves nothing.
	if sent < 2900 || flows1-flows0 < uint64(sent)*9/10 {
		t.Fatalf("harness: %d SYNs sent, %d new flows at the LBs: the spoofed SYNs did not reach them", sent, flows1-flows0)
	}
	if r.Connections != 200 || len(r.Broken) != 0 || r.Switched != 0 || r.Alive != 200 {
		t.Errorf("under spoofed SYNs: %d connections, %d broken (%v), %d switched, %d alive", r.Connections, len(r.Broken), brokenSample(r.Broken), r.Switched, r.Alive)
	}
	if ej1 != ej0 || len(seen) != 0 {
		t.Errorf("under spoofed SYNs: %d passive ejections; out of service: %v", ej1-ej0, keys(seen))
	}
	// Whatever the spoofer did, let every backend back in before the
	// positive control, so that it starts from a clean fleet.
	waitFor(t, "every backend in service on both LBs", 60*time.Second, func() bool { return len(badBackends(t)) == 0 })
	refusingBackendIsEjected(t, "3")
}

// 11. A flapping health endpoint: be1's health check fails for 1 s and
// succeeds for 1 s, for 20 s, while its service keeps answering and 200
// connections are held, some on be1: with on_down = "keep" (the default)
// a backend that goes down gets no new flows but keeps its tracked ones,
// so no connection breaks.
func TestFlappingHealthEndpointBreaksNoConnection(t *testing.T) {
	cc := startConncheck(t, 200, 24*time.Second)
	lab(t, "signal-backend", "1", "HUP") // start flapping
	flapping := true
	t.Cleanup(func() {
		if flapping {
			exec.Command(script, "signal-backend", "1", "HUP").Run()
		}
	})
	// Count be1's falls on each LB: the check proves something only if
	// the LBs did see it go down.
	falls := [3]int{}
	wasDown := [3]bool{}
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for lb := 1; lb <= 2; lb++ {
			down := backends(t, lb)["be1"].Health == "down"
			if down && !wasDown[lb] {
				falls[lb]++
			}
			wasDown[lb] = down
		}
	}
	lab(t, "signal-backend", "1", "HUP") // steady again
	flapping = false
	r := cc.wait(t)
	t.Logf("connections held %d (on be1 %d), broken %d, switched %d, alive %d; be1 went down %d times on lb1, %d on lb2",
		r.Connections, r.PerBackend["be1"], len(r.Broken), r.Switched, r.Alive, falls[1], falls[2])
	if r.PerBackend["be1"] == 0 || falls[1] == 0 || falls[2] == 0 {
		t.Fatalf("harness: be1 held %d connections and went down %d/%d times: the flap was not seen", r.PerBackend["be1"], falls[1], falls[2])
	}
	if r.Connections != 200 || len(r.Broken) != 0 || r.Switched != 0 || r.Alive != 200 {
		t.Errorf("while be1's health flapped: %d connections, %d broken (%v), %d switched, %d alive", r.Connections, len(r.Broken), brokenSample(r.Broken), r.Switched, r.Alive)
	}
	// Its flap damping may hold it out for a while (flap_backoff up to
	// flap_backoff_max, 10 s here).
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("be1 back at full weight on lb%d", lb), 40*time.Second, func() bool {
			b := backends(t, lb)["be1"]
			return b.Health == "up" && !b.Down && b.TableSlots > 0 && !b.SlowStart
		})
	}
}

// 12. Both LBs restarted at once (SIGTERM, then started again) under 200
// held connections: while both are away the router has no route and the
// clients' TCP retransmits; the fresh instances must announce only once
// every backend's first health verdict is in, and must pick each flow's
// backend by the same table as before, so no connection breaks. An
// exchange may stall for the whole restart: here a connection breaks on a
// reset, or after 30 s without progress.
func TestBothLBsRestartedNoConnectionBreaks(t *testing.T) {
	fleetSettled(t, 30*time.Second)
	cc := startConncheckWith(t, 200, 2*time.Minute, 30*time.Second, filepath.Join(labDir, "conncheck-restart.json"))
	t.Cleanup(func() {
		for lb := 1; lb <= 2; lb++ {
			if _, err := os.Stat(filepath.Join(labDir, fmt.Sprintf("lb%d.pid", lb))); err != nil {
				exec.Command(script, "start-lb", fmt.Sprint(lb)).Run()
			}
		}
		waitHops(t, 2)
	})
	start := time.Now()
	both := func(args ...string) {
		errs := make(chan error, 2)
		for _, lb := range []string{"1", "2"} {
			go func() {
				out, err := exec.Command(script, append(args, lb)...).CombinedOutput()
				if err != nil {
					err = fmt.Errorf("lab.sh %v %s: %v\n%s", args, lb, err, out)
				}
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	both("stop-lb")
	stopped := time.Since(start)
	// Watch each fresh instance from its first answer: whenever it
	// announces the VIP, every backend must be in its table (all four
	// are healthy), or flows that ECMP brings it would go elsewhere.
	watched := make(chan announceWatch, 2)
	stop := make(chan struct{})
	for lb := 1; lb <= 2; lb++ {
		go func() { watched <- watchAnnounce(lb, stop) }()
	}
	both("start-lb")
	waitHops(t, 2)
	back := time.Now()
	cc.settle(t, back.Add(time.Second), 45*time.Second)
	close(stop)
	r := cc.stop(t)
	t.Logf("both stopped in %v, both announced again %v after the stop began; connections held %d, broken %d, switched %d, alive %d",
		stopped.Round(100*time.Millisecond), back.Sub(start).Round(100*time.Millisecond), r.Connections, len(r.Broken), r.Switched, r.Alive)
	for range 2 {
		w := <-watched
		t.Logf("lb%d from its start: %d admin API polls, %d while announced, %d of them with a backend missing from the table %v",
			w.lb, w.polls, w.announced, len(w.partial), w.partial[:min(len(w.partial), 3)])
		if w.announced == 0 {
			t.Errorf("harness: lb%d was never seen announcing the VIP", w.lb)
		}
		if len(w.partial) != 0 {
			t.Errorf("lb%d announced the VIP with a partial table %d times (first: %s)", w.lb, len(w.partial), w.partial[0])
		}
	}
	if r.Connections != 200 || len(r.Broken) != 0 || r.Switched != 0 || r.Alive != 200 {
		t.Errorf("after restarting both LBs: %d connections, %d broken (%v), %d switched, %d alive", r.Connections, len(r.Broken), brokenSample(r.Broken), r.Switched, r.Alive)
	}
}

// announceWatch is what watchAnnounce saw of one instance.
type announceWatch struct {
	lb               int
	polls, announced int      // admin API polls answered; of them, with the VIP announced
	partial          []string // polls announced with a backend not in the table
}

// watchAnnounce polls lb's admin API as fast as it answers (fulcrumctl is
// too slow for a window of 100 ms) until stop, recording every answer in
// which the VIP is announced over BGP while a configured backend has no
// slot in its table.
func watchAnnounce(lb int, stop <-chan struct{}) announceWatch {
	sock := filepath.Join(labDir, fmt.Sprintf("lb%d.sock", lb))
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	get := func(path string, v any) bool {
		resp, err := c.Get("http://lb" + path)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(v) == nil
	}
	w := announceWatch{lb: lb}
	for {
		select {
		case <-stop:
			return w
		case <-time.After(20 * time.Millisecond):
		}
		var s api.Status
		var v api.VIP
		if !get(api.StatusPath, &s) || !get(api.VIPPath("web"), &v) {
			continue // not started yet
		}
		w.polls++
		if len(s.Announced) == 0 {
			continue
		}
		w.announced++
		var missing []string
		for _, b := range v.Backends {
			if b.TableSlots == 0 {
				missing = append(missing, fmt.Sprintf("%s(health=%s %s)", b.Name, b.Health, b.Reason))
			}
		}
		if len(missing) > 0 {
			w.partial = append(w.partial, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), missing))
		}
	}
}

// 13. A reload whose health check points at a wrong port (8081: nothing
// listens, every check is refused): every backend goes down on both LBs,
// the VIP goes into panic mode (fail open, section 5.4); a reload back to
// 8080 brings them up and ends panic mode. 200 connections held
// throughout: with on_down = "keep" nothing moves on the way down, and
// leaving panic mode never moves a flow, so none breaks.
func TestReloadWithWrongHealthPortBreaksNoConnection(t *testing.T) {
	reload := func(port string) {
		for lb := 1; lb <= 2; lb++ {
			c := exec.Command(script, "lb-conf", fmt.Sprint(lb))
			c.Env = append(os.Environ(), "HEALTH_PORT="+port)
			conf := must(t, c)
			if err := os.WriteFile(filepath.Join(labDir, fmt.Sprintf("lb%d.toml", lb)), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			ctl(t, lb, "reload")
		}
	}
	allUp := func(lb int) bool {
		for _, b := range backends(t, lb) {
			if b.Health != "up" || b.Down || b.SlowStart || b.TableSlots == 0 {
				return false
			}
		}
		return len(status(t, lb).PanicVIPs) == 0
	}
	cc := startConncheckWith(t, 200, 2*time.Minute, 10*time.Second, filepath.Join(labDir, "conncheck-reload.json"))
	reload("8081")
	wrong := true
	t.Cleanup(func() {
		if wrong {
			reload("8080")
		}
		for lb := 1; lb <= 2; lb++ {
			waitFor(t, fmt.Sprintf("every backend up on lb%d", lb), 30*time.Second, func() bool { return allUp(lb) })
		}
	})
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("every backend down and the VIP in panic mode on lb%d", lb), 20*time.Second, func() bool {
			for _, b := range backends(t, lb) {
				if b.Health != "down" {
					return false
				}
			}
			p := status(t, lb).PanicVIPs
			return len(p) == 1 && p[0] == "web"
		})
	}
	panicked := time.Now()
	reload("8080")
	wrong = false
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("every backend up at full weight, panic over, on lb%d", lb), 30*time.Second, func() bool { return allUp(lb) })
	}
	cc.settle(t, time.Now().Add(time.Second), 30*time.Second)
	r := cc.stop(t)
	t.Logf("panic mode on both LBs, left %v after the reload back; connections held %d, broken %d, switched %d, alive %d",
		time.Since(panicked).Round(100*time.Millisecond), r.Connections, len(r.Broken), r.Switched, r.Alive)
	if r.Connections != 200 || len(r.Broken) != 0 || r.Switched != 0 || r.Alive != 200 {
		t.Errorf("through the wrong-port reload and back: %d connections, %d broken (%v), %d switched, %d alive", r.Connections, len(r.Broken), brokenSample(r.Broken), r.Switched, r.Alive)
	}
}

// brokenSample is the first few breaks, for a readable failure.
func brokenSample(b []brk) []brk { return b[:min(len(b), 3)] }

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
