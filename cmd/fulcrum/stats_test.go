package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
)

// fixedWorker answers Snapshot with fixed counters.
type fixedWorker struct{ c dataplane.Counters }

func (f *fixedWorker) Snapshot(dst *dataplane.Counters, _ time.Duration) bool {
	vips, backends := dst.VIPs, dst.Backends
	*dst = f.c
	dst.VIPs = append(vips[:0], f.c.VIPs...)
	dst.Backends = append(backends[:0], f.c.Backends...)
	return true
}

func TestStatsJSON(t *testing.T) {
	a := &fixedWorker{c: dataplane.Counters{RxPackets: 10, TxPackets: 9, CTHits: 7, CTMisses: 3, Flows: 3,
		VIPs: []dataplane.PacketBytes{{NewFlows: 2}, {NewFlows: 1}}}}
	a.c.Encap[encap.Forward] = 9
	a.c.Drops[dataplane.DropNoService] = 1
	a.c.Conntrack.Inserts, a.c.Conntrack.InsertFailed = 3, 0
	b := &fixedWorker{c: dataplane.Counters{RxPackets: 5, TxPackets: 5, CTHits: 1, CTMisses: 4, Flows: 4,
		VIPs: []dataplane.PacketBytes{{NewFlows: 4}}}}
	b.c.Conntrack.Inserts, b.c.Conntrack.InsertFailed = 3, 1
	sr := newStatsReader([]snapshotter{a, b})
	defer sr.stop()
	var out strings.Builder
	if err := sr.writeJSON(&out, time.UnixMilli(1700000000123)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "}\n") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("not one line: %q", out.String())
	}
	type fields struct {
		Rx, Tx, Forwarded, Dropped uint64
		CTHits                     uint64 `json:"ct_hits"`
		CTMisses                   uint64 `json:"ct_misses"`
		CTInserts                  uint64 `json:"ct_inserts"`
		CTInsertFailed             uint64 `json:"ct_insert_failed"`
		NewFlows                   uint64 `json:"new_flows"`
		Flows                      uint64
	}
	var got struct {
		TimeUnixMs int64 `json:"time_unix_ms"`
		Workers    int
		fields
		PerWorker []fields `json:"per_worker"`
	}
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	want := fields{Rx: 15, Tx: 14, Forwarded: 9, Dropped: 1, CTHits: 8, CTMisses: 7, CTInserts: 6, CTInsertFailed: 1, NewFlows: 7, Flows: 7}
	if got.TimeUnixMs != 1700000000123 || got.Workers != 2 || got.fields != want {
		t.Errorf("sum: got %+v (time %d, workers %d), want %+v", got.fields, got.TimeUnixMs, got.Workers, want)
	}
	if len(got.PerWorker) != 2 || got.PerWorker[0].Rx != 10 || got.PerWorker[1].NewFlows != 4 || got.PerWorker[1].CTInsertFailed != 1 {
		t.Errorf("per worker: %+v", got.PerWorker)
	}
}

const statsConfig = `
[dataplane]
port = "net_ring0"
lb_ipv4 = "192.0.2.10"
next_hop_mac = "02:00:00:00:00:fe"
hash_key = "000102030405060708090a0b0c0d0e0f"

[conntrack]
capacity = 4096

[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
  [[vip.backend]]
  address = "10.0.1.1"
  [[vip.backend]]
  address = "10.0.1.2"
  [[vip.backend]]
  address = "10.0.1.3"
`

// The daemon's periodic stats path (snapshots of real workers that
// forward between them, and the --stats-json line) allocates nothing in
// steady state: no GC cycle however long the daemon runs.
func TestStatsPathAllocatesNothing(t *testing.T) {
	cfg, err := config.Parse([]byte(statsConfig), "stats.toml")
	if err != nil {
		t.Fatal(err)
	}
	key, err := flow.ParseKey(cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	mac := [6]byte{2, 0, 0, 0, 0, 1}
	shared := &dataplane.Shared{}
	var workers []*dataplane.Worker
	for i := 0; i < 2; i++ {
		w, err := dataplane.NewWorker(i, shared, cfg.Conntrack, key, mac)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}
	plane, err := control.New(cfg, shared, workers, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}

	// Each worker's lcore: a SYN burst (new flows) then idle polls, until
	// stopped. Process allocates nothing (dataplane's tests).
	stop, done := make(chan struct{}), make(chan struct{}, len(workers))
	for i, w := range workers {
		f := synFrame(t, mac, uint16(1000+i))
		buf := make([]byte, 128+len(f))
		go func() {
			defer func() { done <- struct{}{} }()
			now := conntrack.Time(1000)
			pkts := make([]dataplane.Pkt, 1)
			for {
				select {
				case <-stop:
					return
				default:
				}
				now++
				copy(buf[128:], f)
				pkts[0] = dataplane.Pkt{Buf: buf, Off: 128, Len: len(f)}
				w.Process(pkts, now)
				for k := 0; k < 100; k++ {
					w.Idle(now)
				}
				runtime.Gosched() // more lcores than CPUs here

			}
		}()
	}
	defer func() {
		close(stop)
		for range workers {
			<-done
		}
	}()

	snaps := make([]snapshotter, len(workers))
	for i, w := range workers {
		snaps[i] = w
	}
	sr := newStatsReader(snaps)
	defer sr.stop()
	cycle := func() {
		if err := sr.writeJSON(io.Discard, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ { // warm-up: the first readings size the buffers
		cycle()
	}
	var before, after runtime.MemStats
	// A cycle the setup's garbage started would end inside the loop and
	// count there (seen once under a full parallel test run): finish it.
	runtime.GC()
	runtime.ReadMemStats(&before)
	const cycles = 100
	for i := 0; i < cycles; i++ {
		cycle()
	}
	runtime.ReadMemStats(&after)
	// The runtime's own rare small allocation is tolerated (see
	// dataplane's TestSnapshotReusesItsMemory): 2 and 256 bytes in all.
	if n, b := after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc; (n > 2 || b > 256) && !raceEnabled {
		t.Errorf("%d stats readings allocated %d times (%d bytes)", cycles, n, b)
	}
	if n := after.NumGC - before.NumGC; n != 0 {
		t.Errorf("%d GC cycles during %d stats readings", n, cycles)
	}
	cs := sr.read()
	svc := shared.Services.Load()
	for i := range cs {
		if cs[i].RxPackets == 0 || len(cs[i].Backends) != svc.NumBackendIDs() || len(cs[i].VIPs) != len(svc.VIPs) {
			t.Errorf("worker %d: rx %d, %d backends, %d VIPs; want traffic, %d and %d", i, cs[i].RxPackets, len(cs[i].Backends), len(cs[i].VIPs), svc.NumBackendIDs(), len(svc.VIPs))
		}
	}

	// The admin API's reader keeps its memory too: the second reading
	// lands in the first one's arrays.
	var buf control.StatusBuf
	st1 := plane.StatusInto(true, &buf)
	p1 := &st1.Workers[0].Backends[0]
	st2 := plane.StatusInto(true, &buf)
	if p2 := &st2.Workers[0].Backends[0]; p1 != p2 {
		t.Error("StatusInto did not reuse its StatusBuf's counters")
	}
	var pkts uint64
	for _, v := range st2.VIPs {
		pkts += v.Packets
	}
	if pkts == 0 {
		t.Error("status shows no forwarded packets")
	}
}

func synFrame(t *testing.T, mac [6]byte, sport uint16) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 51, 100, 10}, DstIP: net.IP{203, 0, 113, 7}}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 80, SYN: true, Window: 100}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	b := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(b, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, DstMAC: mac[:], EthernetType: layers.EthernetTypeIPv4}, ip, tcp)
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
