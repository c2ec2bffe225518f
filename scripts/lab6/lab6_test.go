//go:build dpdk && lab

// Package lab6 is the smallest IPv6-only version of scripts/lab: a client,
// a bird2 router, one Fulcrum (net_af_packet on a veth, net_tap for the
// kernel's side) and two backends (fulcrum-decap + fulcrum-labsrv), each in
// a network namespace this test creates, built with lab.sh's recipe: the
// senders' veths and the router's bridge have their transmit checksum
// offload off (on a virtual NIC the exception path hands the LB's kernel
// frames whose checksums nobody computed), and the wire veth of the LB has
// IPv6 disabled (DPDK owns it; the kernel's IPv6 lives on the tap). It
// runs after scripts/lab (make lab-test, -p 1), in namespaces of its own
// names.
package lab6

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

const (
	vip6   = "2001:db8:7::7"
	lb6    = "2001:db8:2::11"
	rtr6   = "2001:db8:2::1"
	client = "2001:db8:1::2"
)

var bin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if os.Geteuid() != 0 {
			fmt.Println("lab6: skipped, needs root")
			return 0
		}
		for _, tool := range []string{"bird", "birdc", "curl", "ethtool", "ip"} {
			if _, err := exec.LookPath(tool); err != nil {
				fmt.Println("lab6: skipped, no", tool)
				return 0
			}
		}
		dir, err := os.MkdirTemp("", "fulcrum-lab6-bin")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer os.RemoveAll(dir)
		if b := os.Getenv("LAB6_BIN"); b != "" { // prebuilt binaries
			bin = b
		} else {
			bin = dir
			c := exec.Command("go", "build", "-tags", "dpdk", "-o", dir+"/", "../../cmd/fulcrum", "../../cmd/fulcrum-decap", "../../cmd/fulcrum-labsrv")
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			if err := c.Run(); err != nil {
				fmt.Println("lab6: build:", err)
				return 1
			}
		}
		return m.Run()
	}())
}

type lab6 struct {
	t     *testing.T
	id    string // namespace name prefix
	dir   string
	procs []*exec.Cmd
}

func (l *lab6) ns(n string) string { return l.id + "-" + n }

func (l *lab6) run(args ...string) string {
	l.t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (l *lab6) in(n string, args ...string) string {
	l.t.Helper()
	return l.run(append([]string{"ip", "netns", "exec", l.ns(n)}, args...)...)
}

func (l *lab6) start(n, log string, args ...string) {
	l.t.Helper()
	f, err := os.Create(filepath.Join(l.dir, log))
	if err != nil {
		l.t.Fatal(err)
	}
	c := exec.Command("ip", append([]string{"netns", "exec", l.ns(n)}, args...)...)
	c.Stdout, c.Stderr = f, f
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.procs = append(l.procs, c)
}

// up builds the lab. The router's bridge carries 2001:db8:2::/64 (LB ::11,
// backends ::21 and ::22); the client is 2001:db8:1::2 behind the router.
func up(t *testing.T) *lab6 {
	l := &lab6{t: t, id: fmt.Sprintf("lab6-%d", os.Getpid()%100000), dir: t.TempDir()}
	prefix := "fulcrum-" + l.id
	names := []string{"cl", "rt", "lb", "be1", "be2"}
	t.Cleanup(func() {
		for _, p := range l.procs {
			p.Process.Kill()
			p.Wait()
		}
		for _, n := range names {
			exec.Command("ip", "netns", "del", l.ns(n)).Run()
		}
		os.RemoveAll("/var/run/dpdk/" + prefix)
		if t.Failed() {
			for _, f := range []string{"lb.log", "bird.log"} {
				b, _ := os.ReadFile(filepath.Join(l.dir, f))
				if len(b) > 3000 {
					b = b[len(b)-3000:]
				}
				t.Logf("%s:\n%s", f, b)
			}
		}
	})
	for _, n := range names {
		l.run("ip", "netns", "add", l.ns(n))
		l.in(n, "ip", "link", "set", "lo", "up")
		l.in(n, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	l.in("rt", "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	l.in("rt", "ip", "link", "add", "br0", "type", "bridge")
	l.in("rt", "ip", "addr", "add", rtr6+"/64", "dev", "br0", "nodad")
	l.in("rt", "ip", "link", "set", "br0", "up")
	l.in("rt", "ethtool", "-K", "br0", "tx", "off") // as lab.sh does
	l.run("ip", "link", "add", "r-cl", "netns", l.ns("rt"), "type", "veth", "peer", "name", "eth0", "netns", l.ns("cl"))
	l.in("rt", "ip", "addr", "add", "2001:db8:1::1/64", "dev", "r-cl", "nodad")
	l.in("rt", "ip", "link", "set", "r-cl", "up")
	l.in("cl", "ip", "addr", "add", client+"/64", "dev", "eth0", "nodad")
	l.in("cl", "ip", "link", "set", "eth0", "up")
	l.in("cl", "ip", "-6", "route", "add", "default", "via", "2001:db8:1::1")
	l.in("cl", "ethtool", "-K", "eth0", "tx", "off") // as lab.sh does
	attach := func(n, ifc string) {
		l.run("ip", "link", "add", "r-"+n, "netns", l.ns("rt"), "type", "veth", "peer", "name", ifc, "netns", l.ns(n))
		l.in("rt", "ip", "link", "set", "r-"+n, "master", "br0")
		l.in("rt", "ip", "link", "set", "r-"+n, "up")
		l.in(n, "ip", "link", "set", ifc, "up")
	}
	for b := 1; b <= 2; b++ {
		n, addr := "be"+strconv.Itoa(b), fmt.Sprintf("2001:db8:2::2%d", b)
		attach(n, "eth0")
		l.in(n, "ip", "addr", "add", addr+"/64", "dev", "eth0", "nodad")
		l.in(n, "ip", "-6", "route", "add", "default", "via", rtr6)
		l.in(n, "ip", "addr", "add", vip6+"/128", "dev", "lo")
		l.in(n, "ethtool", "-K", "eth0", "tx", "off") // as lab.sh does
		decap := []string{bin + "/fulcrum-decap", "-tun", "fdecap0", "-gre", "-addr", addr, "-lbs", lb6}
		l.start(n, n+"-decap.log", decap...)
		l.start(n, n+".log", bin+"/fulcrum-labsrv", "-name", n, "-listen", "["+vip6+"]:80", "-health", "["+addr+"]:8080")
	}
	birdConf := fmt.Sprintf(`router id 10.0.0.1;
log %q all;
protocol device { scan time 1; }
protocol kernel { ipv6 { export where source = RTS_BGP; }; merge paths on; }
protocol bgp lb1 {
	local %s as 65000;
	neighbor %s as 65001;
	hold time 3; keepalive time 1; graceful restart off; error wait time 1, 5; connect retry time 1;
	ipv6 { import all; export none; };
}
`, filepath.Join(l.dir, "bird.log"), rtr6, lb6)
	os.WriteFile(filepath.Join(l.dir, "bird.conf"), []byte(birdConf), 0o644)
	l.start("rt", "bird.out", "bird", "-f", "-c", filepath.Join(l.dir, "bird.conf"), "-s", filepath.Join(l.dir, "bird.ctl"))

	attach("lb", "wire0")
	l.in("lb", "sysctl", "-qw", "net.ipv6.conf.wire0.disable_ipv6=1") // as lab.sh does
	conf := fmt.Sprintf(`[eal]
main_lcore = 0
worker_lcores = [1]
memory_mb = 512
file_prefix = %q
vdevs = ["net_af_packet0,iface=wire0,blocksz=4096,framesz=2048,framecnt=512,qpairs=1"]
[dataplane]
port = "net_af_packet0"
mempool_size = 8191
idle_backoff = true
idle_max_sleep = "500us"
exception = true
exception_iface = "lab6tap0"
lb_ipv6 = %q
lb_ipv6_prefix = 64
gateway_ipv6 = %q
mtu = 1500
encap = "gre"
hash_key = "4c6f616442616c616e636572466c6565"
[admin]
listen = "unix:%s"
[control]
slow_start = "0s"
[bgp]
asn = 65001
router_id = "10.0.0.11"
drain_time = "1s"
  [[bgp.neighbor]]
  address = %q
  peer_asn = 65000
  hold_time = "3s"
[[vip]]
name = "web"
address = %q
port = 80
protocol = "tcp"
  [vip.health]
  kind = "http"
  port = 8080
  path = "/healthz"
  interval = "200ms"
  timeout = "150ms"
  rise = 2
  fall = 3
  [[vip.backend]]
  name = "be1"
  address = "2001:db8:2::21"
  [[vip.backend]]
  name = "be2"
  address = "2001:db8:2::22"
`, prefix, lb6, rtr6, filepath.Join(l.dir, "lb.sock"), rtr6, vip6)
	os.WriteFile(filepath.Join(l.dir, "lb.toml"), []byte(conf), 0o644)
	l.start("lb", "lb.log", bin+"/fulcrum", "run", "-c", filepath.Join(l.dir, "lb.toml"), "--stats-interval", "0")
	return l
}

func (l *lab6) vips() ([]api.VIP, error) {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(l.dir, "lb.sock"))
	}}}
	resp, err := c.Get("http://lb" + api.VIPsPath + "?backends=true")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var vs []api.VIP
	return vs, json.NewDecoder(resp.Body).Decode(&vs)
}

// snmp is one counter of a namespace's /proc/net/snmp (e.g. Tcp InCsumErrors).
func (l *lab6) snmp(n, proto, name string) uint64 {
	out := l.in(n, "cat", "/proc/net/snmp")
	var head []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != proto+":" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i := range head {
			if head[i] == name && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	return 0
}

// state is what the test waits for: the router's route to the VIP through
// the LB, both backends up, and the client served.
type state struct {
	route   string
	healthy int
	reasons []string
	curl    bool
}

func (l *lab6) look() state {
	var s state
	out, _ := exec.Command("ip", "netns", "exec", l.ns("rt"), "ip", "-6", "route", "show", vip6).CombinedOutput()
	s.route = strings.TrimSpace(string(out))
	if vs, err := l.vips(); err == nil {
		for _, v := range vs {
			if v.Name != "web" {
				continue
			}
			for _, b := range v.Backends {
				if b.Health == "up" {
					s.healthy++
				}
				s.reasons = append(s.reasons, b.Name+": "+b.Health+" "+b.CheckResult)
			}
		}
	}
	if strings.Contains(s.route, "via "+lb6) {
		s.curl = exec.Command("ip", "netns", "exec", l.ns("cl"), "curl", "-s", "-m", "2", "-o", "/dev/null", "-f", "http://["+vip6+"]/").Run() == nil
	}
	return s
}

func (l *lab6) wait(within time.Duration) state {
	deadline := time.Now().Add(within)
	for {
		s := l.look()
		if (strings.Contains(s.route, "via "+lb6) && s.healthy == 2 && s.curl) || time.Now().After(deadline) {
			return s
		}
		time.Sleep(250 * time.Millisecond) // polling interval, not synchronisation
	}
}

// TestIPv6OnlyLab: the lab's recipe with an IPv6 VIP, IPv6 backends and an
// IPv6 BGP session must serve the client as the IPv4 lab does: the router
// learns the VIP's /128 through the LB's global address, both backends are
// healthy (checked through the LB's kernel: the exception path), and the
// client's request is answered.
func TestIPv6OnlyLab(t *testing.T) {
	l := up(t)
	s := l.wait(40 * time.Second)
	csum := l.snmp("lb", "Tcp", "InCsumErrors")
	if !strings.Contains(s.route, "via "+lb6) || s.healthy != 2 || !s.curl {
		t.Fatalf("after 40s: router's route to %s %q (want via %s), %d/2 backends healthy %v, client served %v; "+
			"the LB's kernel dropped %d TCP segments with bad checksums (Tcp InCsumErrors): the backends' and the router's "+
			"TCP reaches the tap with the checksum their veth never computed", vip6, s.route, lb6, s.healthy, s.reasons, s.curl, csum)
	}
	if csum != 0 {
		t.Errorf("the LB's kernel counted %d TCP checksum errors", csum)
	}
}
