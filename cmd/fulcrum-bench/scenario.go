package main

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// Scenario is one traffic shape of issue 6, run through testpmd and Fulcrum
// alike: what fulcrum-gen writes, and how Fulcrum is configured for it.
type Scenario struct {
	Name     string // short key for -only and the tables
	Title    string // what the traffic is, for the table heading
	Mode     string // fulcrum-gen -mode
	Size     int    // frame size with FCS (fulcrum-gen -size)
	Flows    int    // distinct client flows (over all queues)
	Frames   int    // frames per pcap (per queue); the replay loops over them
	InOrder  bool   // flows in order 0..N-1: every flow exactly once per pass
	IPv6     bool   // IPv6 VIP and backends instead of IPv4
	VIPs     int    // number of VIPs; flows go round-robin over them
	Backends int    // backends per VIP
	MTU      int    // Fulcrum's wire MTU (0: config default, 1500)
	Workers  int    // forwarding lcores and rx queues (1 or 2)
	Quick    bool   // part of QUICK=1
	// CTCapacity is the conntrack capacity per worker, as an operator
	// would size it (0: twice the scenario's flows per worker, the rule
	// docs/benchmarks.md gives for legitimate traffic).
	CTCapacity int
	// CRef: the C pipeline (bench/cref/cref.c, run with fulcrum-bench
	// -cref) runs this scenario too. Set only where it does Fulcrum's
	// work: 64 B IPv4 TCP frames to the one VIP 203.0.113.7:80 with 10
	// backends, on one worker (it has no IPv6, no MTU, one VIP compare, a
	// fixed backend count). The SYN flood is left out because cref's
	// conntrack evicts differently from Fulcrum's, and eviction is what
	// that scenario measures.
	CRef bool
}

// Scenarios are issue 6's list. The 10k-flow established case is the base
// the single-variable cases (size, IPv6, VIPs, backends, queues) change one
// thing of. 1M-flow pcaps hold every flow exactly once (in order) so that
// the replay really cycles through 1M flows; 10k-flow pcaps draw 100k
// frames at random, so the source data (about 230 MiB of mbufs, as with
// 1M) is far bigger than the cache either way.
var Scenarios = []Scenario{
	{Name: "syn-1m", Title: "64 B TCP SYNs, 1M flows (new flows until the table is warm, then hits)", Mode: "syn", Size: 64, Flows: 1_000_000, Frames: 1_000_000, InOrder: true, VIPs: 1, Backends: 10, Quick: true, CRef: true},
	{Name: "est-10k", Title: "64 B established TCP, 10k flows", Mode: "established", Size: 64, Flows: 10_000, Frames: 100_000, VIPs: 1, Backends: 10, Quick: true, CRef: true},
	{Name: "est-1m", Title: "64 B established TCP, 1M flows", Mode: "established", Size: 64, Flows: 1_000_000, Frames: 1_000_000, InOrder: true, VIPs: 1, Backends: 10, Quick: true, CRef: true},
	{Name: "est-10k-1518", Title: "1518 B frames (1500 B IP packets), established, 10k flows; Fulcrum MTU 9000 so the tunnel fits", Mode: "established", Size: 1518, Flows: 10_000, Frames: 50_000, VIPs: 1, Backends: 10, MTU: 9000},
	{Name: "ipv6-10k", Title: "IPv6 established TCP (78 B frames), 10k flows, IPv6 backends", Mode: "established", Size: 78, Flows: 10_000, Frames: 100_000, IPv6: true, VIPs: 1, Backends: 10},
	{Name: "vips-100", Title: "64 B established TCP, 10k flows over 100 VIPs", Mode: "established", Size: 64, Flows: 10_000, Frames: 100_000, VIPs: 100, Backends: 10},
	{Name: "backends-1000", Title: "64 B established TCP, 10k flows, 1 VIP with 1000 backends", Mode: "established", Size: 64, Flows: 10_000, Frames: 100_000, VIPs: 1, Backends: 1000},
	// The SYN flood: the syn-1m pcap (1M distinct random source tuples,
	// each once per pass, so every packet is a tuple the table has not
	// seen for a million packets) against a conntrack sized for the
	// legitimate load, not for the attack: 65536 entries, full within the
	// first pass and kept full, so every SYN is a miss that must insert
	// (evicting, or failing to).
	{Name: "syn-flood", Title: "SYN flood: 64 B TCP SYNs, every packet a new 5-tuple (1M distinct in a cycle) against a full conntrack of 65536", Mode: "syn", Size: 64, Flows: 1_000_000, Frames: 1_000_000, InOrder: true, VIPs: 1, Backends: 10, Quick: true, CTCapacity: 65536},
	{Name: "est-10k-2q", Title: "two lcores: two rx queues (one pcap each, disjoint flows), 10k flows", Mode: "established", Size: 64, Flows: 10_000, Frames: 100_000, VIPs: 1, Backends: 10, Workers: 2},
}

// Fixed parts of every generated configuration. The addresses are
// documentation prefixes (RFC 5737, RFC 3849); the key is arbitrary but
// fixed so every run hashes flows the same way.
const (
	lbIPv4     = "192.0.2.10"
	lbIPv6     = "2001:db8:100::10"
	nextHopMAC = "02:00:00:00:00:fe"
	hashKey    = "000102030405060708090a0b0c0d0e0f"
	vipPort    = 80
)

// queueSources are the client prefixes of each rx queue's pcap: disjoint
// flows per queue, as a NIC's RSS would deliver them. The second is the
// benchmarking range of RFC 2544.
var queueSources = []string{"198.51.100.0/24", "198.18.0.0/24"}

// Memory sizing. An mbuf of the default data room (2176 bytes) takes about
// 2.4 KB in its pool with the mbuf header and the mempool object header.
// net_pcap's infinite_rx loads the whole pcap into mbufs of the rx queue's
// pool, so the pool holds Frames plus a working margin. With --no-huge,
// DPDK 22.11 failed to populate a 1M-mbuf pool (2.5 GB) with -m 4096 and
// succeeded with 5000 on the development VM: the EAL memory is sized at
// twice the pools, plus room for rings and the rest.
const (
	mbufFootprint = 2432    // bytes per mbuf in its pool, rounded up
	poolMargin    = 16384   // mbufs beyond the pcap's frames: bursts, per-lcore caches
	minPool       = 16383   // Fulcrum's default pool size
	maxPool       = 1048575 // Fulcrum's config limit (2^20 - 1)
	memSlackMB    = 512
)

// HugeDir, when set (fulcrum-bench -hugepages DIR), runs testpmd and
// Fulcrum alike on the hugepages of the hugetlbfs mounted at DIR, with the
// same -m; Fulcrum's conntrack tables then live there too. Unset: both run
// --no-huge.
var HugeDir string

// Burst, when set (fulcrum-bench -burst N), is the rx/tx burst of
// testpmd (--burst) and Fulcrum ([dataplane] burst) alike. Unset: both
// use their default, 32.
var Burst int

// workers is the number of forwarding lcores (1 unless set).
func (s *Scenario) workers() int {
	if s.Workers < 1 {
		return 1
	}
	return s.Workers
}

// PoolSize is the mbufs per rx queue's pool: a power of two minus one (the
// size rte_mempool is most efficient at) that holds the pcap and a margin.
func (s *Scenario) PoolSize() (int, error) {
	need := s.Frames + poolMargin
	n := minPool
	for n < need {
		n = 2*n + 1
	}
	if n > maxPool {
		if s.Frames+poolMargin/2 > maxPool {
			return 0, fmt.Errorf("scenario %s: %d frames per queue do not fit a pool of at most %d mbufs", s.Name, s.Frames, maxPool)
		}
		n = maxPool
	}
	return n, nil
}

// MemoryMB is the EAL memory (-m) for all the pools of the scenario.
func (s *Scenario) MemoryMB() (int, error) {
	n, err := s.PoolSize()
	if err != nil {
		return 0, err
	}
	return 2*s.workers()*n*mbufFootprint/(1<<20) + memSlackMB, nil
}

// VIPAddrs are the scenario's VIP addresses: 203.0.113.7 (or
// 2001:db8:ffff::7) alone, or .1, .2, ... for several.
func (s *Scenario) VIPAddrs() []netip.Addr {
	out := make([]netip.Addr, 0, s.VIPs)
	for i := 0; i < max(s.VIPs, 1); i++ {
		n := 7
		if s.VIPs > 1 {
			n = i + 1
		}
		if s.IPv6 {
			out = append(out, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 14: byte(n >> 8), 15: byte(n)}))
		} else {
			out = append(out, netip.AddrFrom4([4]byte{203, 0, 113, byte(n)}))
		}
	}
	return out
}

// BackendAddrs are the backends of every VIP: 10.1.0.1 ... or
// 2001:db8:1::1 ...
func (s *Scenario) BackendAddrs() []netip.Addr {
	out := make([]netip.Addr, s.Backends)
	for i := range out {
		if s.IPv6 {
			out[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 14: byte((i + 1) >> 8), 15: byte(i + 1)})
		} else {
			out[i] = netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)})
		}
	}
	return out
}

// GenArgs are fulcrum-gen's flags for queue q's pcap (without -o). Each
// queue gets its own client prefix and an equal share of the flows.
func (s *Scenario) GenArgs(q int) []string {
	vips := make([]string, 0, s.VIPs)
	for _, a := range s.VIPAddrs() {
		vips = append(vips, netip.AddrPortFrom(a, vipPort).String())
	}
	args := []string{
		"-n", strconv.Itoa(s.Frames),
		"-flows", strconv.Itoa(s.Flows / s.workers()),
		"-mode", s.Mode,
		"-size", strconv.Itoa(s.Size),
		"-vips", strings.Join(vips, ","),
		"-seed", strconv.Itoa(1 + q),
	}
	if s.InOrder {
		args = append(args, "-inorder")
	}
	if s.workers() > 1 {
		args = append(args, "-src", queueSources[q])
	}
	return args
}

// Vdevs are the two virtual ports both programs get: the pcap replay (one
// rx queue per pcap) and a null sink that neither receives nor costs
// anything on rx (no-rx=1, so testpmd's reverse stream stays empty).
func Vdevs(pcaps []string) []string {
	var b strings.Builder
	b.WriteString("net_pcap0")
	for _, p := range pcaps {
		b.WriteString(",rx_pcap=" + p)
	}
	b.WriteString(",infinite_rx=1")
	return []string{b.String(), "net_null0,no-rx=1"}
}

// TestpmdArgs is testpmd's command line for the scenario: io forwarding on
// the same vdevs, one forwarding core per queue, per-second port stats,
// the same pool size per queue and the same EAL memory as Fulcrum.
// --no-mlockall: testpmd otherwise faults in all of -m at start (12 s for
// 6 GB here), which Fulcrum does not do either.
func (s *Scenario) TestpmdArgs(prefix string, pcaps []string, lcores string) ([]string, error) {
	mem, err := s.MemoryMB()
	if err != nil {
		return nil, err
	}
	pool, _ := s.PoolSize()
	w := s.workers()
	args := []string{lcoresFlag(lcores), lcores, "--main-lcore", "0"}
	if HugeDir != "" {
		args = append(args, "--huge-dir", HugeDir)
	} else {
		args = append(args, "--no-huge")
	}
	args = append(args, "-m", strconv.Itoa(mem), "--no-pci", "--file-prefix", prefix)
	for _, v := range Vdevs(pcaps) {
		args = append(args, "--vdev", v)
	}
	args = append(args, "--", "--no-mlockall", "--forward-mode=io", "--nb-cores="+strconv.Itoa(w),
		"--stats-period=1", "--total-num-mbufs="+strconv.Itoa(pool*w))
	if w > 1 {
		args = append(args, "--rxq="+strconv.Itoa(w), "--txq="+strconv.Itoa(w))
	}
	if Burst > 0 {
		args = append(args, "--burst="+strconv.Itoa(Burst))
	}
	return args, nil
}

// lcoresFlag picks -l for a plain list and --lcores for an lcore@cpu map.
func lcoresFlag(lcores string) string {
	if strings.Contains(lcores, "@") {
		return "--lcores"
	}
	return "-l"
}

// FulcrumConfig is the TOML configuration of `fulcrum run` for the scenario:
// the same vdevs (pcap in, null out as tx_port), busy polling (no idle
// backoff), no kernel exception path, a static next hop, and the
// scenario's conntrack (ctCapacity).
func (s *Scenario) FulcrumConfig(prefix string, pcaps []string, lcoreMap string) (string, error) {
	vdevs := Vdevs(pcaps)
	return s.fulcrumConfig(prefix, vdevs, "net_null0", lcoreMap)
}

// ctCapacity is the conntrack capacity per worker: CTCapacity, or twice
// the flows per worker, as an operator would size it: at 50% occupancy no
// flow finds both its buckets full (conntrack's TestOccupancy), so the
// replay's fixed order evicts none of its own flows.
func (s *Scenario) ctCapacity() int {
	if s.CTCapacity > 0 {
		return s.CTCapacity
	}
	return max(64, 2*s.Flows/s.workers())
}

// fulcrumConfig is FulcrumConfig over the given vdevs, the first being the
// port; txPort "" sends on the port itself.
func (s *Scenario) fulcrumConfig(prefix string, vdevs []string, txPort, lcoreMap string) (string, error) {
	mem, err := s.MemoryMB()
	if err != nil {
		return "", err
	}
	pool, _ := s.PoolSize()
	w := s.workers()
	workers := make([]string, w)
	for i := range workers {
		workers[i] = strconv.Itoa(i + 1)
	}
	quoted := make([]string, len(vdevs))
	for i, v := range vdevs {
		quoted[i] = strconv.Quote(v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# fulcrum-bench scenario %s: %s\n", s.Name, s.Title)
	huge := "hugepages = false\n"
	if HugeDir != "" {
		huge = fmt.Sprintf("hugepages = true\nextra_args = [\"--huge-dir\", %q]\n", HugeDir)
	}
	fmt.Fprintf(&b, "[eal]\nmain_lcore = 0\nworker_lcores = [%s]\nmemory_mb = %d\n%sfile_prefix = %q\nvdevs = [%s]\n\n",
		strings.Join(workers, ", "), mem, huge, prefix, strings.Join(quoted, ", "))
	if lcoreMap != "" {
		// Still in [eal]: more lcores than CPUs (main lcore shares a CPU).
		fmt.Fprintf(&b, "lcore_map = %q\n\n", lcoreMap)
	}
	fmt.Fprintf(&b, "[dataplane]\nport = \"net_pcap0\"\n")
	if txPort != "" {
		fmt.Fprintf(&b, "tx_port = %q\n", txPort)
	}
	fmt.Fprintf(&b, "mempool_size = %d\nexception = false\nidle_backoff = false\n", pool)
	if Burst > 0 {
		fmt.Fprintf(&b, "burst = %d\n", Burst)
	}
	fmt.Fprintf(&b, "lb_ipv4 = %q\nlb_ipv6 = %q\nnext_hop_mac = %q\nencap = \"gre\"\nhash_key = %q\n", lbIPv4, lbIPv6, nextHopMAC, hashKey)
	if s.MTU != 0 {
		fmt.Fprintf(&b, "mtu = %d\n", s.MTU)
	}
	fmt.Fprintf(&b, "\n[conntrack]\ncapacity = %d\n", s.ctCapacity())
	b.WriteString(s.VIPsTOML())
	return b.String(), nil
}

// VIPsTOML is the [[vip]] part of the scenario's configuration: the same
// VIPs and backends on every machine, for the real-hardware runs too
// (`fulcrum-bench -vips NAME`).
func (s *Scenario) VIPsTOML() string {
	var b strings.Builder
	backends := s.BackendAddrs()
	for i, v := range s.VIPAddrs() {
		fmt.Fprintf(&b, "\n[[vip]]\nname = \"vip%d\"\naddress = %q\nport = %d\nprotocol = \"tcp\"\n", i, v, vipPort)
		for _, be := range backends {
			fmt.Fprintf(&b, "  [[vip.backend]]\n  address = %q\n", be)
		}
	}
	return b.String()
}

// PcapPaths are the cached pcap files of the scenario, one per queue,
// named by a digest of fulcrum-gen's binary and flags only: scenarios with
// the same traffic share a file, and a change of either writes a new one.
func (s *Scenario) PcapPaths(cache, genDigest string) []string {
	out := make([]string, s.workers())
	for q := range out {
		out[q] = filepath.Join(cache, fmt.Sprintf("gen-%s.pcap", digest(genDigest, strings.Join(s.GenArgs(q), " "))))
	}
	return out
}
