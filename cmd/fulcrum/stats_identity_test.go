package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// TestStatsJSONAccountsEveryPacket: the --stats-json line (the
// harness's and a script's view of the counters) must let rx be told
// apart into its outcomes, docs/drop-reasons.md's identity
// rx = forwarded + icmp-reply + echo replies + punted + drops: a ping to
// a VIP answered by the LB is in rx and must be in some field.
func TestStatsJSONAccountsEveryPacket(t *testing.T) {
	w, _, mac := statsWorker(t)
	w.SetExceptionPath(true)
	var frames [][]byte
	for i := 0; i < 5; i++ {
		frames = append(frames, synFrame(t, mac, uint16(2000+i)))
	}
	for i := 0; i < 5; i++ {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{198, 51, 100, 10}, DstIP: net.IP{203, 0, 113, 7}}
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: uint16(i)}
		b := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(b, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, DstMAC: mac[:], EthernetType: layers.EthernetTypeIPv4}, ip, icmp, gopacket.Payload("ping")); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b.Bytes())
	}
	pkts := make([]dataplane.Pkt, len(frames))
	for i, f := range frames {
		buf := make([]byte, 128+len(f)+64)
		copy(buf[128:], f)
		pkts[i] = dataplane.Pkt{Buf: buf, Off: 128, Len: len(f)}
	}
	w.Process(pkts, 1000)
	for i, v := range w.Verdicts[:len(pkts)] {
		if v != dataplane.Tx {
			t.Fatalf("packet %d: verdict %v", i, v)
		}
	}
	fw := &fixedWorker{c: *w.Local()}
	sr := newStatsReader([]snapshotter{fw})
	var out strings.Builder
	if err := sr.writeJSON(&out, time.UnixMilli(1)); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatal(err)
	}
	num := func(k string) uint64 {
		f, _ := got[k].(float64)
		return uint64(f)
	}
	rx := num("rx")
	sum := num("forwarded") + num("icmp_replies") + num("echo_replies") + num("punted") + num("dropped")
	if rx != 10 || sum != rx {
		t.Errorf("--stats-json: rx %d, outcomes add up to %d (5 SYNs forwarded, 5 pings answered): %s", rx, sum, out.String())
	}
}

// statsWorker is one worker of statsConfig under a control plane (its
// snapshot published), and the port's MAC.
func statsWorker(t *testing.T) (*dataplane.Worker, *control.Plane, [6]byte) {
	t.Helper()
	cfg, err := config.Parse([]byte(statsConfig), "stats.toml")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := flow.ParseKey(cfg.Dataplane.HashKey)
	mac := [6]byte{2, 0, 0, 0, 0, 1}
	shared := &dataplane.Shared{}
	w, err := dataplane.NewWorker(0, shared, cfg.Conntrack, key, mac)
	if err != nil {
		t.Fatal(err)
	}
	plane, err := control.New(cfg, shared, []*dataplane.Worker{w}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return w, plane, mac
}
