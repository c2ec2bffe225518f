package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/bgp"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/health"
)

// problem is one line of a Parse error, in the documented
// "FILE:LINE: KEY: MESSAGE" form.
type problem struct {
	line int
	key  string
	msg  string
}

var problemRE = regexp.MustCompile(`^f\.toml:(\d+): ([^: ]+): (.*)$`)

// problemsOf splits a Parse error into its problems, one per line.
func problemsOf(t *testing.T, err error) []problem {
	t.Helper()
	var out []problem
	for _, l := range strings.Split(err.Error(), "\n") {
		m := problemRE.FindStringSubmatch(l)
		if m == nil {
			out = append(out, problem{line: -1, msg: l})
			continue
		}
		n, _ := strconv.Atoi(m[1])
		out = append(out, problem{line: n, key: m[2], msg: m[3]})
	}
	return out
}

const bgpSection = `[bgp]
asn = 65001
router_id = "192.0.2.10"
[[bgp.neighbor]]
address = "192.0.2.1"
peer_asn = 65000
`

const secondVIP = `[[vip]]
name = "web"
address = "203.0.113.8"
port = 80
  [[vip.backend]]
  address = "10.0.1.2"
`

// Every value `fulcrum run` would reject (or that means nothing) is
// wantProblemAt parses toml and fails t unless Parse refuses it with an
// error wrapping ErrInvalid that reports key at line, in a message
// containing msg ("" matches any).
func wantProblemAt(t *testing.T, toml, key string, line int, msg string) {
	t.Helper()
	_, err := Parse([]byte(toml), "f.toml")
	if err == nil {
		t.Fatal("accepted")
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error does not wrap ErrInvalid: %v", err)
	}
	for _, p := range problemsOf(t, err) {
		if p.key == key {
			if p.line != line || !strings.Contains(p.msg, msg) {
				t.Errorf("%s reported at line %d: %q; want line %d containing %q", key, p.line, p.msg, line, msg)
			}
			return
		}
	}
	t.Errorf("no problem names %s: %v", key, err)
}

// rejected by Parse, at the line of its key, naming it.
func TestParseRejectsAtKeyAndLine(t *testing.T) {
	named := strings.Replace(base, "port = 80", "port = 80\nname = \"web\"", 1) // name at line 14
	cases := []struct {
		name string
		toml string
		key  string
		line int
	}{
		// Health: one validation, package health's, at Parse time.
		{"health expect", base + "[vip.health]\nkind = \"http\"\nexpect = \"abc\"\n", "vip[0].health.expect", 19},
		{"health interval too long", base + "[vip.health]\nkind = \"http\"\ninterval = \"2h\"\n", "vip[0].health.interval", 19},
		{"health path with space", base + "[vip.health]\nkind = \"http\"\npath = \"/a b\"\n", "vip[0].health.path", 19},
		{"health host with slash", base + "[vip.health]\nkind = \"http\"\nhost = \"a/b\"\n", "vip[0].health.host", 19},
		{"default health expect", base + "[health]\nexpect = \"abc\"\n", "health.expect", 18},
		// Floats are finite and in range.
		{"jitter nan", base + "[health]\njitter = nan\n", "health.jitter", 18},
		{"passive_threshold nan", base + "[health]\npassive_threshold = nan\n", "health.passive_threshold", 18},
		{"panic_threshold nan", base + "[control]\npanic_threshold = nan\n", "control.panic_threshold", 18},
		{"slow_start_min nan", base + "[control]\nslow_start_min = nan\n", "control.slow_start_min", 18},
		{"slow_start_min inf", base + "[control]\nslow_start_min = inf\n", "control.slow_start_min", 18},
		// Durations are positive and bounded.
		{"flap_backoff negative", base + "[health]\nflap_backoff = \"-10s\"\n", "health.flap_backoff", 18},
		{"flap_backoff_max too long", base + "[health]\nflap_backoff_max = \"1000h\"\n", "health.flap_backoff_max", 18},
		{"drain_timeout too long", base + "[control]\ndrain_timeout = \"1000h\"\n", "control.drain_timeout", 18},
		{"conntrack negative", base + "[conntrack]\nudp = \"-1s\"\n", "conntrack.udp", 18},
		{"bgp drain_time too long", base + bgpSection + "drain_time = \"1h\"\n", "bgp.neighbor[0].drain_time", 0}, // placeholder, replaced below
		// Names are addressable as /vip/NAME/backend/NAME.
		{"vip name with slash", strings.Replace(base, "port = 80", "port = 80\nname = \"a/b\"", 1), "vip[0].name", 14},
		{"vip name with control char", strings.Replace(base, "port = 80", "port = 80\nname = \"a\\u0001\"", 1), "vip[0].name", 14},
		{"vip name too long", strings.Replace(base, "port = 80", "port = 80\nname = \""+strings.Repeat("a", 65)+"\"", 1), "vip[0].name", 14},
		{"backend name with space", base + "  name = \"a b\"\n", "vip[0].backend[0].name", 17},
		{"duplicate vip name", named + secondVIP, "vip[1].name", 19},
		// EAL limits `fulcrum run` hits.
		{"memory_mb too small for the hugepage tables", strings.Replace(base, "memory_mb = 256", "memory_mb = 256\nhugepages = true", 1) + "[conntrack]\ncapacity = 4194304\n", "eal.memory_mb", 3},
		{"memory_mb huge", strings.Replace(base, "memory_mb = 256", "memory_mb = 99999999999", 1), "eal.memory_mb", 3},
		{"worker lcore beyond RTE_MAX_LCORE", strings.Replace(base, "memory_mb = 256", "memory_mb = 256\nworker_lcores = [100000]", 1), "eal.worker_lcores", 4},
		{"main lcore beyond RTE_MAX_LCORE", strings.Replace(base, "memory_mb = 256", "memory_mb = 256\nmain_lcore = 128", 1), "eal.main_lcore", 4},
		{"file_prefix dotdot", strings.Replace(base, "memory_mb = 256", "memory_mb = 256\nfile_prefix = \"..\"", 1), "eal.file_prefix", 4},
		{"file_prefix dot", strings.Replace(base, "memory_mb = 256", "memory_mb = 256\nfile_prefix = \".\"", 1), "eal.file_prefix", 4},
		{"file_prefix shell", strings.Replace(base, "memory_mb = 256", "memory_mb = 256\nfile_prefix = \"a;b\"", 1), "eal.file_prefix", 4},
		// Maglev's own limit.
		{"table_size above maglev.MaxSize", strings.Replace(base, "port = 80", "port = 80\ntable_size = 10000019", 1), "vip[0].table_size", 14},
		// A backend the encapsulator cannot tunnel to (encap.Backend).
		{"multicast backend", strings.Replace(base, `"10.0.1.1"`, `"224.0.0.1"`, 1), "vip[0].backend[0].address", 16},
		{"loopback backend", strings.Replace(base, `"10.0.1.1"`, `"127.0.0.1"`, 1), "vip[0].backend[0].address", 16},
		// Addresses that cannot work: a VIP no router forwards to, a
		// backend or next hop that sends the tunnels back to the LB, a
		// next-hop MAC of no single host.
		{"vip unspecified", strings.Replace(base, `"203.0.113.7"`, `"0.0.0.0"`, 1), "vip[0].address", 12},
		{"vip broadcast", strings.Replace(base, `"203.0.113.7"`, `"255.255.255.255"`, 1), "vip[0].address", 12},
		{"vip multicast", strings.Replace(base, `"203.0.113.7"`, `"239.1.2.3"`, 1), "vip[0].address", 12},
		{"vip loopback", strings.Replace(base, `"203.0.113.7"`, `"127.0.0.2"`, 1), "vip[0].address", 12},
		{"vip link-local", strings.Replace(base, `"203.0.113.7"`, `"169.254.0.9"`, 1), "vip[0].address", 12},
		{"vip6 link-local", strings.Replace(strings.Replace(base, `"203.0.113.7"`, `"fe80::7"`, 1), `lb_ipv4 = "192.0.2.10"`, `lb_ipv4 = "192.0.2.10"`+"\nlb_ipv6 = \"2001:db8::10\"", 1), "vip[0].address", 13},
		{"backend at the vip", strings.Replace(base, `"10.0.1.1"`, `"203.0.113.7"`, 1), "vip[0].backend[0].address", 16},
		{"backend at another vip", base + strings.Replace(secondVIP, `"10.0.1.2"`, `"203.0.113.7"`, 1), "vip[1].backend[0].address", 22},
		{"backend at lb_ipv4", strings.Replace(base, `"10.0.1.1"`, `"192.0.2.10"`, 1), "vip[0].backend[0].address", 16},
		{"gateway at the vip", strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv4 = "203.0.113.7"`, 1), "dataplane.gateway_ipv4", 8},
		{"gateway at lb_ipv4", strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv4 = "192.0.2.10"`, 1), "dataplane.gateway_ipv4", 8},
		{"gateway unspecified", strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv4 = "0.0.0.0"`, 1), "dataplane.gateway_ipv4", 8},
		{"lb_ipv4 broadcast", strings.Replace(base, `lb_ipv4 = "192.0.2.10"`, `lb_ipv4 = "255.255.255.255"`, 1), "dataplane.lb_ipv4", 7},
		{"next hop mac broadcast", strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `next_hop_mac = "ff:ff:ff:ff:ff:ff"`, 1), "dataplane.next_hop_mac", 8},
		{"next hop mac multicast", strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `next_hop_mac = "33:33:00:00:00:01"`, 1), "dataplane.next_hop_mac", 8},
		{"next hop mac zero", strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `next_hop_mac = "00:00:00:00:00:00"`, 1), "dataplane.next_hop_mac", 8},
		// A missing key is reported at its table's header.
		{"missing vip address", strings.Replace(base, "address = \"203.0.113.7\"\n", "", 1), "vip[0].address", 11},
		// [bgp] errors carry lines.
		{"bgp neighbor port", base + bgpSection + "port = 70000\n", "bgp.neighbor[0].port", 23},
		{"bgp no neighbor", base + "[bgp]\nasn = 65001\nrouter_id = \"192.0.2.10\"\n", "bgp.neighbor", 17},
		{"bgp bad community", base + "[bgp]\nasn = 65001\nrouter_id = \"192.0.2.10\"\ncommunities = [\"x\"]\n[[bgp.neighbor]]\naddress = \"192.0.2.1\"\npeer_asn = 65000\n", "bgp.communities", 20},
		// Values decoded into the owning packages' types name their
		// indexed key, as every other problem does.
		{"bad df", strings.Replace(base, `port = "net_ring0"`, "port = \"net_ring0\"\ndf = \"maybe\"", 1), "dataplane.df", 7},
		{"second vip's encap", base + strings.Replace(secondVIP, "port = 80", "port = 80\nencap = \"vxlan\"", 1), "vip[1].encap", 21},
		{"bad scheduler", strings.Replace(base, "port = 80", "port = 80\nscheduler = \"wrr\"", 1), "vip[0].scheduler", 14},
		{"bad duration", base + "[conntrack]\nudp = \"soon\"\n", "conntrack.udp", 18},
	}
	// drain_time belongs to [bgp], before the neighbor table.
	cases[14].toml = base + "[bgp]\nasn = 65001\nrouter_id = \"192.0.2.10\"\ndrain_time = \"1h\"\n[[bgp.neighbor]]\naddress = \"192.0.2.1\"\npeer_asn = 65000\n"
	cases[14].key, cases[14].line = "bgp.drain_time", 20
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblemAt(t, tc.toml, tc.key, tc.line, "") })
	}
}

// The addresses next to the ones refused above are accepted: a /24's
// last address is an ordinary host behind a router, an IPv6 gateway is
// usually link-local, a router may also be a backend, and a locally
// administered unicast MAC is a host's.
func TestAddressesNearTheRefusedOnesParse(t *testing.T) {
	for name, toml := range map[string]string{
		"vip ending in 255":           strings.Replace(base, `"203.0.113.7"`, `"203.0.113.255"`, 1),
		"link-local ipv6 gateway":     strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv4 = "192.0.2.1"`+"\ngateway_ipv6 = \"fe80::1\"", 1),
		"gateway that is a backend":   strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `gateway_ipv4 = "10.0.1.1"`, 1),
		"locally administered mac":    strings.Replace(base, `gateway_ipv4 = "192.0.2.1"`, `next_hop_mac = "02:00:00:00:00:fe"`, 1),
		"backends shared by two vips": base + secondVIP,
	} {
		if _, err := Parse([]byte(toml), "f.toml"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The duplicate-name error cites the first use.
func TestDuplicateVIPNameCitesBothLines(t *testing.T) {
	named := strings.Replace(base, "port = 80", "port = 80\nname = \"web\"", 1)
	_, err := Parse([]byte(named+secondVIP), "f.toml")
	if err == nil {
		t.Fatal("two VIPs named web accepted")
	}
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].line != 19 || !strings.Contains(ps[0].msg, "line 14") {
		t.Errorf("got %+v, want one problem at line 19 citing line 14", ps)
	}
}

// Parse reports every problem of a file, each on its own line with its
// line number, and no line ends with the sentinel's text.
func TestParseReportsEveryProblem(t *testing.T) {
	bad := strings.Replace(base, "memory_mb = 256", "memory_mb = 1", 1)                              // line 3
	bad = strings.Replace(bad, "port = 80", "port = 70000", 1)                                       // line 13
	bad = strings.Replace(bad, "address = \"10.0.1.1\"", "address = \"10.0.1.1\"\n  weight = -1", 1) // line 17
	bad += "[health]\njitter = 3.0\n"                                                                // line 19
	_, err := Parse([]byte(bad), "f.toml")
	if err == nil {
		t.Fatal("accepted")
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("not ErrInvalid: %v", err)
	}
	var got []int
	for _, p := range problemsOf(t, err) {
		got = append(got, p.line)
		if strings.HasSuffix(p.msg, ErrInvalid.Error()) {
			t.Errorf("line %d ends with %q", p.line, ErrInvalid.Error())
		}
	}
	want := []int{3, 13, 17, 19}
	if len(got) != len(want) {
		t.Fatalf("lines %v, want %v: %v", got, want, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("lines %v, want %v: %v", got, want, err)
			break
		}
	}
}

// Never line 0: an empty file is at line 1, and so is a table that is
// missing altogether.
func TestNoLineZero(t *testing.T) {
	for _, tc := range []struct{ name, toml string }{
		{"empty", ""},
		{"comment only", "# nothing\n"},
		{"no dataplane", "[eal]\nmemory_mb = 256\n"},
		{"no vip", base[:strings.Index(base, "[[vip]]")]},
		{"unknown dotted key", base + "a.b = 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml), "f.toml")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, l := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(l, "f.toml:0:") || !strings.HasPrefix(l, "f.toml:") {
					t.Errorf("problem without a line: %q", l)
				}
			}
		})
	}
}

// panic_threshold = 0 disables panic mode, as the example says; absent, it
// is the default.
func TestPanicThresholdZeroDisables(t *testing.T) {
	for _, tc := range []struct {
		name string
		toml string
		want float64
	}{
		{"absent", base, DefaultPanicThreshold},
		{"zero", base + "[control]\npanic_threshold = 0.0\n", 0},
		{"set", base + "[control]\npanic_threshold = 0.3\n", 0.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.toml), "f.toml")
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Control.PanicThreshold; got != tc.want || math.IsNaN(got) {
				t.Errorf("panic_threshold %v, want %v", got, tc.want)
			}
		})
	}
}

// Every example parses, and its effective configuration (what `fulcrum
// check` prints) parses back to the same thing.
func TestExamplesParseAndRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../examples/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Encode()
			if err != nil {
				t.Fatal(err)
			}
			c2, err := Parse([]byte(s), "encoded")
			if err != nil {
				t.Fatalf("effective config does not parse: %v\n%s", err, s)
			}
			s2, _ := c2.Encode()
			if s2 != s {
				t.Errorf("round trip changed the config:\n%s\n---\n%s", s, s2)
			}
		})
	}
}

// A [bgp] section decodes into bgp.Config with its defaults filled in,
// and survives the effective-config round trip.
func TestBGPSectionDecodes(t *testing.T) {
	c, err := Parse([]byte(base+bgpSection+"hold_time = \"30s\"\n"), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.BGP == nil || c.BGP.ASN != 65001 || c.BGP.DrainTime != bgp.DefaultDrainTime || c.BGP.Neighbors[0].HoldTime != 30*time.Second || c.BGP.Neighbors[0].Port != bgp.DefaultPeerPort {
		t.Fatalf("bgp %+v", c.BGP)
	}
	s, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Parse([]byte(s), "encoded")
	if err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	if c2.BGP.Neighbors[0].HoldTime != 30*time.Second {
		t.Errorf("round trip: %+v", c2.BGP)
	}
}

// FuzzParse: no input makes Parse panic; an accepted config's effective
// form is accepted too; a rejected one has every problem at a line >= 1.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../examples/*.toml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(base))
	f.Add([]byte(base + bgpSection))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "f.toml")
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error is not Errors: %v", err)
			}
			for _, p := range es {
				if p.Line < 1 {
					t.Fatalf("problem at line %d: %v", p.Line, p)
				}
			}
			return
		}
		s, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse([]byte(s), "encoded"); err != nil {
			t.Fatalf("effective config rejected: %v\n%s", err, s)
		}
	})
}

// Many unknown keys are reported in linear time: the leaf test was
// quadratic (20000 unknown tables took 6m42s), a denial of service for a
// reload or a fuzzer.
func TestManyUnknownKeysAreLinear(t *testing.T) {
	const n = 20000
	var b strings.Builder
	b.WriteString(base)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[x%d]\ny = 1\n", i)
	}
	start := time.Now()
	_, err := Parse([]byte(b.String()), "f.toml")
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Parse took %v", d)
	}
	var es Errors
	if !errors.As(err, &es) || len(es) != n {
		t.Fatalf("%d problems, want one per unknown key (%d)", len(es), n)
	}
	if es[0].Key != "x0.y" || es[0].Line != 18 {
		t.Errorf("first problem %+v, want x0.y at line 18", es[0])
	}
}

// More VIPs or backends than the dataplane's snapshot holds are refused by
// Parse (so by `fulcrum check`), at the first one too many; before, only
// `fulcrum run` refused them, without a line.
func TestParseRejectsBeyondSnapshotLimits(t *testing.T) {
	head := base[:strings.Index(base, "[[vip]]")]
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", 1+i>>16, i>>8&255, i&255) }
	vips := func(n int) (string, int) { // n VIPs of one backend; the line of the last VIP's header
		var b strings.Builder
		b.WriteString(head)
		line := strings.Count(head, "\n") + 1
		last := 0
		for i := 0; i < n; i++ {
			last = line
			fmt.Fprintf(&b, "[[vip]]\naddress = %q\nport = 80\n[[vip.backend]]\naddress = %q\n", fmt.Sprintf("198.%d.%d.%d", 18+i>>16, i>>8&255, i&255), addr(i))
			line += 5
		}
		return b.String(), last
	}
	backends := func(n int) (string, int) { // one VIP of n backends; the line of the last backend's header
		var b strings.Builder
		b.WriteString(head)
		b.WriteString("[[vip]]\naddress = \"203.0.113.7\"\nport = 80\ntable_size = 655373\n")
		line := strings.Count(head, "\n") + 5
		last := 0
		for i := 0; i < n; i++ {
			last = line
			fmt.Fprintf(&b, "[[vip.backend]]\naddress = %q\n", addr(i))
			line += 2
		}
		return b.String(), last
	}
	for _, tc := range []struct {
		name  string
		build func(int) (string, int)
		max   int
		key   string
	}{
		{"vips", vips, conntrack.MaxVIPs, fmt.Sprintf("vip[%d]", conntrack.MaxVIPs)},
		{"backends", backends, conntrack.MaxBackends, fmt.Sprintf("vip[0].backend[%d]", conntrack.MaxBackends)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, _ := tc.build(tc.max)
			if _, err := Parse([]byte(at), "f.toml"); err != nil {
				t.Fatalf("%d accepted as the limit: %v", tc.max, err)
			}
			over, line := tc.build(tc.max + 1)
			_, err := Parse([]byte(over), "f.toml")
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 || es[0].Key != tc.key || es[0].Line != line {
				t.Fatalf("got %v, want one problem of %s at line %d", err, tc.key, line)
			}
		})
	}
}

// Every problem of the sections decoded into encap.Config and
// conntrack.Config is reported, each at its key's line.
func TestOwnedSectionsReportEveryProblem(t *testing.T) {
	bad := strings.Replace(base, `port = "net_ring0"`, "port = \"net_ring0\"\nttl = 300\nmtu = 10\ngue_port = 70000", 1) // lines 7-9
	bad += "[conntrack]\ntcp_syn = \"-1s\"\nudp = \"200h\"\n"                                                            // lines 21-22
	_, err := Parse([]byte(bad), "f.toml")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("not Errors: %v", err)
	}
	want := []struct {
		key  string
		line int
	}{{"dataplane.ttl", 7}, {"dataplane.mtu", 8}, {"dataplane.gue_port", 9}, {"conntrack.tcp_syn", 21}, {"conntrack.udp", 22}}
	if len(es) != len(want) {
		t.Fatalf("%d problems, want %d: %v", len(es), len(want), err)
	}
	for i, w := range want {
		if es[i].Key != w.key || es[i].Line != w.line || !strings.HasPrefix(es[i].Msg, w.key+": ") {
			t.Errorf("problem %d: %+v, want %s at line %d", i, es[i], w.key, w.line)
		}
	}
}

// The memory check is for hugepages only: with --no-huge the conntrack
// table is on the Go heap and memory_mb holds only the mbuf pools.
func TestMemoryCheckOnlyOnHugepages(t *testing.T) {
	big := base + "[conntrack]\ncapacity = 4194304\n"
	if _, err := Parse([]byte(big), "big.toml"); err != nil {
		t.Fatalf("4M entries with memory_mb = 256 off hugepages: %v", err)
	}
	fits := strings.Replace(base, "memory_mb = 256", "memory_mb = 512\nhugepages = true", 1) + "[conntrack]\ncapacity = 4194304\n"
	if _, err := Parse([]byte(fits), "fits.toml"); err != nil {
		t.Fatalf("4M entries (260 MiB) and 16,383 mbufs (38 MiB) in 512 MiB on hugepages: %v", err)
	}
}

// Health keys whose zero value means something keep an explicit zero:
// jitter = 0 turns jitter off, port = 0 checks the backend's own port,
// host = "" sends the backend's address, through = "" is direct. Before,
// an explicit zero was taken for an absent key, so jitter could not be
// turned off and [vip.health] could not undo a [health] port or host.
// Left out, the keys still come from [health], then package health.
func TestHealthZeroValuesAreKept(t *testing.T) {
	tcp := "[health]\nkind = \"tcp\"\n"
	for _, tc := range []struct {
		name    string
		toml    string
		vip     int // the VIP whose check is looked at
		jitter  float64
		port    int
		host    string
		through string
	}{
		{"defaults", base, 0, health.DefaultJitter, 0, "", health.ThroughDirect},
		{"[health] jitter = 0", base + tcp + "jitter = 0.0\n", 0, 0, 0, "", health.ThroughDirect},
		{"[health] jitter = 0.3 inherited", base + tcp + "jitter = 0.3\n", 0, 0.3, 0, "", health.ThroughDirect},
		{"[vip.health] jitter = 0", base + "[vip.health]\nkind = \"tcp\"\njitter = 0.0\n", 0, 0, 0, "", health.ThroughDirect},
		{"[vip.health] jitter = 0 over [health]", strings.Replace(base, "[[vip.backend]]", "[vip.health]\n  jitter = 0.0\n  [[vip.backend]]", 1) + tcp + "jitter = 0.3\n", 0, 0, 0, "", health.ThroughDirect},
		{"dotted key", strings.Replace(base, "port = 80\n", "port = 80\nhealth.jitter = 0.0\n", 1), 0, 0, 0, "", health.ThroughDirect},
		{"inline table", strings.Replace(base, "port = 80\n", "port = 80\nhealth = {kind = \"tcp\", jitter = 0.0}\n", 1), 0, 0, 0, "", health.ThroughDirect},
		{"second VIP inherits", strings.Replace(base, "[[vip.backend]]", "[vip.health]\n  jitter = 0.0\n  [[vip.backend]]", 1) + secondVIP + tcp + "jitter = 0.3\n", 1, 0.3, 0, "", health.ThroughDirect},
		{"[health] port inherited", base + tcp + "port = 8080\n", 0, health.DefaultJitter, 8080, "", health.ThroughDirect},
		{"[vip.health] port = 0 over [health]", strings.Replace(base, "[[vip.backend]]", "[vip.health]\n  port = 0\n  [[vip.backend]]", 1) + tcp + "port = 8080\n", 0, health.DefaultJitter, 0, "", health.ThroughDirect},
		{"[vip.health] host = \"\" over [health]", strings.Replace(base, "[[vip.backend]]", "[vip.health]\n  host = \"\"\n  [[vip.backend]]", 1) + "[health]\nkind = \"http\"\nhost = \"lb.example\"\n", 0, health.DefaultJitter, 0, "", health.ThroughDirect},
		{"[health] host inherited", base + "[health]\nkind = \"http\"\nhost = \"lb.example\"\n", 0, health.DefaultJitter, 0, "lb.example", health.ThroughDirect},
		{"[vip.health] through = \"\" over [health]", strings.Replace(base, "[[vip.backend]]", "[vip.health]\n  through = \"\"\n  [[vip.backend]]", 1) + tcp + "through = \"tunnel\"\n", 0, health.DefaultJitter, 0, "", health.ThroughDirect},
		{"[health] through inherited", base + tcp + "through = \"tunnel\"\n", 0, health.DefaultJitter, 0, "", health.ThroughTunnel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.toml), "f.toml")
			if err != nil {
				t.Fatal(err)
			}
			h := c.VIPs[tc.vip].Health
			if h.Jitter != tc.jitter || h.Port != tc.port || h.Host != tc.host || h.Through != tc.through {
				t.Errorf("jitter %v port %d host %q through %q; want %v %d %q %q", h.Jitter, h.Port, h.Host, h.Through, tc.jitter, tc.port, tc.host, tc.through)
			}
			// The effective configuration keeps them.
			s, err := c.Encode()
			if err != nil {
				t.Fatal(err)
			}
			c2, err := Parse([]byte(s), "encoded")
			if err != nil {
				t.Fatalf("%v\n%s", err, s)
			}
			if h2 := c2.VIPs[tc.vip].Health; h2.Jitter != h.Jitter || h2.Port != h.Port || h2.Host != h.Host || h2.Through != h.Through {
				t.Errorf("round trip: %+v, want %+v", h2.Config, h.Config)
			}
		})
	}
	// A VIP of every port still needs a port for its check, even one
	// written as 0 over a [health] port.
	all := strings.Replace(strings.Replace(base, "port = 80", "port = 0", 1), "[[vip.backend]]", "[vip.health]\n  port = 0\n  [[vip.backend]]", 1) + tcp + "port = 8080\n"
	wantProblemAt(t, all, "vip[0].health.port", 16, "is required")
}

// VIP and backend names are path segments of the admin API: "." and ".."
// are not (its router cleans them away, so /vip/web/backend/.. could not
// drain the backend), and invisible format characters (zero-width,
// bidirectional controls, the BOM) make one name look like another.
func TestNamesRefusedForTheAdminAPI(t *testing.T) {
	vipName := func(n string) string { return strings.Replace(base, "port = 80", "port = 80\nname = \""+n+"\"", 1) } // line 14
	beName := func(n string) string { return base + "  name = \"" + n + "\"\n" }                                     // line 17
	for _, n := range []string{".", "..", "a\u200bb", "\u200c", "web\u200d", "a\u200eb", "\u200f", "\u202ea", "a\u202ab", "\u2066x\u2069", "\u2068", "\ufeffweb"} {
		t.Run(fmt.Sprintf("vip %+q", n), func(t *testing.T) { wantProblemAt(t, vipName(n), "vip[0].name", 14, "is not a name") })
		t.Run(fmt.Sprintf("backend %+q", n), func(t *testing.T) { wantProblemAt(t, beName(n), "vip[0].backend[0].name", 17, "is not a name") })
	}
	for _, n := range []string{"a.b", "...", "..a", ".a", "web-1", "café", "東京"} {
		for _, toml := range []string{vipName(n), beName(n)} {
			if _, err := Parse([]byte(toml), "f.toml"); err != nil {
				t.Errorf("name %q refused: %v", n, err)
			}
		}
	}
}

// dataplane.exception_iface is refused where Linux refuses the name
// (dev_valid_name: empty, "." or "..", 16 bytes or more, '/', ':' or a
// blank byte, 0xA0 included), where the kernel would pick the name ('%'),
// and where DPDK's "iface=NAME,mac=..." devargs could not carry it.
func TestExceptionIfaceIsALinuxName(t *testing.T) {
	with := func(n string) string {
		return strings.Replace(base, `port = "net_ring0"`, "port = \"net_ring0\"\nexception_iface = \""+n+"\"", 1) // line 7
	}
	for _, n := range []string{"a:b", "a:0", "a/b", "a b", "a\\tb", ".", "..", "tap%d", "a,b", "a=b", "à", strings.Repeat("a", 16)} {
		t.Run(fmt.Sprintf("%+q", n), func(t *testing.T) {
			wantProblemAt(t, with(n), "dataplane.exception_iface", 7, "is not a Linux interface name")
		})
	}
	for _, n := range []string{"fulcrum0", "lb-tap.1", "...", "é", strings.Repeat("a", 15)} {
		if _, err := Parse([]byte(with(n)), "f.toml"); err != nil {
			t.Errorf("%q refused: %v", n, err)
		}
	}
}

// Unknown keys are reported once per occurrence, each at its own line:
// the same typo in two backends, keys inside inline tables and dotted
// keys. Before, every occurrence was at the first one's line, and a key
// only the decoder saw (in an inline table) at line 1.
func TestUnknownKeysAtTheirOwnLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		toml string
	}{
		{"two backends", base + "  wieght = 2\n  [[vip.backend]]\n  address = \"10.0.1.2\"\n  wieght = 3\n"},
		{"two vips", strings.Replace(base, "port = 80\n", "port = 80\nnmae = \"a\"\n", 1) + strings.Replace(secondVIP, "port = 80\n", "port = 80\nnmae = \"b\"\n", 1)},
		{"inline table", strings.Replace(base, "  [[vip.backend]]\n  address = \"10.0.1.1\"\n", "backend = [{address = \"10.0.1.1\", wieght = 2}]\n", 1)},
		{"inline tables on two lines", strings.Replace(base, "  [[vip.backend]]\n  address = \"10.0.1.1\"\n", "backend = [{address = \"10.0.1.1\"}, {address = \"10.0.1.2\", wieght = 2}]\n", 1) + strings.Replace(secondVIP, "  [[vip.backend]]\n  address = \"10.0.1.2\"\n", "backend = [{ address = \"10.0.1.2\", health = {x = 1}, wieght = 1 }]\n", 1)},
		{"dotted keys", strings.Replace(base, "port = 80\n", "port = 80\nhealth.jitterr = 0.1\n", 1) + strings.Replace(secondVIP, "port = 80\n", "port = 80\nhealth . jitterr = 0.2\n", 1)},
		{"a string that looks like a key", strings.Replace(base, "port = 80\n", "port = 80\nhealth = {kind = \"tcp\", path = \"/x, wieght = 1\", wieght = 2}\n", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each line that holds a typo (wieght, nmae, jitterr, x)
			// holds one reported problem per typo on it.
			want := map[int]int{}
			for i, l := range strings.Split(tc.toml, "\n") {
				l = strings.ReplaceAll(l, `"/x, wieght = 1"`, "")
				want[i+1] += strings.Count(l, "wieght") + strings.Count(l, "nmae") + strings.Count(l, "jitterr") + strings.Count(l, "{x = ")
			}
			_, err := Parse([]byte(tc.toml), "f.toml")
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("not Errors: %v", err)
			}
			got := map[int]int{}
			for _, p := range es {
				if !strings.HasPrefix(p.Msg, "unknown key") {
					t.Errorf("unexpected problem %v", p)
				}
				got[p.Line]++
			}
			for line, n := range want {
				if got[line] != n {
					t.Errorf("line %d: %d unknown keys reported, want %d: %v", line, got[line], n, err)
				}
			}
		})
	}
}

// [bgp] against the [[vip]]s: a [[bgp.vip]] prefix that is not the /32 or
// /128 of a VIP address would be ignored (the control plane announces
// those prefixes and matches them exactly), and a VIP of a family that no
// session carries would be announced to no router. Both are refused at
// the key to fix; what would work is accepted.
func TestBGPAgainstVIPs(t *testing.T) {
	bgpVIP := func(prefix string) string { return "[[bgp.vip]]\nprefix = \"" + prefix + "\"\nmed = 5\n" }
	six := strings.Replace(secondVIP, `"203.0.113.8"`, `"2001:db8:7::7"`, 1)
	v6Neighbor := strings.Replace(bgpSection, `address = "192.0.2.1"`, `address = "2001:db8::1"`, 1)
	// base ends at line 16, bgpSection at 22: [[bgp.vip]] is at 23.
	t.Run("covering prefix", func(t *testing.T) {
		wantProblemAt(t, base+bgpSection+bgpVIP("203.0.113.0/24"), "bgp.vip[0].prefix", 24, "one [[bgp.vip]] per VIP it covers: 203.0.113.7/32")
	})
	t.Run("typo", func(t *testing.T) {
		wantProblemAt(t, base+bgpSection+bgpVIP("203.0.113.70"), "bgp.vip[0].prefix", 24, "no [[vip]] has that address")
	})
	t.Run("second entry", func(t *testing.T) {
		wantProblemAt(t, base+bgpSection+bgpVIP("203.0.113.7")+bgpVIP("2001:db8:7::7/128"), "bgp.vip[1].prefix", 27, "is not the prefix of a VIP")
	})
	t.Run("ipv4 vip, ipv6 neighbours only", func(t *testing.T) {
		wantProblemAt(t, base+v6Neighbor, "bgp.next_hop_v4", 17, "set bgp.next_hop_v4")
	})
	t.Run("ipv6 vip, ipv4 neighbours only", func(t *testing.T) {
		wantProblemAt(t, base+six+bgpSection, "bgp.next_hop_v6", 23, "the IPv6 VIPs (2001:db8:7::7/128)")
	})
	for name, toml := range map[string]string{
		"vip address":             base + bgpSection + bgpVIP("203.0.113.7"),
		"vip /32":                 base + bgpSection + bgpVIP("203.0.113.7/32"),
		"vip /128":                base + six + strings.Replace(bgpSection, "[[bgp.neighbor]]", "next_hop_v6 = \"2001:db8::10\"\n[[bgp.neighbor]]", 1) + bgpVIP("2001:db8:7::7/128"),
		"ipv6 session, next hop":  base + strings.Replace(v6Neighbor, "[[bgp.neighbor]]", "next_hop_v4 = \"192.0.2.10\"\n[[bgp.neighbor]]", 1),
		"a session of each":       base + six + bgpSection + "[[bgp.neighbor]]\naddress = \"2001:db8::1\"\npeer_asn = 65000\n",
		"no vip of the other one": base + bgpSection,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(toml), "f.toml"); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}
