//go:build dpdk && lab

// Package lab runs the Fulcrum lab (scripts/lab/lab.sh: a client, a bird2
// router doing ECMP, two Fulcrum instances and four backends, each in a
// network namespace of its own) and checks the fleet's behaviour with real
// clients and real failures, with numbers. The tests run in order and
// share one lab; each leaves it as it found it.
package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	wd, _ := os.Getwd()
	script = filepath.Join(wd, "lab.sh")
	up := exec.Command(script, "up")
	up.Stdout, up.Stderr = os.Stdout, os.Stderr
	defer func() {
		down := exec.Command(script, "down")
		down.Stdout, down.Stderr = os.Stdout, os.Stderr
		down.Run()
	}()
	if err := up.Run(); err != nil {
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
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
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
	cmd *exec.Cmd
	out bytes.Buffer
}

type report struct {
	Connections int            `json:"connections"`
	DialErrors  int            `json:"dial_errors"`
	Broken      []brk          `json:"broken"`
	Switched    int            `json:"switched"`
	PerBackend  map[string]int `json:"per_backend"`
	Alive       int            `json:"alive"`
}

type brk struct {
	Backend string `json:"backend"`
	Err     string `json:"err"`
}

func startConncheck(t *testing.T, n int, d time.Duration) *conncheck {
	t.Helper()
	c := &conncheck{cmd: ns("fl-client", filepath.Join(labDir, "bin", "fulcrum-conncheck"), "-target", vip+":80",
		"-n", fmt.Sprint(n), "-interval", "100ms", "-timeout", "10s", "-duration", d.String())}
	c.cmd.Stdout = &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill() })
	time.Sleep(time.Duration(n)*time.Millisecond + time.Second) // the checker spreads its SYNs 1 ms apart
	return c
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
	counts := make(chan int, 2)
	for _, lb := range []string{"fl-lb1", "fl-lb2"} {
		go func() { counts <- captureFromVIP(t, lb, "wire0", 6*time.Second) }()
	}
	time.Sleep(500 * time.Millisecond)
	per, failed := curlMany(t, 200)
	if failed != 0 || len(per) == 0 {
		t.Fatalf("requests failed: %d", failed)
	}
	seen := <-counts + <-counts
	if seen != 0 {
		t.Errorf("%d packets from the VIP (backend replies) reached an LB's wire", seen)
	}
}

// captureEnv asks the test binary, re-run inside a namespace, to capture.
const captureEnv = "FULCRUM_LAB_CAPTURE"

// captureFromVIP counts frames with IPv4 source = VIP on ifname inside the
// namespace, for d: the test binary re-runs itself there with ip netns
// exec, so no thread of this process ever changes namespace.
func captureFromVIP(t *testing.T, netns, ifname string, d time.Duration) int {
	self, err := os.Executable()
	if err != nil {
		t.Error(err)
		return -1
	}
	c := ns(netns, self, "-test.run=^$")
	c.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s", captureEnv, ifname, d))
	out, err := c.Output()
	if err != nil {
		t.Errorf("capture in %s: %v", netns, err)
		return -1
	}
	var n int
	if _, err := fmt.Sscan(string(out), &n); err != nil {
		t.Errorf("capture in %s: %q", netns, out)
		return -1
	}
	return n
}

func captureChild(spec string) int {
	parts := strings.SplitN(spec, ",", 2)
	d, _ := time.ParseDuration(parts[1])
	ifc, err := net.InterfaceByName(parts[0])
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
	buf := make([]byte, 2048)
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || m < 34 {
			continue
		}
		if buf[12] == 0x08 && buf[13] == 0x00 && fmt.Sprintf("%d.%d.%d.%d", buf[26], buf[27], buf[28], buf[29]) == vip {
			n++
		}
	}
	fmt.Println(n)
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
	waitFor(t, "be1 at 0 flows once its connections closed", 15*time.Second, func() bool {
		return backends(t, 1)["be1"].ActiveFlows+backends(t, 2)["be1"].ActiveFlows == 0
	})
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
	lab(t, "signal-backend", "3", "USR2") // refuse
	refusing := true
	t.Cleanup(func() {
		if refusing {
			exec.Command(script, "signal-backend", "3", "USR2").Run()
		}
	})
	_, failed := curlMany(t, 200)
	t.Logf("while be3 refuses: %d of 200 requests failed", failed)
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("be3 ejected on lb%d", lb), 20*time.Second, func() bool {
			if b := backends(t, lb)["be3"]; b.Outlier {
				return true
			}
			curlMany(t, 40) // keep the handshake signal coming
			return false
		})
		b := backends(t, lb)["be3"]
		t.Logf("lb%d: be3 health %q, outlier, reason %q", lb, b.Health, b.Reason)
		if b.Health != "up" || b.TableSlots != 0 {
			t.Errorf("lb%d: be3 %+v: want its active check still up and no table slots", lb, b)
		}
	}
	if per, failed := curlMany(t, 200); failed != 0 || per["be3"] != 0 {
		t.Errorf("after the ejection: %d failed, be3 answered %d", failed, per["be3"])
	}
	lab(t, "signal-backend", "3", "USR2") // accept again
	refusing = false
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("be3 back at full weight on lb%d after its backoff", lb), 30*time.Second, func() bool {
			b := backends(t, lb)["be3"]
			return !b.Outlier && b.TableSlots > 0 && !b.SlowStart
		})
	}
}

// 3. An LB killed (SIGKILL) under 200 long-lived connections: the router
// withdraws it when the BGP session dies, the other instance carries its
// flows to the same backends, no connection breaks.
func TestLBKilledNoConnectionBreaks(t *testing.T) {
	cc := startConncheck(t, 200, 20*time.Second)
	start := time.Now()
	lab(t, "stop-lb", "1", "KILL")
	t.Cleanup(func() {
		if routeHops() < 2 {
			exec.Command(script, "start-lb", "1").Run()
		}
	})
	waitHops(t, 1)
	t.Logf("router withdrew lb1 %v after the kill", time.Since(start).Round(100*time.Millisecond))
	r := cc.wait(t)
	t.Logf("connections %d, broken %d, switched backend %d, alive %d, per backend %v", r.Connections, len(r.Broken), r.Switched, r.Alive, r.PerBackend)
	if r.Connections != 200 || len(r.Broken) != 0 || r.Switched != 0 || r.Alive != 200 {
		t.Errorf("after killing lb1: %d connections, %d broken (%v), %d switched, %d alive", r.Connections, len(r.Broken), r.Broken, r.Switched, r.Alive)
	}
	lab(t, "start-lb", "1")
	waitHops(t, 2)
}

// 4. A rolling restart of every LB with SIGTERM under wrk load: no
// request fails (each withdraws its VIPs, drains, stops, comes back).
func TestRollingRestartUnderLoad(t *testing.T) {
	wrk := ns("fl-client", "wrk", "-t", "2", "-c", "32", "-d", "40s", "--timeout", "5s", "http://"+vip+"/")
	var out bytes.Buffer
	wrk.Stdout, wrk.Stderr = &out, &out
	if err := wrk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wrk.Process.Kill() })
	time.Sleep(2 * time.Second)
	for _, lb := range []string{"1", "2"} {
		lab(t, "stop-lb", lb, "TERM")
		lab(t, "start-lb", lb)
		waitHops(t, 2)
		t.Logf("lb%s restarted", lb)
	}
	if err := wrk.Wait(); err != nil {
		t.Fatalf("wrk: %v\n%s", err, out.String())
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
	cc := startConncheck(t, 200, 8*time.Second)
	time.Sleep(time.Second)
	lab(t, "stop-backend", "2", "KILL")
	t.Cleanup(func() { exec.Command(script, "start-backend", "2").Run() })
	for lb := 1; lb <= 2; lb++ {
		waitFor(t, fmt.Sprintf("be2 down on lb%d", lb), 10*time.Second, func() bool { return backends(t, lb)["be2"].Health == "down" })
	}
	r := cc.wait(t)
	other := 0
	for _, b := range r.Broken {
		if b.Backend != "be2" {
			other++
		}
	}
	t.Logf("connections %d; on be2 %d; broken %d, of which on other backends %d", r.Connections, r.PerBackend["be2"], len(r.Broken), other)
	if other != 0 || len(r.Broken) != r.PerBackend["be2"] || r.PerBackend["be2"] == 0 {
		t.Errorf("broken %d (other backends %d), be2 had %d", len(r.Broken), other, r.PerBackend["be2"])
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
