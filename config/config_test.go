package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/health"
	"github.com/fulcrumlb/fulcrum/maglev"
	"github.com/fulcrumlb/fulcrum/punt"
	"github.com/fulcrumlb/fulcrum/sched"
)

func TestExampleLoads(t *testing.T) {
	c, err := Load("../examples/pcap.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.VIPs) != 2 || len(c.VIPs[0].Backends) != 3 {
		t.Fatalf("vips %d backends %d", len(c.VIPs), len(c.VIPs[0].Backends))
	}
	if w := *c.VIPs[0].Backends[1].Weight; w != 2 {
		t.Errorf("be2 weight %d, want 2", w)
	}
	if w := *c.VIPs[0].Backends[0].Weight; w != 1 {
		t.Errorf("default weight %d, want 1", w)
	}
	if c.VIPs[1].Backends[1].Name != "10.0.2.2" {
		t.Errorf("default backend name %q, want its address", c.VIPs[1].Backends[1].Name)
	}
	if c.VIPs[0].TableSize != maglev.DefaultSize || *c.VIPs[1].Encap != encap.GUE || *c.VIPs[0].Encap != encap.GRE {
		t.Errorf("defaults: table %d encaps %s %s", c.VIPs[0].TableSize, *c.VIPs[0].Encap, *c.VIPs[1].Encap)
	}
	if c.Conntrack.TCPEstablishedTimeout != 300*time.Second || c.Conntrack.Capacity != 65536 {
		t.Errorf("conntrack %+v", c.Conntrack)
	}
	if !c.Dataplane.NextHopMAC.Set || c.Dataplane.NextHopMAC.HW[5] != 0xfe {
		t.Errorf("next hop MAC %+v", c.Dataplane.NextHopMAC)
	}
	// The effective config round-trips.
	s, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Parse([]byte(s), "encoded")
	if err != nil {
		t.Fatalf("re-parse of encoded config: %v\n%s", err, s)
	}
	if len(c2.VIPs) != 2 || c2.VIPs[1].Backends[1].Address != c.VIPs[1].Backends[1].Address {
		t.Errorf("round trip lost data:\n%s", s)
	}
}

const base = `
[eal]
memory_mb = 256

[dataplane]
port = "net_ring0"
lb_ipv4 = "192.0.2.10"
gateway_ipv4 = "192.0.2.1"
hash_key = "000102030405060708090a0b0c0d0e0f"

[[vip]]
address = "203.0.113.7"
port = 80

  [[vip.backend]]
  address = "10.0.1.1"
`

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		name string
		toml string
		line int    // expected line in the error (0: don't check)
		want string // substring of the error
	}{
		{"syntax", "[eal\nmemory_mb = 1", 0, "expected"},
		{"unknown key", base + "  wieght = 3\n", 17, `unknown key "vip.backend.wieght"`},
		{"unknown table", base + "[admn]\nlisten = \"x\"\n", 18, `unknown key "admn.listen"`},
		{"bad address", strings.Replace(base, `"10.0.1.1"`, `"10.0.1.300"`, 1), 16, "not an IP address"},
		{"table size not prime", strings.Replace(base, "port = 80", "port = 80\ntable_size = 65536", 1), 14, "not a prime"},
		{"missing port", strings.Replace(base, `port = "net_ring0"`, "", 1), 5, "dataplane.port: is required"},
		{"hash key short", strings.Replace(base, "0e0f", "", 1), 9, "32 hex digits"},
		{"v6 backend without lb_ipv6", strings.Replace(base, `"10.0.1.1"`, `"2001:db8::1"`, 1), 16, "lb_ipv6 is not set"},
		{"negative weight", base + "  weight = -1\n", 17, "weight -1 is outside"},
		{"all drained", base + "  weight = 0\n", 11, "every backend has weight 0"},
		{"duplicate vip", base + "\n[[vip]]\naddress = \"203.0.113.7\"\nport = 80\n  [[vip.backend]]\n  address = \"10.0.1.2\"\n", 19, "already configured at line 12"},
		{"duplicate backend", base + "  [[vip.backend]]\n  address = \"10.0.1.1\"\n", 18, "listed twice"},
		{"second vip's backend", base + "\n[[vip]]\naddress = \"203.0.113.8\"\n  [[vip.backend]]\n  address = \"10.0.1.1\"\n  [[vip.backend]]\n  address = \"nope\"\n", 23, "not an IP address"},
		{"bad protocol", strings.Replace(base, "port = 80", "port = 80\nprotocol = \"sctp\"", 1), 14, `"sctp" is not tcp or udp`},
		{"bad duration", base + "[conntrack]\nudp = \"soon\"\n", 18, "not a duration"},
		{"vip is lb address", strings.Replace(base, `address = "203.0.113.7"`, `address = "192.0.2.10"`, 1), 12, "LB's own address"},
		{"no vip", base[:strings.Index(base, "[[vip]]")], 0, "no [[vip]]"},
		{"wrong type", strings.Replace(base, "port = 80", `port = "http"`, 1), 13, "incompatible types"},
		{"no next hop", strings.Replace(base, "gateway_ipv4 = \"192.0.2.1\"\n", "", 1), 15, "no next hop toward backend 10.0.1.1"},
		{"bad df", strings.Replace(base, `port = "net_ring0"`, "port = \"net_ring0\"\ndf = \"maybe\"", 1), 7, "want one of inherit, set, clear"},
		{"burst too big", strings.Replace(base, `port = "net_ring0"`, "port = \"net_ring0\"\nburst = 1000", 1), 7, "outside 1..64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml), "f.toml")
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.line > 0 && !strings.HasPrefix(err.Error(), "f.toml:"+strconv.Itoa(tc.line)+":") {
				t.Errorf("error %q is not at line %d", err, tc.line)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("/nonexistent/fulcrum.toml")
	if err == nil || errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want a read error that is not ErrInvalid", err)
	}
}

func TestBaseIsValid(t *testing.T) {
	c, err := Parse([]byte(base), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.EAL.WorkerLcores) != 1 || c.EAL.WorkerLcores[0] != 1 || c.Dataplane.DF != encap.DFInherit || c.Dataplane.LBPrefix4 != 24 {
		t.Errorf("defaults: workers %v df %q prefix %d", c.EAL.WorkerLcores, c.Dataplane.DF, c.Dataplane.LBPrefix4)
	}
}

// examples/fulcrum.toml documents every option with its default: loading
// it must give the same values as leaving them out.
func TestFullExampleStatesTheDefaults(t *testing.T) {
	full, err := Load("../examples/fulcrum.toml")
	if err != nil {
		t.Fatal(err)
	}
	if full.Dataplane.Burst != conntrack.DefaultBurst || full.Conntrack.Capacity != conntrack.DefaultCapacity || full.Control.PanicThreshold != DefaultPanicThreshold ||
		full.Health.Interval != health.DefaultInterval || full.Health.Rise != health.DefaultRise || full.Admin.Listen != DefaultAdminListen ||
		full.VIPs[0].TableSize != maglev.DefaultSize || full.Dataplane.IdleMaxSleep != DefaultIdleMaxSleep || full.Dataplane.Punt != punt.Default {
		t.Errorf("examples/fulcrum.toml disagrees with the defaults: %+v", full)
	}
	if v := full.VIPs[0]; v.Scheduler != sched.Maglev || v.Draws != 2 || v.Penalty.String() != "30ms" || v.Health.Passive != "on" || v.Health.PassiveMin != 20 {
		t.Errorf("scheduler and passive defaults: %+v", v)
	}
	if h := full.VIPs[0].Health; h.Kind != "http" || h.Path != "/healthz" || h.Fall != health.DefaultFall {
		t.Errorf("vip health override: %+v", h)
	}
}

// TestLoadRefusesWhatIsNoFile: a FIFO, a directory or a device named as
// the configuration gets an error at once (a FIFO with no writer would
// otherwise block the reader for ever, and /dev/zero would be read
// without end); a file over MaxFileSize is refused without being read
// whole.
func TestLoadRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxFileSize+1); err != nil { // sparse
		t.Fatal(err)
	}
	for _, path := range []string{fifo, dir, "/dev/zero", big} {
		done := make(chan error, 1)
		go func() {
			_, err := Load(path)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("Load(%s) accepted", path)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) still reading after 10 s", path)
		}
	}
}
