//go:build dpdk

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/internal/syncbuf"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/gen"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// buildFulcrum compiles the daemon once per test binary (into a
// directory TestMain removes) and returns its path; tests only run it.
func buildFulcrum(t *testing.T) string {
	t.Helper()
	builtDaemon.once.Do(func() {
		dir, err := os.MkdirTemp("", "fulcrum-test-bin-")
		if err != nil {
			builtDaemon.err = err
			return
		}
		sharedDirs.add(dir)
		bin := filepath.Join(dir, "fulcrum")
		if out, err := exec.Command("go", "build", "-tags", "dpdk", "-o", bin, ".").CombinedOutput(); err != nil {
			builtDaemon.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		builtDaemon.bin = bin
	})
	if builtDaemon.err != nil {
		t.Fatal(builtDaemon.err)
	}
	return builtDaemon.bin
}

// builtDaemon is the binary buildFulcrum built.
var builtDaemon struct {
	once sync.Once
	bin  string
	err  error
}

// exampleConfig is examples/pcap.toml with its pcap paths and file prefix
// moved into dir.
func exampleConfig(t *testing.T, dir, in, out string) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/pcap.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "rx_pcap=examples/in.pcap,tx_pcap=/tmp/fulcrum-out.pcap", "rx_pcap="+in+",tx_pcap="+out, 1)
	s = strings.Replace(s, `file_prefix = "fulcrum-example"`, fmt.Sprintf(`file_prefix = "fulcrum-pcaptest-%d"`, os.Getpid()), 1)
	// The admin API on a unix socket of the test's own.
	s += fmt.Sprintf("\n[admin]\nlisten = \"unix:%s\"\n", filepath.Join(dir, "admin.sock"))
	p := filepath.Join(dir, "fulcrum.toml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readPcap(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		frames = append(frames, append([]byte(nil), data...))
	}
	return frames
}

// TestRunPcap replays a generated capture through `fulcrum run` with the
// example configuration (net_pcap in, capture file out) and checks every
// packet that comes out, decoded with gopacket: a tunnel to the backend the
// VIP's Maglev table names for the flow, from the LB address, carrying the
// client's IP packet unchanged.
func TestRunPcap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
	bin := buildFulcrum(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	g, err := gen.New(gen.Config{
		VIPs:      []netip.AddrPort{netip.MustParseAddrPort("203.0.113.7:80"), netip.MustParseAddrPort("[2001:db8:ffff::7]:80")},
		Mode:      gen.ModeMix,
		IPv6:      0.5,
		Flows:     3000,
		Malformed: 0.02, NonVIP: 0.02, ARP: 0.01,
		Seed: 42,
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	if err := g.WritePcap(f, n); err != nil {
		t.Fatal(err)
	}
	f.Close()
	counts := g.Counts()
	cfgPath := exampleConfig(t, dir, in, out)

	cmd := exec.Command(bin, "run", "-c", cfgPath, "--exit-when-idle", "1s", "--stats-interval", "0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fulcrum run: %v\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("fulcrum run did not exit\n%s", stderr.String())
	}

	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := flow.ParseKey(cfg.Dataplane.HashKey)
	hasher := flow.NewHasher(key)
	tables := map[netip.Addr]*maglev.Table{}
	addrOf := map[netip.Addr]map[string]netip.Addr{}
	for _, v := range cfg.VIPs {
		var mb []maglev.Backend
		addrOf[v.Address.Addr] = map[string]netip.Addr{}
		for _, b := range v.Backends {
			mb = append(mb, maglev.Backend{Key: b.Name, Weight: uint32(*b.Weight)})
			addrOf[v.Address.Addr][b.Name] = b.Address.Addr
		}
		if tables[v.Address.Addr], err = maglev.Build(mb, uint64(v.TableSize)); err != nil {
			t.Fatal(err)
		}
	}

	frames := readPcap(t, out)
	valid := counts.Kinds[gen.KindIPv4] + counts.Kinds[gen.KindIPv6]
	if uint64(len(frames)) != valid {
		t.Fatalf("%d frames out, %d valid VIP frames in (counts %v)\n%s", len(frames), valid, counts, stderr.String())
	}
	seen := map[netip.Addr]int{}
	for i, fr := range frames {
		pk := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.Default)
		if el := pk.ErrorLayer(); el != nil {
			t.Fatalf("frame %d: %v", i, el.Error())
		}
		eth := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if eth.DstMAC.String() != "02:00:00:00:00:fe" {
			t.Errorf("frame %d: destination MAC %v, want the configured next hop", i, eth.DstMAC)
		}
		var outerDst netip.Addr
		var innerBytes []byte
		switch ip := pk.Layers()[1].(type) {
		case *layers.IPv4:
			outerDst, _ = netip.AddrFromSlice(ip.DstIP.To4())
			if ip.SrcIP.String() != "192.0.2.10" {
				t.Errorf("frame %d: outer source %v", i, ip.SrcIP)
			}
			innerBytes = ip.Payload
		case *layers.IPv6:
			outerDst, _ = netip.AddrFromSlice(ip.DstIP)
			if ip.SrcIP.String() != "2001:db8:100::10" {
				t.Errorf("frame %d: outer source %v", i, ip.SrcIP)
			}
			innerBytes = ip.Payload
		}
		// GRE (4 bytes) for the IPv4 VIP, GUE (UDP 8 + GUE 4) for the IPv6 one.
		if gre, ok := pk.Layer(layers.LayerTypeGRE).(*layers.GRE); ok {
			innerBytes = gre.Payload
		} else if udp, ok := pk.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && udp.DstPort == 6080 {
			innerBytes = udp.Payload[4:]
		}
		inner := gopacket.NewPacket(innerBytes, firstLayer(innerBytes), gopacket.Default)
		var src, dst netip.Addr
		switch ip := inner.NetworkLayer().(type) {
		case *layers.IPv4:
			src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
			dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		case *layers.IPv6:
			src, _ = netip.AddrFromSlice(ip.SrcIP)
			dst, _ = netip.AddrFromSlice(ip.DstIP)
		default:
			t.Fatalf("frame %d: no inner IP packet", i)
		}
		tcp, ok := inner.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok {
			t.Fatalf("frame %d: inner packet is not TCP", i)
		}
		tp, _ := flow.TupleFrom(src, dst, uint16(tcp.SrcPort), uint16(tcp.DstPort), 6)
		tb := tables[dst]
		if tb == nil {
			t.Fatalf("frame %d: inner destination %v is no VIP", i, dst)
		}
		want := addrOf[dst][tb.Backend(tb.Lookup(hasher.Hash(&tp))).Key]
		if outerDst != want {
			t.Errorf("frame %d: flow %v went to %v, its Maglev backend is %v", i, tp, outerDst, want)
		}
		seen[outerDst]++
	}
	if len(seen) != 5 {
		t.Errorf("backends reached: %v, want all 5", seen)
	}
}

func firstLayer(b []byte) gopacket.LayerType {
	if len(b) > 0 && b[0]>>4 == 6 {
		return layers.LayerTypeIPv6
	}
	return layers.LayerTypeIPv4
}

// TestRunEALFailure: a bad device in the config fails with DPDK's own
// message and exit status 1, not a panic.
func TestRunEALFailure(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
	bin := buildFulcrum(t)
	dir := t.TempDir()
	p := exampleConfig(t, dir, filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap"))
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), `vdevs = ["net_pcap0,`, `vdevs = ["net_nosuchdriver0,`, 1)), 0o644)
	out, err := exec.Command(bin, "run", "-c", p).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "EAL initialisation failed") || strings.Contains(string(out), "panic") {
		t.Errorf("output does not carry the EAL error cleanly:\n%s", out)
	}
}

// TestRunStopsOnSIGTERM: the daemon stops its loops on SIGTERM, exits 0 and
// leaves no DPDK runtime directory behind.
func TestRunStopsOnSIGTERM(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
	bin := buildFulcrum(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	g, err := gen.New(gen.Config{VIPs: []netip.AddrPort{netip.MustParseAddrPort("203.0.113.7:80")}, Flows: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(in)
	g.WritePcap(f, 10)
	f.Close()
	p := exampleConfig(t, dir, in, filepath.Join(dir, "out.pcap"))
	cmd := exec.Command(bin, "run", "-c", p, "--stats-interval", "0")
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until it forwards (the log says so), then signal.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "msg=forwarding") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("daemon did not start:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// fulcrumctl against the running daemon: status, and a drain that the
	// daemon's tables then show.
	ctl := filepath.Join(t.TempDir(), "fulcrumctl")
	if out, err := exec.Command("go", "build", "-o", ctl, "../fulcrumctl").CombinedOutput(); err != nil {
		t.Fatalf("build fulcrumctl: %v\n%s", err, out)
	}
	sock := "unix:" + filepath.Join(dir, "admin.sock")
	if out, err := exec.Command(ctl, "--addr", sock, "drain", "web", "be2").CombinedOutput(); err != nil {
		t.Fatalf("fulcrumctl drain: %v\n%s", err, out)
	}
	out, err := exec.Command(ctl, "--addr", sock, "--json", "backends", "web").Output()
	if err != nil {
		t.Fatalf("fulcrumctl backends: %v", err)
	}
	var vip struct {
		Backends []struct {
			Name       string `json:"name"`
			Drained    bool   `json:"drained"`
			TableSlots int    `json:"table_slots"`
		} `json:"backends"`
	}
	if err := json.Unmarshal(out, &vip); err != nil {
		t.Fatalf("fulcrumctl --json backends: %v\n%s", err, out)
	}
	drained := 0
	for _, b := range vip.Backends {
		if b.Name == "be2" && b.Drained && b.TableSlots == 0 {
			drained++
		}
	}
	if drained != 1 || len(vip.Backends) != 3 {
		t.Errorf("after drain, backends: %s", out)
	}
	if out, err := exec.Command(ctl, "--addr", sock, "status").CombinedOutput(); err != nil {
		t.Errorf("fulcrumctl status: %v\n%s", err, out)
	}
	if out, err := exec.Command(ctl, "--addr", sock, "vips").CombinedOutput(); err != nil || !strings.Contains(string(out), "web6") {
		t.Errorf("fulcrumctl vips: %v\n%s", err, out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit after SIGTERM\n%s", stderr.String())
	}
	if _, err := os.Stat(fmt.Sprintf("/var/run/dpdk/fulcrum-pcaptest-%d", os.Getpid())); !os.IsNotExist(err) {
		t.Errorf("runtime directory left behind (stat: %v)", err)
	}
}
