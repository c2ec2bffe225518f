//go:build dpdk && lab

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/internal/quiclb"
)

// QUIC connection-ID routing in the lab (docs/quic.md): the backends run
// fulcrum-labsrv's QUIC download service on the VIP's UDP port 443, each
// writing its number as the server id of its connection IDs, and the LBs
// route the "quic" VIP's short headers by it (lab.sh quic_vip_conf).

// quicEnv starts the test binary as a QUIC client in the client namespace:
// "ADDR:PORT,SIZE,PORT1,PORT2" downloads SIZE octets from ADDR:PORT over
// one connection from local port PORT1 and moves the connection to local
// port PORT2 halfway (quiclb.Download). It prints one quicRun as JSON.
const quicEnv = "FULCRUM_LAB_QUIC"

// The child runs before TestMain, so this file adds it without touching
// lab_test.go's dispatch.
func init() {
	if spec := os.Getenv(quicEnv); spec != "" {
		os.Exit(quicChild(spec))
	}
}

// quicRun is what one child download did.
type quicRun struct {
	Server   string `json:"server"`
	Bytes    uint64 `json:"bytes"`
	Migrated bool   `json:"migrated"`
	Err      string `json:"err,omitempty"`
}

func quicChild(spec string) int {
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		fmt.Fprintf(os.Stderr, "%s=%q: want ADDR:PORT,SIZE,PORT1,PORT2\n", quicEnv, spec)
		return 2
	}
	dst, err1 := netip.ParseAddrPort(parts[0])
	size, err2 := strconv.ParseUint(parts[1], 10, 64)
	p1, err3 := strconv.ParseUint(parts[2], 10, 16)
	p2, err4 := strconv.ParseUint(parts[3], 10, 16)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || size > 1<<30 {
		fmt.Fprintf(os.Stderr, "%s=%q: want ADDR:PORT,SIZE (<= 1 GiB),PORT1,PORT2\n", quicEnv, spec)
		return 2
	}
	listen := func(port uint64) (*quic.Transport, error) {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: int(port)})
		if err != nil {
			return nil, err
		}
		return &quic.Transport{Conn: c}, nil
	}
	var run quicRun
	tr1, err := listen(p1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer tr1.Close()
	tr2, err := listen(p2)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer tr2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := quiclb.Download(ctx, tr1, net.UDPAddrFromAddrPort(dst), size, tr2)
	run = quicRun{Server: res.Server, Bytes: res.Bytes, Migrated: res.Migrated}
	if err != nil {
		run.Err = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(run)
	return 0
}

// quicDownload runs one child download from port p1, moving to p2.
func quicDownload(t *testing.T, size uint64, p1, p2 uint16) quicRun {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := ns("fl-client", self, "-test.run=^$")
	c.Env = append(os.Environ(), fmt.Sprintf("%s=%s:443,%d,%d,%d", quicEnv, vip, size, p1, p2))
	out, err := c.Output()
	if err != nil {
		t.Fatalf("quic client: %v\n%s", err, out)
	}
	var r quicRun
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("quic client said %q: %v", out, err)
	}
	return r
}

// tableBackend is the backend the LBs' table gives a new UDP flow from the
// client's port to the VIP's port 443 (fulcrumctl lookup; both LBs agree).
func tableBackend(t *testing.T, port uint16) string {
	t.Helper()
	var names [2]string
	for lb := 1; lb <= 2; lb++ {
		var l api.Lookup
		if err := json.Unmarshal(ctl(t, lb, "lookup", "10.77.1.2", vip, strconv.Itoa(int(port)), "443", "udp"), &l); err != nil {
			t.Fatal(err)
		}
		if l.Reason != "table" {
			t.Fatalf("lookup of client port %d on lb%d: reason %q, want a new flow's table slot", port, lb, l.Reason)
		}
		names[lb-1] = l.Backend
	}
	if names[0] != names[1] {
		t.Fatalf("client port %d: lb1 says %s, lb2 %s", port, names[0], names[1])
	}
	return names[0]
}

// portPair is two client ports whose flows the table sends to different
// backends: a connection that moves from the first to the second leaves
// its backend unless something other than the 5-tuple routes it.
func portPair(t *testing.T, seed int) (p1, p2 uint16, b1 string) {
	t.Helper()
	p1 = uint16(20000 + 997*seed%20000)
	b1 = tableBackend(t, p1)
	for p2 = p1 + 1; tableBackend(t, p2) == b1; p2++ {
	}
	return p1, p2, b1
}

// quicCounters sums a QUIC path counter over both LBs.
func quicCounters(t *testing.T, path string) uint64 {
	t.Helper()
	return status(t, 1).Total.QUIC[path] + status(t, 2).Total.QUIC[path]
}

// 14. QUIC: a client downloads 4 MiB over one QUIC connection and halfway
// moves it to a new local port (RFC 9000 path migration) whose 5-tuple the
// LBs' table sends to another backend; the routers may move it to the
// other LB too. With quic = true every download completes, byte for byte,
// from the backend that took the handshake (the table's choice for the
// first port), and the LBs count short headers routed by connection ID.
// Then the contrast, in the same run: with quic off the same moves land
// on the other backend, which has no such connection, and every one
// fails.
func TestQUICMigrationKeepsItsBackend(t *testing.T) {
	waitFor(t, "the quic VIP's backends up on both LBs", 30*time.Second, func() bool {
		for lb := 1; lb <= 2; lb++ {
			var v api.VIP
			if json.Unmarshal(ctl(t, lb, "backends", "quic"), &v) != nil || len(v.Backends) != 4 {
				return false
			}
			for _, b := range v.Backends {
				if b.Health != "up" {
					return false
				}
			}
		}
		return true
	})
	const size = 4 << 20
	routed0, unknown0 := quicCounters(t, "routed"), quicCounters(t, "unknown-id")
	for k := range 3 {
		p1, p2, b1 := portPair(t, k)
		r := quicDownload(t, size, p1, p2)
		t.Logf("download %d: port %d (table: %s) -> %d (table: %s): %+v", k, p1, b1, p2, tableBackend(t, p2), r)
		if r.Err != "" || r.Bytes != size || !r.Migrated || r.Server != b1 {
			t.Errorf("download %d: %+v, want %d octets from %s after migrating", k, r, size, b1)
		}
	}
	routed, unknown := quicCounters(t, "routed")-routed0, quicCounters(t, "unknown-id")-unknown0
	t.Logf("short headers routed by connection ID: %d; unknown ids: %d", routed, unknown)
	if routed == 0 || unknown != 0 {
		t.Errorf("routed %d, unknown-id %d: want some routed, no unknown ids", routed, unknown)
	}

	// The contrast: the same VIP without QUIC routing.
	reload := func(edit func(string) string) {
		for lb := 1; lb <= 2; lb++ {
			conf := edit(must(t, exec.Command(script, "lb-conf", fmt.Sprint(lb))))
			os.WriteFile(filepath.Join(labDir, fmt.Sprintf("lb%d.toml", lb)), []byte(conf), 0o644)
			ctl(t, lb, "reload")
		}
	}
	quicOff := regexp.MustCompile(`(?m)^(quic = true|  quic_id = \d+)\n`)
	reload(func(s string) string { return quicOff.ReplaceAllString(s, "") })
	t.Cleanup(func() { reload(func(s string) string { return s }) })
	for k := range 2 {
		p1, p2, b1 := portPair(t, 10+k)
		r := quicDownload(t, size, p1, p2)
		t.Logf("quic off, download %d: port %d (%s) -> %d: %+v", k, p1, b1, p2, r)
		if r.Err == "" || r.Bytes == size {
			t.Errorf("quic off, download %d survived a move to another backend: %+v", k, r)
		}
	}
}
